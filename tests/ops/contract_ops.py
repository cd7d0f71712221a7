"""Ops that exist only for the tests: the shapes of the contract (custom_op/testing.py) that the
shipped examples may lack, so that every shared suite handles them whatever examples a fork keeps.

- contract_masked_mean_square(x, mask) -> a scalar: a whole-tensor reduction ("reduction"), a
  boolean input, and a float32 output for half inputs; no sharding rule (DTensor refuses it).
- contract_row_pick(x, index) -> (x[r, index[r]], logsumexp(x[r])): several outputs, one value per
  row ("rowwise"), an int64 input of one value per row, a sharding rule (rows apart).
- contract_feature_scale(x, w) -> x * w: a weight per feature (1-D, x.shape[-1] values) whose
  gradient sums over rows (a Partial sum where x is sharded over another dimension), and `.out` and
  in-place variants that write into given memory (Tensor(a!) schemas), which the benchmark times.
- contract_rotate_pairs(x [N, H, D], positions [N] int64, base=10000.0): each token's feature pairs
  rotated by its position's angles (a rotary embedding): a 3-D input beside an int64 input of one
  value per token (OpSpec.per_row), linear in x (its gradient depends on no input, so no double
  backward to refuse) and differentiable in x only, an error that grows with the angle (a `scale`
  of each pair's magnitude), a float argument with a schema default.

They are Python ops on PyTorch's own ops, defined in the library's namespace with a schema, CPU and
CUDA kernels, fake kernels and autograd (torch.library), as a C++ op is; not shipped.
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.experimental import register_sharding

from custom_op._autograd import refuse_grad
from custom_op._library import NAMESPACE
from custom_op.checks import (
    FLOAT_DTYPES,
    check_float,
    check_index_per_row,
    check_last_dim_weight,
    check_like,
    check_ndim,
    check_pair,
    check_rows,
    dtype_name,
    fail_argument,
    shape_str,
)
from custom_op.testing import RTOL, BadInput, OpSpec, Sample, random

MASKED = "contract_masked_mean_square"
PICK = "contract_row_pick"
SCALE = "contract_feature_scale"
ROTATE = "contract_rotate_pairs"


def _accumulate(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _check_float(op: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{NAMESPACE}::{op}: argument 'x' must be a Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(
            f"{NAMESPACE}::{op}: argument 'x' must have dtype float32, float64, float16 or bfloat16, "
            f"got {dtype_name(x)}"
        )


def _check_masked(x, mask) -> None:
    _check_float(MASKED, x)
    if mask.dtype != torch.bool:
        fail_argument(f"{NAMESPACE}::{MASKED}", "mask", "have dtype bool", dtype_name(mask))
    if mask.shape != x.shape:
        fail_argument(
            f"{NAMESPACE}::{MASKED}", "mask", f"have x's shape {shape_str(x.shape)}", f"shape {shape_str(mask.shape)}"
        )


def _check_pick(x, index) -> None:
    _check_float(PICK, x)
    if x.dim() != 2 or x.shape[1] == 0:
        fail_argument(f"{NAMESPACE}::{PICK}", "x", "be 2-D with columns", f"shape {shape_str(x.shape)}")
    if index.dtype != torch.int64 or index.shape != x.shape[:1]:
        expected, got = f"be int64 of shape [{x.shape[0]}]", f"{dtype_name(index)} of shape {shape_str(index.shape)}"
        fail_argument(f"{NAMESPACE}::{PICK}", "index", expected, got)


def masked_mean_square_math(x, mask):
    xf = x.to(_accumulate(x))
    count = mask.sum().clamp(min=1)
    return (xf.square() * mask).sum() / count


def row_pick_math(x, index):
    xf = x.to(_accumulate(x))
    picked = xf.gather(1, index.clamp(0, max(x.shape[1] - 1, 0))[:, None]).squeeze(1)
    return picked.to(x.dtype), torch.logsumexp(xf, dim=1).to(x.dtype)


_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # the registrations last as long as it does
_LIBRARY.define(f"{MASKED}(Tensor x, Tensor mask) -> Tensor")
_LIBRARY.define(f"{PICK}(Tensor x, Tensor index) -> (Tensor, Tensor)")
_LIBRARY.define(f"{SCALE}(Tensor x, Tensor w) -> Tensor")
_LIBRARY.define(f"{ROTATE}(Tensor x, Tensor positions, float base=10000.0) -> Tensor")
# Mutating variants return nothing, as functionalization (torch.compile) requires of custom ops.
_LIBRARY.define(f"{SCALE}.out(Tensor x, Tensor w, *, Tensor(a!) out) -> ()")
_LIBRARY.define(f"{SCALE}_(Tensor(a!) x, Tensor w) -> ()")


def _masked_kernel(x, mask):
    _check_masked(x, mask)
    return masked_mean_square_math(x, mask)


def _masked_fake(x, mask):
    _check_masked(x, mask)
    return x.new_empty((), dtype=_accumulate(x))


def _masked_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _masked_backward(ctx, grad):
    x, mask = ctx.saved_tensors
    count = mask.sum().clamp(min=1)
    return (2 * x.to(grad.dtype) * mask * grad / count).to(x.dtype), None


def _pick_kernel(x, index):
    _check_pick(x, index)
    # Checked on the CPU only: on CUDA the check would synchronize, which graph capture refuses
    # (cross_entropy's CUDA kernel leaves its labels unchecked for the same reason).
    if x.device.type == "cpu" and ((index < 0).any() or (index >= x.shape[1]).any()):
        raise ValueError(f"{NAMESPACE}::{PICK}: argument 'index' must be in [0, {x.shape[1]})")
    picked, lse = row_pick_math(x, index)
    return picked.clone(), lse  # new memory, never a view of x


def _pick_fake(x, index):
    _check_pick(x, index)
    return x.new_empty(x.shape[:1]), x.new_empty(x.shape[:1])


def _pick_setup(ctx, inputs, output):
    x, index = inputs
    ctx.save_for_backward(x, index, output[1])


def _pick_backward(ctx, grad_picked, grad_lse):
    x, index, lse = ctx.saved_tensors
    acc = _accumulate(x)
    grad = torch.softmax(x.to(acc), dim=1) * grad_lse.to(acc)[:, None]
    grad = grad.scatter_add(1, index[:, None], grad_picked.to(acc)[:, None])
    return grad.to(x.dtype), None


def _check_scale(x, w) -> None:
    op = f"{NAMESPACE}::{SCALE}"
    check_pair(op, "x", x, "w", w)
    check_rows(op, "x", x, "scale")
    check_last_dim_weight(op, "x", x, "w", w)


def _scale_kernel(x, w):
    _check_scale(x, w)
    return (x * w).contiguous()  # a new contiguous result, as the contract says


def _scale_fake(x, w):
    _check_scale(x, w)
    return x.new_empty(x.shape)


def _scale_out_kernel(x, w, *, out):
    _check_scale(x, w)
    check_like(f"{NAMESPACE}::{SCALE}", "out", out, x, x.shape)
    out.copy_(x * w)  # computed aside: out may overlap x or w


def _scale_out_fake(x, w, *, out):
    _check_scale(x, w)
    check_like(f"{NAMESPACE}::{SCALE}", "out", out, x, x.shape)


def _scale_inplace_kernel(x, w):
    _check_scale(x, w)
    x.mul_(w)


def _scale_inplace_fake(x, w):
    _check_scale(x, w)


def _scale_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _scale_backward(ctx, grad):
    x, w = ctx.saved_tensors
    return grad * w, (grad * x).reshape(-1, x.shape[-1]).sum(0)


def _check_rotate(x, positions) -> None:
    op = f"{NAMESPACE}::{ROTATE}"
    check_float(op, "x", x)
    check_ndim(op, "x", x, 3, "[N, H, D] (tokens, heads, features)")
    check_index_per_row(op, "positions", positions, x, "x")


def rotate_pairs_math(x, positions, base=10000.0):
    """Pairs (x[..., 2i], x[..., 2i + 1]) of each token rotated by positions[n] * base^(-2i / D);
    an odd last feature is left as it is."""
    acc = _accumulate(x)
    half, d = x.shape[-1] // 2, x.shape[-1]
    inverse = base ** (-torch.arange(half, dtype=torch.float64, device=x.device) * 2 / max(d, 1))
    angle = positions.to(torch.float64)[:, None] * inverse[None, :]
    cos, sin = angle.cos().to(acc)[:, None, :], angle.sin().to(acc)[:, None, :]
    xf = x.to(acc)
    a, b = xf[..., 0 : 2 * half : 2], xf[..., 1 : 2 * half : 2]
    out = xf.clone(memory_format=torch.contiguous_format)
    out[..., 0 : 2 * half : 2] = a * cos - b * sin
    out[..., 1 : 2 * half : 2] = a * sin + b * cos
    return out.to(x.dtype)


def _rotate_kernel(x, positions, base=10000.0):
    _check_rotate(x, positions)
    return rotate_pairs_math(x, positions, base)


def _rotate_fake(x, positions, base=10000.0):
    _check_rotate(x, positions)
    return x.new_empty(x.shape)


def _rotate_setup(ctx, inputs, output):
    x, positions, *rest = inputs
    ctx.save_for_backward(positions)
    ctx.base = rest[0] if rest else 10000.0


def _rotate_backward(ctx, grad):
    (positions,) = ctx.saved_tensors
    # The inverse rotation, through the op (and its sharding rule under DTensor): minus the angles.
    return _OPS.contract_rotate_pairs.default(grad, -positions, ctx.base), None, None


for _name, _kernel, _fake in [(f"{SCALE}.out", _scale_out_kernel, _scale_out_fake),
                              (f"{SCALE}_", _scale_inplace_kernel, _scale_inplace_fake)]:  # fmt: skip
    for _device in ("CPU", "CUDA"):
        _LIBRARY.impl(_name, _kernel, _device)
    torch.library.register_fake(f"{NAMESPACE}::{_name}", _fake, lib=_LIBRARY)
for _name, _kernel, _fake, _backward, _setup in [
    (MASKED, _masked_kernel, _masked_fake, _masked_backward, _masked_setup),
    (PICK, _pick_kernel, _pick_fake, _pick_backward, _pick_setup),
    (SCALE, _scale_kernel, _scale_fake, _scale_backward, _scale_setup),
    (ROTATE, _rotate_kernel, _rotate_fake, _rotate_backward, _rotate_setup),
]:
    for _device in ("CPU", "CUDA"):
        _LIBRARY.impl(_name, _kernel, _device)
    torch.library.register_fake(f"{NAMESPACE}::{_name}", _fake, lib=_LIBRARY)
    torch.library.register_autograd(f"{NAMESPACE}::{_name}", _backward, setup_context=_setup, lib=_LIBRARY)
_OPS = getattr(torch.ops, NAMESPACE)


@register_sharding(_OPS.contract_row_pick.default)
def _pick_sharding(x, index):
    # rows apart: x and index sharded over the rows, or replicated (the backward is PyTorch's ops)
    return [([Replicate(), Replicate()], [Replicate(), Replicate()]), ([Shard(0), Shard(0)], [Shard(0), Shard(0)])]


def _scale_placements(x, w) -> list:
    """x and w replicated; x sharded over its last dimension with w; x sharded over another with w
    replicated (w's gradient is then a Partial sum of each process's rows)."""
    last = x.ndim - 1
    return [(Replicate(), Replicate())] + [
        (Shard(dim), Shard(0) if dim == last else Replicate()) for dim in range(x.ndim)
    ]


@register_sharding(_OPS.contract_feature_scale.default)
def _scale_sharding(x, w):
    return [([x_p], [x_p, w_p]) for x_p, w_p in _scale_placements(x, w)]


def _rotate_placements(x, positions) -> list:
    """Replicated; tokens sharded (positions with them); heads sharded (positions whole)."""
    return [(Replicate(), Replicate()), (Shard(0), Shard(0)), (Shard(1), Replicate())]


@register_sharding(_OPS.contract_rotate_pairs.default)
def _rotate_sharding(x, positions, base=10000.0):  # DTensor leaves out an argument equal to its default
    return [([x_p], [x_p, p_p, None]) for x_p, p_p in _rotate_placements(x, positions)]


def rotate_pairs(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Each token's feature pairs rotated by its position's angles (a rotary embedding)."""
    return _OPS.contract_rotate_pairs.default(x, positions, base)


def masked_mean_square(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """mean(x**2) over the elements where mask is True (0 where none is), float32 for half x."""
    return _OPS.contract_masked_mean_square.default(x, mask)


def row_pick(x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x[r, index[r]], logsumexp(x[r])) for each row r of a 2-D x."""
    return _OPS.contract_row_pick.default(x, index)


def feature_scale(x: torch.Tensor, w: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """x * w, w one value per feature; with out=, written there (not differentiable)."""
    if out is None:
        return _OPS.contract_feature_scale.default(x, w)
    refuse_grad(f"{NAMESPACE}::{SCALE}", f"{SCALE}(out=...)", f"{SCALE}(x, w)", x, w, out)
    _OPS.contract_feature_scale.out(x, w, out=out)
    return out


def feature_scale_(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """In place: x becomes x * w and is returned (not differentiable)."""
    refuse_grad(f"{NAMESPACE}::{SCALE}", f"{SCALE}_", f"{SCALE}(x, w)", x, w)
    _OPS.contract_feature_scale_.default(x, w)
    return x


def _mask(shape, device) -> torch.Tensor:
    return (torch.rand(shape) < 0.6).to(device)


def _masked_samples(device, dtype):
    for shape in [(7,), (3, 5), (2, 3, 40), (0, 4)]:
        yield Sample((random(shape, dtype, device), _mask(shape, device)), "x".join(map(str, shape)))
    base = random((12, 20), dtype, device)
    yield Sample((base.t(), _mask((20, 12), device)), "transposed")
    yield Sample((random((4, 6), dtype, device), torch.zeros(4, 6, dtype=torch.bool, device=device)), "none kept")
    yield Sample((random((), dtype, device), torch.ones((), dtype=torch.bool, device=device)), "0-dim")


def _masked_bad(device):
    x = random((3, 4), torch.float32, device)
    where = (f"{NAMESPACE}::{MASKED}",)
    yield BadInput((x, _mask((3, 4), device).int()), (*where, "argument 'mask'", "bool", "got int32"), "mask int32")
    yield BadInput((x, _mask((4, 3), device)), (*where, "argument 'mask'", "[3, 4]", "got shape [4, 3]"), "mask shape")
    yield BadInput((x.long(), _mask((3, 4), device)), (*where, "argument 'x'", "got int64"), "x int64")


def _pick_index(rows, cols, device):
    return torch.randint(0, cols, (rows,)).to(device)


def _pick_sample(shape, dtype, device, label=""):
    rows, cols = (1, shape[0]) if len(shape) == 1 else (int(torch.tensor(shape[:-1]).prod()), shape[-1])
    return Sample((random((rows, cols), dtype, device), _pick_index(rows, cols, device)), label)


def _pick_samples(device, dtype):
    for shape in [(1, 1), (3, 5), (4, 33), (2, 4096)]:
        yield _pick_sample(shape, dtype, device, "x".join(map(str, shape)))
    base = random((24, 40), dtype, device)
    yield Sample((base[:, 3:35], _pick_index(24, 32, device)), "sliced")
    yield Sample((base.t(), _pick_index(40, 24, device)), "transposed")
    yield Sample((base, _pick_index(48, 40, device)[::2]), "index stepped")
    yield Sample((random((0, 8), dtype, device), _pick_index(0, 8, device)), "no rows")


def _pick_bad(device):
    x = random((3, 4), torch.float32, device)
    where = (f"{NAMESPACE}::{PICK}",)
    yield BadInput(
        (x, _pick_index(3, 4, device).int()), (*where, "argument 'index'", "int64", "got int32"), "index int32"
    )
    yield BadInput(
        (x, _pick_index(2, 4, device)), (*where, "argument 'index'", "[3]", "got int64 of shape [2]"), "index length"
    )
    yield BadInput((x[0], _pick_index(3, 4, device)), (*where, "argument 'x'", "2-D", "got shape [4]"), "x 1-D")
    yield BadInput((x.long(), _pick_index(3, 4, device)), (*where, "argument 'x'", "got int64"), "x int64")


def _pick_scale(x, index):
    # logsumexp's terms: the magnitude of the row's largest
    top = x.abs().amax(dim=1)
    return x.gather(1, index[:, None]).squeeze(1).abs(), top + 1


def _scale_sample(shape, dtype, device, label=""):
    shape = tuple(shape) or (1,)
    return Sample((random(shape, dtype, device), random(shape[-1:], dtype, device)), label)


def _scale_samples(device, dtype):
    for shape in [(7,), (3, 5), (2, 3, 40), (0, 4)]:
        yield _scale_sample(shape, dtype, device, "x".join(map(str, shape)))
    base = random((24, 40), dtype, device)
    yield Sample((base.t(), random((24,), dtype, device)), "transposed")
    yield Sample((base, random((80,), dtype, device)[::2]), "weight stepped")


def _scale_bad(device):
    x = random((3, 4), torch.float32, device)
    where = (f"{NAMESPACE}::{SCALE}",)
    yield BadInput(
        (x, random((3,), torch.float32, device)), (*where, "argument 'w'", "[4]", "got shape [3]"), "w short"
    )
    yield BadInput((x[0, 0], random((1,), torch.float32, device)), (*where, "argument 'x'", "0-dim"), "x 0-dim")


def _scale_variants(sample: Sample) -> dict:
    """out= into given memory, and in place on a copy of x (the timed call then leaves x alone)."""
    x = sample.args[0]
    out, copy = torch.empty_like(x), x.clone()
    return {"custom_op out=": lambda x, w: feature_scale(x, w, out=out),
            "custom_op in place": lambda x, w: feature_scale_(copy.copy_(x), w)}  # fmt: skip


def _rotate_sample(shape, dtype, device, label=""):
    """Any 0-3-D shape as x [N, H, D] (missing leading dimensions are 1) and positions [N]."""
    shape = (1,) * (3 - len(shape)) + tuple(shape) if len(shape) < 3 else tuple(shape[-3:])
    return Sample((random(shape, dtype, device), torch.randint(0, 64, shape[:1]).to(device)), label)


def _rotate_samples(device, dtype):
    for shape in [(1, 1, 2), (3, 2, 8), (5, 4, 33), (2, 3, 64)]:
        yield _rotate_sample(shape, dtype, device, "x".join(map(str, shape)))
    base = random((4, 6, 16), dtype, device)
    yield Sample((base.transpose(0, 1), torch.randint(0, 64, (6,)).to(device)), "tokens and heads transposed")
    yield Sample((random((3, 2, 8), dtype, device), torch.tensor([0, 5000, 100000]).to(device)), "far positions")
    yield Sample((random((3, 2, 8), dtype, device), torch.arange(3).to(device), 500.0), "base 500")
    yield Sample((random((0, 2, 8), dtype, device), torch.zeros(0, dtype=torch.int64).to(device)), "no tokens")


def _rotate_bad(device):
    x = random((3, 2, 8), torch.float32, device)
    where = (f"{NAMESPACE}::{ROTATE}",)
    positions = torch.arange(3).to(device)
    yield BadInput((x[0], positions), (*where, "argument 'x'", "3-D [N, H, D]", "got shape [2, 8]"), "x 2-D")
    yield BadInput((x, positions.int()), (*where, "argument 'positions'", "int64", "got int32"), "positions int32")
    yield BadInput(
        (x, positions[:2]),
        (*where, "argument 'positions'", "shape [3] (x.shape[0] = 3)", "got shape [2]"),
        "positions short",
    )


def _rotate_scale(x, positions, base=10000.0):
    """Each pair's magnitude: a rotation's error is relative to it, not to the rotated value."""
    half = x.shape[-1] // 2
    pair = (x[..., 0 : 2 * half : 2] ** 2 + x[..., 1 : 2 * half : 2] ** 2).sqrt()
    scale = x.abs().clone()
    scale[..., 0 : 2 * half : 2] = pair
    scale[..., 1 : 2 * half : 2] = pair
    return scale


def _no_bench_shapes(device, quick):
    return [(1024, 1024)]


SPECS = [
    OpSpec(
        name=MASKED,
        function=masked_mean_square,
        reference=masked_mean_square_math,
        samples=_masked_samples,
        bad_inputs=_masked_bad,
        make_sample=lambda shape, dtype, device: Sample((random(shape, dtype, device), _mask(shape, device))),
        bench_shapes=_no_bench_shapes,
        bytes_moved=lambda sample, backward: 0,
        # a mean of squares: relative to the mean of their magnitudes, as the result is
        scale=lambda x, mask: masked_mean_square_math(x, mask).abs() + 1e-300,
        rtol={**RTOL, torch.float32: 1e-5},
        kind="reduction",
        output_dtype=lambda dtype: torch.float64 if dtype == torch.float64 else torch.float32,
        module=__name__,
    ),
    OpSpec(
        name=PICK,
        function=row_pick,
        reference=row_pick_math,
        samples=_pick_samples,
        bad_inputs=_pick_bad,
        make_sample=_pick_sample,
        bench_shapes=_no_bench_shapes,
        bytes_moved=lambda sample, backward: 0,
        scale=_pick_scale,
        rtol={**RTOL, torch.float32: 1e-5},
        kind="rowwise",
        placements=lambda sample: [(Replicate(), Replicate()), (Shard(0), Shard(0))],
        module=__name__,
    ),
    OpSpec(
        name=SCALE,
        function=feature_scale,
        reference=lambda x, w: x * w,
        samples=_scale_samples,
        bad_inputs=_scale_bad,
        make_sample=_scale_sample,
        bench_shapes=_no_bench_shapes,
        bytes_moved=lambda sample, backward: 0,
        bench_variants=_scale_variants,
        placements=lambda sample: _scale_placements(*sample.args),
        module=__name__,
    ),
    OpSpec(
        name=ROTATE,
        function=rotate_pairs,
        reference=rotate_pairs_math,
        samples=_rotate_samples,
        bad_inputs=_rotate_bad,
        make_sample=_rotate_sample,
        bench_shapes=_no_bench_shapes,
        bytes_moved=lambda sample, backward: 0,
        scale=_rotate_scale,
        rtol={**RTOL, torch.float32: 1e-5},
        kind="rowwise",
        large_shape=(2**31 // 4096 + 3, 8, 512),
        per_row=(0, 1),  # x's tokens and their positions: shapes cannot tell positions [N] apart
        differentiable=(0,),
        # a Placement for each tensor argument, None for base where a sample passes it
        placements=lambda sample: [
            (*p, *[None] * (len(sample.args) - 2)) for p in _rotate_placements(*sample.args[:2])
        ],
        module=__name__,
    ),
]
