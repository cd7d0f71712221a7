"""What each operator tells the shared test suites and the benchmark about itself (ops/<name>/testing.py).

The suites (tests/ops) and `python -m bench` iterate over every operator's SPEC, and each sample is
a test of its own whose id starts with the op's name (`pytest tests/ops -k rms_norm` runs all of an
op's tests, `-k "rms_norm and 3x5"` one sample). The contract, what every suite assumes unless the
spec says otherwise:

- `function(*sample.args, **sample.kwargs)` is the public call. It returns a tensor, or a tuple of
  tensors (several outputs), new and contiguous, on the inputs' device, of any shape (elementwise, one
  value per row, a scalar). Their dtype is `output_dtype(d)` of the floating inputs' dtype `d` (default:
  `d`; a loss may return float32 for half inputs). `reference` is the same math in eager PyTorch: on
  float64 inputs it is the float64 reference the outputs are checked against; its autograd gives the
  reference gradients.
- Only floating tensors are cast (to the test's dtype, to float64 for the reference) and only those the
  op is differentiable in (`differentiable`: their positions in `sample.args`; default: every floating
  tensor) require grad. Integer and boolean tensors (labels, indices, masks) pass through unchanged in
  every suite; numbers and other arguments too.
- torch.ops.<namespace>.<name> takes the same arguments and returns the same (forward, opcheck,
  torch.fx). An op whose registered result is more than the function's (a tensor saved for backward)
  gives `op_output` to pick the function's result from it, or keeps the saved tensors in another op
  that the function calls and names it in `extra_ops` (opcheck runs each with the same samples,
  grad-requiring, so that their autograd registration is checked).
- `kind` says how outputs depend on inputs: "elementwise" (each output element from the same
  elements), "rowwise" (each row of the last dimension from the same row: normalizations, per-row
  reductions and losses) or "reduction" (from the whole input). It chooses the largest test's shape
  (`large_shape`, past 2^31 elements on a GPU) and how that test slices inputs (those of the first
  input's shape, and per-row ones of its shape without the last dimension) to check pieces.
- `samples(device, dtype)` reaches every kernel path (odd sizes, views, empty, 0-dim where the op
  allows it), with labels unique within the op: each label is a test id. `bad_inputs(device)` gives
  calls that must raise, with message fragments; each label is a test id too. The suites draw them
  (and `make_sample`'s inputs) from a generator seeded by the op's name: every process of a
  distributed test, and every run, gets the same values for a label.
- `autocast_dtype` is the op's autocast rule (None: none; the op then runs on its inputs' dtypes),
  apart from `output_dtype`.
- `placements(sample)` lists the DTensor placements the op's sharding rule serves (ops/<name>/
  sharding.py, registered with torch.distributed.tensor.experimental.register_sharding). Over 2
  processes the sharding suite runs the op on DTensors of each, which must need no communication, and
  of every other placement, which DTensor redistributes: each gives the op's result on whole tensors,
  forward and gradients. Without them, DTensor must refuse the op.
- The benchmark times `function` against `baseline` (what PyTorch users would call instead, not
  the test reference) eager and compiled; an op without one is timed alone and reported as such.
  Given `training`, it times a training step of the small model the op declares (through the op, and
  the same model through PyTorch's ops); the distributed test trains it with DistributedDataParallel.
- `block` is the layer the op can be in the small transformer block (custom_op/testing_block.py) that
  test_parallel_training.py trains under tensor + sequence parallel and FSDP2 and bench/parallel.py
  times: a norm, an activation or a loss. PyTorch's layer takes each role no op declares.
"""

from __future__ import annotations

import importlib
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

# Relative tolerance against a float64 reference, relative to the magnitude of the result (or of
# the terms a reduction sums): output rounding plus accumulation error.
RTOL = {torch.float64: 1e-12, torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def random(shape, dtype, device, generator=None) -> torch.Tensor:
    """Fresh random values away from zero (zeros hide unwritten outputs)."""
    t = torch.randn(shape, dtype=torch.float64, generator=generator)
    t = t + torch.sign(t) * 0.1
    return t.to(device=device, dtype=dtype)


@dataclass(frozen=True)
class Sample:
    """One call: the public function's positional arguments (tensors and scalars), and a label."""

    args: tuple
    label: str = ""
    kwargs: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The label as a test id that `pytest -k` can select: letters, digits, '.', '_'."""
        return id_of(self.label)

    @property
    def tensors(self) -> list[torch.Tensor]:
        return [a for a in self.args if isinstance(a, torch.Tensor)]

    @property
    def floating(self) -> list[int]:
        """Positions of the floating tensors in args: the ones a test casts."""
        return [i for i, a in enumerate(self.args) if isinstance(a, torch.Tensor) and a.is_floating_point()]

    def with_args(self, args) -> Sample:
        return Sample(tuple(args), self.label, self.kwargs)

    def cast(self, dtype: torch.dtype, device=None) -> Sample:
        """The floating tensors in `dtype` (and every tensor on `device`); the others unchanged."""
        floating = set(self.floating)

        def convert(i, a):
            if not isinstance(a, torch.Tensor):
                return a
            return a.to(device=device or a.device, dtype=dtype if i in floating else a.dtype)

        return self.with_args(convert(i, a) for i, a in enumerate(self.args))

    def detached(self, dtype=None, requires_grad=False, differentiable=None) -> Sample:
        """The same call on fresh leaves: floating tensors cast to `dtype`, and those at the positions
        `differentiable` (default: every floating one) requiring grad. Other tensors pass through."""
        grad = set(self.floating if differentiable is None else differentiable) if requires_grad else set()

        def leaf(i, a):
            if not isinstance(a, torch.Tensor):
                return a
            t = a.detach()
            if t.is_floating_point():
                t = t.to(dtype or t.dtype)
            return t.requires_grad_(i in grad and t.is_floating_point())

        return self.with_args(leaf(i, a) for i, a in enumerate(self.args))


def _expanded(t: torch.Tensor) -> bool:
    """Whether elements of `t` share memory through a stride of 0 (torch.expand's views)."""
    return any(stride == 0 and size > 1 for stride, size in zip(t.stride(), t.shape, strict=True))


def id_of(label: str) -> str:
    """The label as a test id: letters, digits, dots and a number's sign kept (eps=-1 and eps=1 differ)."""
    return re.sub(r"(?:[^A-Za-z0-9.-]|-(?!\d))+", "_", label).strip("_") or "default"


def outputs(result) -> tuple[torch.Tensor, ...]:
    """The function's outputs as a tuple, whether it returns one tensor or several."""
    return tuple(result) if isinstance(result, tuple | list) else (result,)


def total(result) -> torch.Tensor:
    """One float32 scalar from every output (a loss to differentiate: each output's sum)."""
    return sum(out.float().sum() for out in outputs(result))


@dataclass(frozen=True)
class BadInput:
    """A call that must raise, and the pieces its message must contain."""

    args: tuple
    fragments: tuple[str, ...]
    label: str
    # A check of tensor values (a label out of range), which a fake kernel cannot make: the test
    # that fake and real kernels raise the same message leaves it out.
    reads_values: bool = False

    @property
    def id(self) -> str:
        return id_of(self.label)


@dataclass(frozen=True)
class TrainingCase:
    """A small model through the op, the same model through PyTorch's ops (the same parameters), and
    its batch: `model(*batch)` returns a scalar loss. The benchmark times a step of each; the
    distributed test trains it on shards of the batch (split along the first dimension)."""

    custom: torch.nn.Module
    plain: torch.nn.Module
    batch: tuple
    label: str  # the model's size, e.g. "64x256, 4 layers"


def training_size(device: str, quick: bool) -> tuple[int, int, int]:
    """(tokens, features, layers) of a training step: small enough that host time matters."""
    if device == "cuda":
        return (1024, 512, 4) if quick else (4096, 1024, 4)
    return (64, 256, 4)


class ResidualModel(torch.nn.Module):
    """x = x + projection(layer(x)) per layer; the loss is the output's mean square."""

    def __init__(self, layers: list[torch.nn.Module], features: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)
        self.projections = torch.nn.ModuleList(torch.nn.Linear(features, features, bias=False) for _ in layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer, projection in zip(self.layers, self.projections, strict=True):
            x = x + projection(layer(x))
        return x.float().square().mean()


def residual_training(layer_pair: Callable[[int], tuple], device: str, dtype: torch.dtype, quick: bool) -> TrainingCase:
    """The training case of an op that maps features to features: residual blocks of its layer,
    `layer_pair(features)` -> (the layer through the op, the same layer through PyTorch's ops)."""
    tokens, features, layers = training_size(device, quick)
    pairs = [layer_pair(features) for _ in range(layers)]
    custom = ResidualModel([p[0] for p in pairs], features)
    plain = ResidualModel([p[1] for p in pairs], features)
    plain.load_state_dict(custom.state_dict())
    x = torch.randn(tokens, features)
    to = {"device": device, "dtype": dtype}
    return TrainingCase(custom.to(**to), plain.to(**to), (x.to(**to),), f"{tokens}x{features}, {layers} layers")


# The roles of the small transformer block (custom_op/testing_block.py), each a call of its own:
# "norm": (x, weight) -> x's shape, weight one per feature (the last dimension), rows sharded under
# sequence parallel; "activation": (h) -> h's shape, features sharded under tensor parallel;
# "loss": (logits [N, V], labels [N] int64) -> a loss per row [N], rows sharded.
BLOCK_ROLES = ("norm", "activation", "loss")


@dataclass(frozen=True)
class BlockLayer:
    """The op as a layer of the transformer block: `call(function, *inputs)` is the role's call
    through `function`, given the op (the block of the tree's ops) or its baseline (the same block
    in PyTorch's ops, which bench/parallel.py times against it)."""

    role: str  # one of BLOCK_ROLES
    call: Callable  # e.g. lambda op, x, weight: op(x, weight, 1e-6) for a norm


class _Seeded:
    """Torch's random generators seeded from a key for a block, restored after it."""

    def __init__(self, key: str) -> None:
        self.seed = zlib.crc32(key.encode())
        self.fork = None

    def __enter__(self):
        devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
        self.fork = torch.random.fork_rng(devices=devices)
        self.fork.__enter__()
        torch.manual_seed(self.seed)
        return self

    def __exit__(self, *exc):
        return self.fork.__exit__(*exc)


def _where(function: Callable, args: tuple) -> str:
    shown = ", ".join(str(a).removeprefix("torch.") for a in args)  # torch.float32 as float32
    return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', function)}({shown})"


# A spec's function that raises is named with its arguments and the last item it gave: a bare error
# there surfaces as a collection error of every shared suite, naming none of it.
def _drawn(function: Callable, *args) -> list:
    items = []
    try:
        items.extend(function(*args))
    except Exception as error:
        last = f"after the item labelled {items[-1].label!r}" if items else "before its first item"
        raise RuntimeError(f"{_where(function, args)} raised {last}: {type(error).__name__}: {error}") from error
    return items


def _called(function: Callable, *args):
    try:
        return function(*args)
    except Exception as error:
        raise RuntimeError(f"{_where(function, args)} raised {type(error).__name__}: {error}") from error


KINDS = ("elementwise", "rowwise", "reduction")
# The largest test's shape by kind: past 2^31 elements, with a tail that is not a multiple of 4096.
LARGE_SHAPES = {"elementwise": (2**31 + 4099,), "rowwise": (2**31 // 4096 + 3, 4096), "reduction": (2**31 + 4099,)}


@dataclass(frozen=True)
class OpSpec:
    name: str  # the op's name in the library: torch.ops.<namespace>.<name>
    function: Callable  # the public function, custom_op.<name>
    reference: Callable  # the same math in eager PyTorch; run on float64 inputs, it is the reference
    samples: Callable[[str, torch.dtype], Iterable[Sample]]  # (device, dtype): every kernel path
    bad_inputs: Callable[[str], Iterable[BadInput]]  # (device)
    make_sample: Callable[[tuple, torch.dtype, str], Sample]  # (shape, dtype, device): inputs of that size
    bench_shapes: Callable[[str, bool], list[tuple]]  # (device, quick): the benchmark's sizes
    bytes_moved: Callable[[Sample, bool], int]  # (sample, with backward): bytes that must move
    # The magnitude an output's error is relative to, from float64 inputs (default: |reference|);
    # a reduction passes the sum of its terms' magnitudes (a tuple of them for several outputs).
    scale: Callable | None = None
    rtol: dict = field(default_factory=lambda: dict(RTOL))
    # Small float64 samples for gradcheck (default: the float64 samples with at most 64 elements, none
    # expanded).
    gradcheck_samples: Callable[[str], Iterable[Sample]] | None = None
    # Other ways to call the op that the benchmark times too: {label: callable of the same args}.
    bench_variants: Callable[[Sample], dict] | None = None
    kind: str = "elementwise"  # or "rowwise", "reduction"; see the module's docstring
    # The shape of the first input in the test past 2^31 elements (default: LARGE_SHAPES[kind]).
    large_shape: tuple | None = None
    # Positions in sample.args of the tensors sliced with the first input's rows (its first
    # dimension) when a test takes a piece of a call: the first input, and inputs of one value per
    # row or token (labels [N], positions [N] beside x [N, H, D]). Default: inferred from the shapes
    # (inputs of the first's shape, and for a "rowwise" op of its shape without the last dimension);
    # test_rows_of_a_call_are_the_rows_of_its_result checks it on the CPU.
    per_row: tuple[int, ...] | None = None
    # The function's result from the registered op's (default: the same), e.g. lambda r: r[0].
    op_output: Callable | None = None
    # Other registered ops of this op that take the function's arguments (opcheck runs them too).
    extra_ops: tuple[str, ...] = ()
    # What PyTorch users would call instead (same arguments): the benchmark's eager and
    # torch.compile columns time it; None: the op is timed alone, reported as having no baseline.
    baseline: Callable | None = None
    # device -> {label: callable of the same args}: other libraries' kernels for the same op, timed
    # beside the baseline where they are installed (e.g. Liger-Kernel's); None or {}: none.
    other_libraries: Callable[[str], dict] | None = None
    # (device, dtype, quick) -> TrainingCase: the op in a small model, for the benchmark's training
    # step and the distributed test; None: neither (their tests skip it, saying so).
    training: Callable[[str, torch.dtype, bool], TrainingCase] | None = None
    # The dtype the op runs in under torch.autocast (its register_autocast), float64 excepted;
    # None: autocast leaves its inputs alone.
    autocast_dtype: torch.dtype | None = None
    # The outputs' dtype from the floating inputs' dtype (default: the same); a tuple of dtypes
    # for several outputs.
    output_dtype: Callable[[torch.dtype], torch.dtype | tuple] | None = None
    # Positions in sample.args of the tensors the op is differentiable in (default: every floating one).
    differentiable: tuple[int, ...] | None = None
    # The DTensor placements the op's sharding rule (ops/<name>/sharding.py) serves for a sample, on a
    # 1-D mesh: one tuple per case, of a Placement for each tensor argument and None for the others
    # (as register_sharding takes them); None: no rule (DTensor refuses the op).
    placements: Callable[[Sample], Iterable[tuple]] | None = None
    # The layer the op can be in the transformer block that test_parallel_training.py trains and
    # bench/parallel.py times (custom_op/testing_block.py): BlockLayer(role, call). Its sharding rule
    # must serve the role's placements (BLOCK_ROLES); the first op by name takes a role; None: none.
    block: BlockLayer | None = None
    # The module that defines the spec (as SPEC or in SPECS), which a worker process imports to find
    # it (a spec is pickled by name: its functions need not pickle). Default: the op's own testing
    # module, ops/<name>/testing.py beside the function's ops/<name>/__init__.py.
    module: str | None = None

    def __reduce__(self):
        return (_spec_in, (self.name, self.module or f"{self.function.__module__}.testing"))

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"OpSpec {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.block is not None:
            self._check_block()

    def _check_block(self) -> None:
        """A block layer needs a role the block has, the baseline (the block in PyTorch's ops) and a
        sharding rule (the block hands the op DTensors)."""
        where = f"OpSpec {self.name!r}: block"
        if self.block.role not in BLOCK_ROLES:
            raise ValueError(f"{where}'s role must be one of {BLOCK_ROLES}, got {self.block.role!r}")
        if self.baseline is None:
            raise ValueError(f"{where} needs a baseline: the same block through PyTorch's ops calls it")
        if self.placements is None:
            raise ValueError(f"{where} needs placements: the tensor-parallel block hands the op DTensors")

    def declared_placements(self, sample: Sample) -> list[tuple]:
        """placements(sample), each case checked against the sample's arguments."""
        cases = [tuple(case) for case in self.placements(sample)]
        for case in cases:
            if len(case) != len(sample.args) or any(
                p is None for a, p in zip(sample.args, case, strict=True) if isinstance(a, torch.Tensor)
            ):
                expected = ", ".join("a Placement" if isinstance(a, torch.Tensor) else "None" for a in sample.args)
                raise ValueError(
                    f"OpSpec {self.name!r}: placements(sample {sample.label!r}) gave {case}; expected one entry per "
                    f"argument of the sample ({expected}): a Placement for each tensor, None for the others"
                )
        return cases

    @property
    def largest_shape(self) -> tuple:
        return self.large_shape or LARGE_SHAPES[self.kind]

    def per_row_positions(self, sample: Sample) -> list[int]:
        """The positions of the tensors sliced with the first input's rows (per_row, else inferred)."""
        if self.per_row is not None:
            return list(self.per_row)
        x = sample.tensors[0]
        shapes = (x.shape, x.shape[:-1] if self.kind == "rowwise" else x.shape)
        return [i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor) and a.shape in shapes]

    def rows_of(self, sample: Sample, rows: slice) -> Sample:
        """The call on `rows` of the first input's first dimension: its per-row inputs sliced alike,
        the others (a weight per feature, a scalar) whole."""
        sliced = set(self.per_row_positions(sample))
        return sample.with_args(a[rows] if i in sliced else a for i, a in enumerate(sample.args))

    def op_result(self, result):
        """What the public function returns, from what the registered op returned."""
        return result if self.op_output is None else self.op_output(result)

    def overload(self, namespace: str, name: str | None = None):
        return getattr(getattr(torch.ops, namespace), name or self.name).default

    # The op's inputs, drawn from a generator seeded by the op's name (the same in every process).
    def samples_on(self, device: str, dtype: torch.dtype) -> list[Sample]:
        with _Seeded(f"{self.name} samples"):
            return _drawn(self.samples, device, dtype)

    def bad_inputs_on(self, device: str) -> list[BadInput]:
        with _Seeded(f"{self.name} bad inputs"):
            return _drawn(self.bad_inputs, device)

    def sample_of_shape(self, shape: tuple, dtype: torch.dtype, device: str) -> Sample:
        with _Seeded(f"{self.name} {tuple(shape)}"):
            return _called(self.make_sample, tuple(shape), dtype, device)

    def training_case(self, device: str, dtype: torch.dtype, quick: bool) -> TrainingCase | None:
        if self.training is None:
            return None
        with _Seeded(f"{self.name} training"):
            return _called(self.training, device, dtype, quick)

    def small_float64_samples(self, device: str) -> list[Sample]:
        with _Seeded(f"{self.name} gradcheck"):
            if self.gradcheck_samples is not None:
                return _drawn(self.gradcheck_samples, device)
            # gradcheck refuses an input whose elements share memory (an expanded one).
            return [
                s
                for s in _drawn(self.samples, device, torch.float64)
                if all(t.numel() <= 64 and not _expanded(t) for t in s.tensors)
            ]

    def differentiable_positions(self, sample: Sample) -> list[int]:
        if self.differentiable is None:
            return sample.floating
        return [i for i in self.differentiable if i in sample.floating]

    def leaves(self, sample: Sample, dtype: torch.dtype | None = None) -> Sample:
        """Fresh leaves of the sample's tensors, the differentiable ones requiring grad."""
        return sample.detached(dtype, requires_grad=True, differentiable=self.differentiable_positions(sample))

    def grad_inputs(self, sample: Sample) -> list[torch.Tensor]:
        """The tensors of the call that gradients are taken of (in argument order)."""
        return [sample.args[i] for i in self.differentiable_positions(sample)]

    def input_dtype(self, sample: Sample) -> torch.dtype:
        """The floating inputs' dtype (the first floating tensor's)."""
        floating = sample.floating
        return sample.args[floating[0]].dtype if floating else sample.tensors[0].dtype

    def output_dtypes(self, dtype: torch.dtype, count: int) -> tuple[torch.dtype, ...]:
        """The dtype of each of `count` outputs, for floating inputs of `dtype`."""
        got = dtype if self.output_dtype is None else self.output_dtype(dtype)
        return tuple(got) if isinstance(got, tuple | list) else (got,) * count

    def reference_of(self, sample: Sample):
        """The float64 reference of the call, on the CPU (floating inputs cast; others as given)."""
        inputs = sample.cast(torch.float64, "cpu").detached()
        return self.reference(*inputs.args, **inputs.kwargs)

    def check(self, result, sample: Sample) -> None:
        """The result (a tensor or several) against the float64 reference of the same call, on the CPU."""
        inputs = sample.cast(torch.float64, "cpu").detached()
        refs = outputs(self.reference(*inputs.args, **inputs.kwargs))
        scales = (
            tuple(r.abs() for r in refs) if self.scale is None else outputs(self.scale(*inputs.args, **inputs.kwargs))
        )
        got = outputs(result)
        assert len(got) == len(refs), f"{sample.label}: {len(got)} outputs, expected {len(refs)}"
        dtypes = self.output_dtypes(self.input_dtype(sample), len(refs))
        device = sample.tensors[0].device
        for k, (out, ref, scale, dtype) in enumerate(zip(got, refs, scales, dtypes, strict=True)):
            which = f"{sample.label}" + (f" (output {k})" if len(refs) > 1 else "")
            assert out.dtype == dtype, f"{which}: dtype {out.dtype}, expected {dtype}"
            assert out.device == device, f"{which}: device {out.device}, expected {device}"
            assert out.shape == ref.shape, f"{which}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
            if out.numel() == 0:
                continue
            assert torch.isfinite(ref).all(), f"{which}: the float64 reference is not finite (fix the reference)"
            assert torch.isfinite(out).all(), f"{which}: non-finite output"
            # The tolerance of the inputs' precision (a float32 loss of bfloat16 logits carries their rounding).
            precision = max(self.rtol[self.input_dtype(sample)], self.rtol[dtype]) if dtype.is_floating_point else 0
            finfo = torch.finfo(dtype) if dtype.is_floating_point else None
            # plus the spacing of subnormals: a result that underflows is rounded on an absolute grid
            bound = precision * scale + (finfo.tiny * finfo.eps if finfo else 0)
            if finfo is None:
                assert torch.equal(out.cpu(), ref.to(out.dtype)), f"{which}: differs from the reference"
                continue
            out = out.double().cpu()
            ratio = (out - ref).abs() / bound
            worst = ratio.max().item()
            if worst > 1.0:
                at = tuple(int(i) for i in torch.unravel_index(ratio.argmax(), ratio.shape))
                relative = "OpSpec.scale's magnitude" if self.scale is not None else (
                    "of the reference's own magnitude; OpSpec.scale gives another, for an output that cancels to"
                    " near 0 such as a sum with a bias")  # fmt: skip
                raise AssertionError(
                    f"{which}: error {worst:.3g}x the tolerance for {self.input_dtype(sample)}: at index {list(at)}"
                    f" the output is {out[at].item():.6g}, the reference {ref[at].item():.6g}, the"
                    f" tolerance rtol {precision:.3g} x {scale.expand(ratio.shape)[at].item():.3g} ({relative})"
                )


def _spec_in(name: str, module: str) -> OpSpec:
    """The spec named `name` that `module` defines (its SPEC or one of its SPECS): a pickled spec."""
    defined = importlib.import_module(module)
    specs = [*getattr(defined, "SPECS", ()), *([defined.SPEC] if hasattr(defined, "SPEC") else [])]
    found = [spec for spec in specs if spec.name == name]
    if not found:
        raise LookupError(f"no OpSpec {name!r} in {module} (its SPEC or SPECS): give the spec's module=")
    return found[0]
