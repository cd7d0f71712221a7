"""The shared suites' parameters: every operator of the registry and the tests' own contract ops
(`spec`), and each of its samples as a test of its own (`sample_id`, `small_sample_id`,
`grad_sample_id`, `gradcheck_sample_id`, `sharded_sample_id`, `bad_input_id`), so that one failing
sample is one failing test, and every test id starts with the op's name: `-k NAME` selects all of an
op's tests."""

from __future__ import annotations

import functools

import pytest
import torch

import custom_op
from custom_op import ops

if custom_op.LIBRARY_PATH is None:
    raise pytest.UsageError(str(custom_op._LOAD_ERROR))

import contract_ops  # noqa: E402  (registers its ops in the loaded library's namespace)

# The shipped operators, then the shapes of the contract they may lack (contract_ops.py).
SPECS = ops.specs() + contract_ops.SPECS
BY_NAME = {spec.name: spec for spec in SPECS}
# Samples larger than this are left out of the gradient comparison (float64 autograd is slow).
GRAD_NUMEL = 2**17
# Samples up to this size go through opcheck, the fake kernels and torch.compile.
SMALL_NUMEL = 4096
# Samples whose tensors are at most this size run on DTensors (the sharding suite, several processes).
SHARDED_NUMEL = 1024


def _first_numel(sample) -> int:
    return sample.tensors[0].numel()


# Which samples each parameter covers, read from the CPU float32 samples (labels do not depend on
# the device or the dtype).
SAMPLE_SETS = {
    "sample_id": lambda spec: spec.samples_on("cpu", torch.float32),
    "small_sample_id": lambda spec: [s for s in spec.samples_on("cpu", torch.float32) if 0 < _first_numel(s) <= SMALL_NUMEL],
    "grad_sample_id": lambda spec: [
        s for s in spec.samples_on("cpu", torch.float32) if all(t.numel() > 0 for t in s.tensors) and _first_numel(s) <= GRAD_NUMEL
    ],
    "gradcheck_sample_id": lambda spec: spec.small_float64_samples("cpu"),
    "sharded_sample_id": lambda spec: [] if spec.placements is None else [
        s for s in spec.samples_on("cpu", torch.float32) if all(t.numel() <= SHARDED_NUMEL for t in s.tensors)
    ],
    "bad_input_id": lambda spec: spec.bad_inputs_on("cpu"),
}  # fmt: skip


@functools.cache
def _ids(spec_name: str, which: str) -> tuple[str, ...]:
    spec = BY_NAME[spec_name]
    ids = [s.id for s in SAMPLE_SETS[which](spec)]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise pytest.UsageError(f"{spec.name}: sample labels must be unique as test ids, repeated: {repeated}")
    return tuple(ids)


def pytest_generate_tests(metafunc):
    # `spec`: each operator of the registry (custom_op/ops/<name>/testing.py), or each (operator,
    # sample) pair of a sample set; the shared suites run on all.
    for which in SAMPLE_SETS:
        if which in metafunc.fixturenames:
            pairs = [(spec, i) for spec in SPECS for i in _ids(spec.name, which)]
            metafunc.parametrize(["spec", which], pairs, ids=[f"{spec.name}-{i}" for spec, i in pairs])
            return
    if "spec" in metafunc.fixturenames and not any(
        m.args[0] == "spec" for m in metafunc.definition.iter_markers("parametrize")
    ):
        metafunc.parametrize("spec", SPECS, ids=[spec.name for spec in SPECS])


@functools.lru_cache(maxsize=4)
def _samples(spec_name: str, which: str, device: str, dtype: torch.dtype) -> dict:
    spec = BY_NAME[spec_name]
    if which == "gradcheck_sample_id":
        made = spec.small_float64_samples(device)
    elif which == "bad_input_id":
        made = spec.bad_inputs_on(device)
    else:
        made = spec.samples_on(device, dtype)
    return {s.id: s for s in made}


def sample_of(spec, sample_id: str, device: str, dtype: torch.dtype = torch.float32, which: str = "sample_id"):
    """The sample of that id, made on `device` in `dtype` (the same values for every test of one
    spec, device and dtype in a row)."""
    return _samples(spec.name, which, device, dtype)[sample_id]


def prefixed(where: str):
    """assert_close's own message (the mismatch, its index, the greatest difference) after `where`."""
    return lambda message: f"{where}: {message}"
