"""Both ops, every dtype, both weight forms, every backend, against float64 references."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_matches_reference, random, reference, weight_shape

import custom_op

OPS = {"weighted_square": custom_op.weighted_square, "weighted_sum_of_squares": custom_op.weighted_sum_of_squares}
FORMS = ["full", "per_feature"]

# Shapes reaching every kernel path: odd sizes (scalar tails), short rows (group kernels),
# long rows (block kernels), few long rows (split rows), many rows.
SHAPES = [(7,), (3, 5), (4, 33), (2, 3, 128), (257, 64), (64, 1024), (8, 4096), (2, 70001), (1, 300000)]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_reference(op, form, shape, dtype, device):
    x = random(shape, dtype, device)
    w = random(weight_shape(shape, form), dtype, device)
    assert_matches_reference(op, OPS[op](x, w), x, w)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("form", FORMS)
def test_registered_op_equals_python_api(op, form, device):
    x = random((6, 10), torch.float32, device)
    w = random(weight_shape((6, 10), form), torch.float32, device)
    torch.testing.assert_close(getattr(torch.ops.custom_op, op)(x, w), OPS[op](x, w), rtol=0, atol=0)


def _non_contiguous_cases(device, dtype):
    base = random((24, 40), dtype, device)
    yield "transposed", base.t(), random((24,), dtype, device)
    yield "sliced", base[:, 3:35], random((32,), dtype, device)
    yield "stepped", base[::3, ::2], random((20,), dtype, device)
    yield "offset (unaligned)", base.flatten()[1:937].view(24, 39), random((39,), dtype, device)
    yield "weight stepped", base, random((80,), dtype, device)[::2]
    yield "expanded", random((1, 40), dtype, device).expand(5, 40), random((40,), dtype, device)
    yield "full weight transposed", base.t(), random((24, 40), dtype, device).t()


@pytest.mark.parametrize("op", OPS)
def test_non_contiguous_inputs(op, dtype, device):
    for name, x, w in _non_contiguous_cases(device, dtype):
        out = OPS[op](x, w)
        assert out.is_contiguous(), name
        assert_matches_reference(op, out, x, w)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(0,), (0, 8), (3, 0), (2, 0, 4)], ids=str)
def test_empty_inputs(op, shape, dtype, device):
    x = random(shape, dtype, device)
    w = random(weight_shape(shape, "per_feature"), dtype, device)
    out = OPS[op](x, w)
    ref, _ = reference(op, x, w)
    assert out.shape == ref.shape
    torch.testing.assert_close(out.double().cpu(), ref)  # empty sums are zeros


def test_zero_dim_elementwise(dtype, device):
    x = random((), dtype, device)
    w = random((), dtype, device)
    out = custom_op.weighted_square(x, w)
    assert out.dim() == 0
    assert_matches_reference("weighted_square", out, x, w)


def test_output_is_new_memory(device):
    x = random((4, 8), torch.float32, device)
    w = random((4, 8), torch.float32, device)
    y = custom_op.weighted_square(x, w)
    assert y.data_ptr() not in (x.data_ptr(), w.data_ptr())
