"""What the shared test suites and the benchmark need to know about cross_entropy."""

from __future__ import annotations

import functools
import importlib.util

import torch
import torch.nn.functional as F
from torch.distributed.tensor import Replicate, Shard

from ..._library import NAMESPACE
from ...testing import RTOL, BadInput, BlockLayer, OpSpec, Sample, TrainingCase, random
from . import cross_entropy, loss_dtype

NAME = "cross_entropy"
IGNORE = -100

# (N, V): rows of every length the kernels treat differently: odd (no whole vectors), one class,
# one vector, rows of many vectors, long rows (split across threads on the CPU), many short rows.
SHAPES = [(4, 7), (3, 1), (5, 8), (16, 64), (8, 4096), (3, 32000), (2, 70001), (1, 262144), (257, 128)]
HALF = (torch.float16, torch.bfloat16)


def reference(logits, labels, ignore_index):
    """The loss in eager PyTorch, logsumexp - the label's logit, 0 where ignored; run on float64
    logits (and the same int64 labels), the tests' reference."""
    valid = labels != ignore_index
    picked = logits.gather(1, torch.where(valid, labels, 0).unsqueeze(1)).squeeze(1)
    loss = torch.logsumexp(logits, 1) - picked
    return torch.where(valid, loss, torch.zeros_like(loss))


def scale(logits, labels, ignore_index):
    """loss = lse - x[label] cancels where the label's logit dominates: the error is relative to
    the terms' size."""
    valid = labels != ignore_index
    picked = logits.gather(1, torch.where(valid, labels, 0).unsqueeze(1)).squeeze(1)
    return torch.where(valid, torch.logsumexp(logits, 1).abs() + picked.abs(), 0)


def baseline(logits, labels, ignore_index):
    """What PyTorch users call instead (half logits cast up first, as they write it): the
    benchmark's eager and torch.compile columns."""
    x = logits.float() if logits.dtype in HALF else logits
    return F.cross_entropy(x, labels, reduction="none", ignore_index=ignore_index)


def liger(device: str) -> dict:
    """Liger-Kernel's cross-entropy (Triton, CUDA) where it is installed, in its two modes. Both write
    the logits' gradient over the logits during the forward (the benchmark gives each implementation
    its own copy of the inputs): with reduction="none" the backward then scales it by the incoming
    gradient (4 N V bytes in all); with "sum" and an incoming gradient of 1 it skips that pass
    (2 N V bytes, the logits lost)."""
    if device != "cuda" or importlib.util.find_spec("liger_kernel") is None:
        return {}
    from liger_kernel.transformers import LigerCrossEntropyLoss

    @functools.cache
    def loss(reduction: str, ignore_index: int):
        return LigerCrossEntropyLoss(ignore_index=ignore_index, reduction=reduction)

    return {
        f"Liger-Kernel reduction={reduction}": lambda logits, labels, ignore_index, r=reduction: loss(r, ignore_index)(
            logits, labels
        )
        for reduction in ("none", "sum")
    }


def labels_for(n: int, v: int, device, generator=None) -> torch.Tensor:
    return torch.randint(0, v, (n,), generator=generator).to(device)


def samples(device: str, dtype: torch.dtype):
    """Every kernel path: row lengths, views, ignored rows, magnitudes, empty inputs."""
    gen = torch.Generator().manual_seed(0)
    for n, v in SHAPES:
        yield Sample((random((n, v), dtype, device, gen), labels_for(n, v, device, gen), IGNORE), f"{n}x{v}")
    base = random((24, 40), dtype, device, gen)
    views = {
        "transposed": base.t(),
        "sliced": base[:, 3:35],
        "stepped": base[::3, ::2],
        "offset (unaligned)": base.flatten()[1:937].view(24, 39),
        "expanded": random((1, 40), dtype, device, gen).expand(5, 40),
    }
    for label, x in views.items():
        yield Sample((x, labels_for(x.shape[0], x.shape[1], device, gen), IGNORE), label)
    x = random((8, 40), dtype, device, gen)
    some = labels_for(8, 40, device, gen)
    some[::3] = IGNORE
    yield Sample((x, some, IGNORE), "some rows ignored")
    yield Sample((x, torch.full((8,), IGNORE, device=device), IGNORE), "all rows ignored")
    # A class index as ignore_index: rows labelled 3 are ignored, the other 3s in a row are not.
    yield Sample((x, torch.tensor([3, 0, 3, 5, 39, 3, 1, 2], device=device), 3), "ignore_index a class")
    yield Sample((x, torch.tensor([-1, 0, 7, -1, 39, 2, -1, 9], device=device), -1), "ignore_index -1")
    # exp(x) overflows at 89 in float32: the max must be taken out first. float16 ends at 65504.
    big = 5e3 if dtype == torch.float16 else 1e4
    yield Sample((random((4, 256), dtype, device, gen) * big, labels_for(4, 256, device, gen), IGNORE), "huge logits")
    confident = random((4, 64), dtype, device, gen)
    picked = labels_for(4, 64, device, gen)
    # loss = lse - x[label] cancels to about lse / 80 (the label's gradient, p - 1, too)
    confident[torch.arange(4), picked] = 7
    yield Sample((confident, picked, IGNORE), "confident rows")
    masked = random((4, 96), dtype, device, gen)
    masked[:, 32:] = float("-inf")  # e.g. padding classes: exp gives 0, never NaN
    yield Sample((masked, labels_for(4, 32, device, gen), IGNORE), "masked classes")
    yield Sample((random((0, 10), dtype, device, gen), torch.zeros(0, dtype=torch.int64, device=device), IGNORE), "N=0")


def gradcheck_samples(device: str):
    gen = torch.Generator().manual_seed(1)
    for n, v in [(3, 5), (2, 1), (4, 9)]:
        labels = labels_for(n, v, device, gen)
        if n > 2:
            labels[1] = IGNORE
        yield Sample((random((n, v), torch.float64, device, gen), labels, IGNORE), f"{n}x{v}")


def bad_inputs(device: str):
    """Bad arguments, the same on every device (a label out of range raises on the CPU alone: its
    test is tests/examples/cross_entropy)."""
    public = f"{NAMESPACE}::{NAME}"
    x = random((3, 5), torch.float32, device)
    labels = torch.tensor([0, 4, 2], device=device)
    for bad in (torch.int32, torch.int64, torch.bool, torch.complex64):
        name = str(bad).removeprefix("torch.")
        expect = ("argument 'logits'", "float32, float64, float16 or bfloat16", f"got {name}")
        yield BadInput((x.to(bad), labels, IGNORE), (public, *expect), f"logits {name}")
    for shape in [(5,), (2, 3, 5), ()]:
        yield BadInput(
            (random(shape, torch.float32, device), labels, IGNORE),
            (public, "argument 'logits'", "must be 2-D [N, V]", f"got shape {list(shape)}"),
            f"logits of shape {shape}",
        )
    yield BadInput(
        (random((3, 0), torch.float32, device), labels, IGNORE),
        (public, "argument 'logits'", "at least one class", "got shape [3, 0]"),
        "no classes",
    )
    for bad in (torch.int32, torch.uint8, torch.float32):
        name = str(bad).removeprefix("torch.")
        yield BadInput(
            (x, labels.to(bad), IGNORE), (public, "argument 'labels'", "int64", f"got {name}"), f"labels {name}"
        )
    for shape in [(4,), (2,), (3, 1), ()]:
        yield BadInput(
            (x, torch.zeros(shape, dtype=torch.int64, device=device), IGNORE),
            (public, "argument 'labels'", "shape [3] (logits.shape[0] = 3)", f"got shape {list(shape)}"),
            f"labels of shape {shape}",
        )
    yield BadInput((x, labels, "-100"), (public, "argument 'ignore_index'", "got str"), "a string for ignore_index")
    yield BadInput(([[1.0, 2.0]], labels[:1], IGNORE), (NAME,), "a list for logits")


def make_sample(shape, dtype, device) -> Sample:
    """Logits of `shape` seen as rows of its last dimension, 2-D: (n,) is one row (1, n), and
    leading dimensions are flattened into rows. Labels in [0, V), none ignored, spread over the
    classes and the same for every call of a shape (a model built twice gets the same ones)."""
    v = shape[-1] if shape else 1
    n = 1
    for s in shape[:-1]:
        n *= s
    x = torch.randn((n, v), device=device, dtype=dtype)
    return Sample((x, torch.arange(n, device=device) * 7919 % v, IGNORE))


def bench_shapes(device: str, quick: bool) -> list[tuple]:
    if quick:
        return [(256, 8192)]
    if device == "cuda":
        return [(8192, 32000), (8192, 128256), (4096, 262144)]
    return [(512, 8192), (32, 131072)]  # under 32 MB: glibc maps larger blocks afresh each call


def bytes_moved(sample: Sample, backward: bool) -> int:
    """Forward: logits and labels in, loss and lse out. Backward: grad, logits, labels and lse in,
    grad_logits out."""
    x = sample.args[0]
    n, e = x.shape[0], x.element_size()
    a = 8 if x.dtype == torch.float64 else 4  # loss, lse, grad: the accumulate dtype
    forward = e * x.numel() + n * (8 + 2 * a)
    return forward + (2 * e * x.numel() + n * (8 + 2 * a) if backward else 0)


class LMHead(torch.nn.Module):
    """The benchmark's training step: a language model's last layers on its final hidden states,
    RMSNorm (PyTorch's in both models: the step times this op alone) -> lm_head (a bias-free linear
    layer to the vocabulary) -> the loss, mean over tokens."""

    def __init__(self, hidden: int, vocabulary: int, loss) -> None:
        super().__init__()
        self.norm_weight = torch.nn.Parameter(torch.ones(hidden))
        self.lm_head = torch.nn.Linear(hidden, vocabulary, bias=False)
        self.loss = loss

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        normed = F.rms_norm(hidden, (hidden.shape[-1],), self.norm_weight, 1e-6)
        return self.loss(self.lm_head(normed), labels, IGNORE).mean()


def training(device: str, dtype: torch.dtype, quick: bool) -> TrainingCase:
    """An LLM head (Llama 3's 128256 tokens of vocabulary) with the op as its loss, against the same
    head with the baseline's."""
    full = device == "cuda" and not quick
    tokens, hidden, vocabulary = (8192, 4096, 128256) if full else (256, 256, 8192)
    torch.manual_seed(0)
    custom = LMHead(hidden, vocabulary, cross_entropy)
    plain = LMHead(hidden, vocabulary, baseline)
    plain.load_state_dict(custom.state_dict())
    x = torch.randn(tokens, hidden, device=device, dtype=dtype, requires_grad=True)
    labels = torch.randint(0, vocabulary, (tokens,), device=device)
    return TrainingCase(
        custom=custom.to(device=device, dtype=dtype),
        plain=plain.to(device=device, dtype=dtype),
        batch=(x, labels),
        label=f"LLM head {tokens} tokens, hidden {hidden}, vocabulary {vocabulary}",
    )


SPEC = OpSpec(
    name=NAME,
    function=cross_entropy,
    reference=reference,
    scale=scale,
    samples=samples,
    bad_inputs=bad_inputs,
    make_sample=make_sample,
    bench_shapes=bench_shapes,
    bytes_moved=bytes_moved,
    gradcheck_samples=gradcheck_samples,
    kind="rowwise",  # one loss per row of logits
    extra_ops=(f"{NAME}_forward",),  # returns (loss, lse): lse is saved for the backward
    # A row's sum of exps in float32: long rows carry its rounding.
    rtol={**RTOL, torch.float32: 1e-5},
    output_dtype=loss_dtype,
    differentiable=(0,),  # logits; the labels are int64
    autocast_dtype=None,  # the logits' own dtype, accumulated in float32
    baseline=baseline,
    other_libraries=liger,
    training=training,
    block=BlockLayer("loss", lambda op, logits, labels: op(logits, labels, IGNORE)),  # the block's loss
    # DTensor: logits and labels whole, or sharded over the rows alike (sharding.py)
    placements=lambda sample: [(Replicate(), Replicate(), None), (Shard(0), Shard(0), None)],
)
