"""The Python side of the operators: public functions, fake kernels and autograd.

The schemas and kernels live in the compiled library (csrc/). `register(namespace)` adds what
torch.compile and autograd need to a loaded library's ops; the installed library uses the
namespace `custom_op`, each JIT build its own (custom_op.jit).
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import torch

from . import _checks

OPERATORS = ("weighted_square", "weighted_sum_of_squares")
AUTOCAST_DEVICES = ("cpu", "cuda")

# Checks and messages name the operator as users know it, whatever the build's namespace.
_PUBLIC = {name: f"custom_op::{name}" for name in OPERATORS}

_registered: set[str] = set()
_libraries: list[torch.library.Library] = []  # Python kernels live as long as their Library


def _output_shape(name: str, x: torch.Tensor):
    return x.shape if name == "weighted_square" else x.shape[:-1]


def _double_backward(op: str):
    def backward(ctx, *grads):
        raise RuntimeError(
            f"{op}: double backward (a gradient of its gradient) is not supported; "
            "compute the second derivative another way, e.g. with eager PyTorch ops"
        )

    return backward


def _register_op(namespace: str, name: str) -> None:
    qualname = f"{namespace}::{name}"
    public = _PUBLIC[name]
    reduces = name == "weighted_sum_of_squares"
    backward_op = getattr(getattr(torch.ops, namespace), f"{name}_backward").default

    # Fake kernels: output shapes and strides as the real kernels make them (new, contiguous).
    @torch.library.register_fake(qualname)
    def _fake(x, w):
        _checks.check_inputs(public, x, w, reduces)
        return x.new_empty(_output_shape(name, x))

    @torch.library.register_fake(f"{qualname}_backward")
    def _fake_backward(grad, x, w, deterministic=False):
        _checks.check_inputs(public, x, w, reduces)
        _checks.check_like_x(public, "grad", grad, x, _output_shape(name, x))
        return x.new_empty(x.shape), w.new_empty(w.shape)

    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.save_for_backward(x, w)

    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad_x, grad_w = backward_op(grad, x, w, torch.are_deterministic_algorithms_enabled())
        return (
            grad_x if ctx.needs_input_grad[0] else None,
            grad_w if ctx.needs_input_grad[1] else None,
        )

    torch.library.register_autograd(qualname, backward, setup_context=setup_context)
    torch.library.register_autograd(
        f"{qualname}_backward", _double_backward(public), setup_context=lambda ctx, inputs, output: None
    )
    # Autocast: float32, as PyTorch runs pow and sum under autocast: squares and sums of squares
    # overflow or lose precision in float16/bfloat16 where matmuls do not.
    for device_type in AUTOCAST_DEVICES:
        torch.library.register_autocast(qualname, device_type, torch.float32)


def _register_variants(namespace: str) -> None:
    """weighted_square.out and weighted_square_: results written into existing memory."""
    public = _PUBLIC["weighted_square"]

    @torch.library.register_fake(f"{namespace}::weighted_square.out")
    def _fake_out(x, w, *, out):
        _checks.check_inputs(public, x, w, False)
        _checks.check_like_x(public, "out", out, x, x.shape)

    @torch.library.register_fake(f"{namespace}::weighted_square_")
    def _fake_inplace(x, w):
        _checks.check_inputs(public, x, w, False)

    # No gradient flows through a result written into existing memory: say so instead of
    # silently dropping it (as PyTorch does for in-place ops on leaves that require grad).
    library = torch.library.Library(namespace, "IMPL")
    _libraries.append(library)
    packet = getattr(torch.ops, namespace)
    variants = (
        ("weighted_square.out", packet.weighted_square.out, "weighted_square(out=...)"),
        ("weighted_square_", packet.weighted_square_.default, "weighted_square_"),
    )
    for name, overload, label in variants:

        def refuse_grad(*args, _op=overload, _label=label, **kwargs):
            if torch.is_grad_enabled() and _requires_grad(*args, **kwargs):
                raise RuntimeError(
                    f"{public}: {_label} writes into existing memory and is not differentiable, but an input "
                    "requires grad; use custom_op.weighted_square(x, w) for gradients, or call it under torch.no_grad()"
                )
            with torch._C._AutoDispatchBelowAutograd():
                return _op(*args, **kwargs)

        library.impl(name, refuse_grad, "Autograd")


def register(namespace: str) -> None:
    """Registers fake kernels and autograd for the ops of a loaded library (once per namespace)."""
    if namespace in _registered:
        return
    for name in OPERATORS:
        _register_op(namespace, name)
    _register_variants(namespace)
    _registered.add(namespace)


def bind(namespace: str) -> SimpleNamespace:
    """The ops of `namespace` as plain callables: ops.weighted_square(x, w), ..."""
    packet = getattr(torch.ops, namespace)
    ops = {name: getattr(packet, name).default for name in OPERATORS}
    return SimpleNamespace(
        namespace=namespace,
        weighted_square_out=packet.weighted_square.out,
        weighted_square_=packet.weighted_square_.default,
        **ops,
    )


def _requires_grad(x, w, out=None) -> bool:
    """Whether x, w or out requires grad; True also for anything but tensors (an fx Proxy, a wrong
    type), which the op's full path handles."""
    Tensor = torch.Tensor
    if not (isinstance(x, Tensor) and isinstance(w, Tensor) and (out is None or isinstance(out, Tensor))):
        return True
    return x.requires_grad or w.requires_grad or (out is not None and out.requires_grad)


def _call(op, x, w, out=None):
    """op(x, w) or op(x, w, out=out), dispatched below its Python Autograd kernel when no gradient
    is needed.

    That kernel (register_autograd's, or the variants' refusal) does nothing then, yet costs as
    much host time as the compiled kernel's own dispatch (on the CPU machine, 3.6 of 6.6 us per
    call). torch.compile traces the op itself, and any input that requires grad takes the op's
    full path, so gradients and the variants' refusal are unchanged.
    """
    if torch.compiler.is_compiling():  # traced: the fake kernels raise the ValueError themselves
        return op(x, w) if out is None else op(x, w, out=out)
    try:
        if torch.is_grad_enabled() and _requires_grad(x, w, out):
            return op(x, w) if out is None else op(x, w, out=out)
        with torch._C._AutoDispatchBelowAutograd():
            return op(x, w) if out is None else op(x, w, out=out)
    except RuntimeError as error:
        if _BAD_INPUT.match(str(error)):
            raise ValueError(str(error)) from None
        raise


# The C++ checks throw std::invalid_argument, which torch 2.11-2.14 raise as ValueError; torch
# 2.15's stable ABI turns every C++ exception into RuntimeError. The API raises ValueError on all.
_BAD_INPUT = re.compile(r"custom_op::\w+: arguments? '")


def weighted_square(x: torch.Tensor, w: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """y = w * x**2, elementwise.

    x: a float32, float64, float16 or bfloat16 tensor on the CPU or a CUDA GPU, any shape.
    w: x's dtype and device; x's shape, or 1-D with x.shape[-1] elements (one weight per feature).
    Returns a new contiguous tensor of x's shape. Differentiable in x and w; works under
    torch.compile(fullgraph=True). With out= (x's shape, dtype and device), writes there instead
    and returns out (not differentiable).
    """
    if out is not None:
        _call(torch.ops.custom_op.weighted_square.out, x, w, out=out)
        return out
    return _call(torch.ops.custom_op.weighted_square.default, x, w)


def weighted_square_(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """In place: x becomes w * x**2 and is returned; no memory is allocated when x is contiguous.

    Not differentiable (as most in-place operations on leaves that require grad).
    """
    _call(torch.ops.custom_op.weighted_square_.default, x, w)
    return x


def weighted_sum_of_squares(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """s = sum_j w_j * x[..., j]**2 over the last dimension (the core of RMSNorm).

    x: at least 1-D, float32, float64, float16 or bfloat16, on the CPU or a CUDA GPU.
    w: x's dtype and device; x's shape, or 1-D with x.shape[-1] elements.
    Returns a new contiguous tensor of shape x.shape[:-1]; half types accumulate in float32.
    Differentiable in x and w; works under torch.compile(fullgraph=True).
    """
    return _call(torch.ops.custom_op.weighted_sum_of_squares.default, x, w)
