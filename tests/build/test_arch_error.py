"""A build without the GPU's architecture: the first CUDA call says which GPU, its compute capability,
the architectures the library holds and the fix, instead of the runtime's bare "no kernel image"."""

from __future__ import annotations

import re

import pytest
import torch

import custom_op.jit
from custom_op import ops

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.fixture
def foreign_build(tmp_path, monkeypatch):
    """A JIT build for one architecture of another major than the GPU's, without PTX: nothing it can run."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    major, _ = torch.cuda.get_device_capability()
    foreign = "9.0" if major == 8 else "8.0"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", foreign)
    monkeypatch.setenv("CUSTOM_OP_JIT_DIR", str(tmp_path))
    return foreign, custom_op.jit.load(with_cuda=True)


def test_no_kernel_for_this_gpu_names_the_gpu_and_the_fix(foreign_build):
    foreign, api = foreign_build
    specs = ops.specs()
    if not specs:
        pytest.skip("no operator in the registry")
    spec = specs[0]
    sample = spec.sample_of_shape((4, 8), torch.float32, "cuda")
    major, minor = torch.cuda.get_device_capability()
    with pytest.raises(RuntimeError) as raised:
        getattr(api, spec.name)(*sample.args, **sample.kwargs)
        torch.cuda.synchronize()
    message = str(raised.value)
    for expected in (
        torch.cuda.get_device_name(),
        f"compute capability {major}.{minor}",
        f"built for TORCH_CUDA_ARCH_LIST={foreign}",
        f'TORCH_CUDA_ARCH_LIST="{major}.{minor}"',
    ):
        assert expected in message, f"{expected!r} not in: {message}"
    assert re.search(r"\S+\.so holds no kernel", message), message
