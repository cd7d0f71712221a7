"""nox -s doctor: each toolchain problem is found and comes with its fix."""

from __future__ import annotations

import pytest
import torch
import torch.utils.cpp_extension

doctor = pytest.importorskip("tools.doctor", reason="run from the repository root")


@pytest.fixture
def toolchain(monkeypatch, tmp_path):
    """A CUDA toolkit layout with headers, torch built for CUDA 13.0, GCC 12, nvcc 13.0."""
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda_runtime.h").write_text("")
    monkeypatch.setattr(torch.utils.cpp_extension, "CUDA_HOME", str(tmp_path))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(doctor, "nvcc_version", lambda home: (13, 0))
    monkeypatch.setattr(doctor, "gcc_major", lambda cxx: 12)
    monkeypatch.setattr(doctor, "cxx_runtime_findings", lambda cxx: [("ok", f"{cxx} links libstdc++ dynamically", "")])
    monkeypatch.delenv("MAX_JOBS", raising=False)
    return monkeypatch


def failures(found):
    return [(finding, fix) for status, finding, fix in found if status == "fail"]


def test_a_good_toolchain_passes(toolchain):
    assert failures(doctor.findings()) == []


def test_nvcc_of_another_cuda_major_than_torch(toolchain):
    """The installed build carries its runtime (a CUDA 12 wheel for a CUDA 13 torch is fine); the JIT build does not."""
    toolchain.setattr(doctor, "nvcc_version", lambda home: (12, 8))
    found = doctor.findings()
    assert failures(found) == []
    ((finding, fix),) = [(finding, fix) for status, finding, fix in found if status == "warn"]
    assert "nvcc 12.8" in finding and "CUDA 13.0" in finding and "carries the CUDA 12.8 runtime" in finding
    assert "custom_op.jit.load()" in finding and "torch's CUDA major" in fix


def test_host_compiler_newer_than_nvcc_supports(toolchain):
    toolchain.setattr(doctor, "gcc_major", lambda cxx: 16)
    ((finding, fix),) = failures(doctor.findings())
    assert "GCC 16 is newer than nvcc 13.0 supports (<= 15)" in finding and "g++-15" in fix


def test_missing_cuda_headers(toolchain, tmp_path):
    (tmp_path / "include" / "cuda_runtime.h").unlink()
    ((finding, fix),) = failures(doctor.findings())
    assert "cuda_runtime.h not found" in finding and "cuda-cudart-dev" in fix


def test_too_many_jobs_for_the_memory(toolchain):
    toolchain.setattr(doctor.build_config, "_available_memory_gb", lambda: 4.0)
    toolchain.setenv("MAX_JOBS", "8")
    warnings = [(f, fix) for status, f, fix in doctor.findings() if status == "warn"]
    assert any("MAX_JOBS=8" in f and fix == "MAX_JOBS=2" for f, fix in warnings)


def test_a_compiler_that_links_libstdcxx_statically(static_libstdcxx_compiler):
    ((status, finding, fix),) = doctor.cxx_runtime_findings(static_libstdcxx_compiler)[:1]
    assert status == "fail" and static_libstdcxx_compiler in finding and "links libstdc++ statically" in finding
    assert "CXX=" in fix and "-static-libstdc++" in fix


def test_a_compiler_that_links_libstdcxx_dynamically():
    ((status, finding, _),) = doctor.cxx_runtime_findings("g++")[:1]
    assert status == "ok" and "links libstdc++ dynamically" in finding


def test_torch_compile_and_aotinductor_are_named_with_the_same_fix(static_libstdcxx_compiler, monkeypatch):
    monkeypatch.setenv("CXX", static_libstdcxx_compiler)
    found = doctor.cxx_runtime_findings(static_libstdcxx_compiler)
    ((status, finding, fix),) = [f for f in found if "AOTInductor" in f[1]]
    assert (
        status == "fail"
        and f"torch.compile and AOTInductor compile their C++ code with {static_libstdcxx_compiler}" in finding
    )
    assert "links libstdc++ statically" in finding and "SIGSEGV" in finding
    assert fix == doctor.cxx_runtime.fix_message(static_libstdcxx_compiler) and "-static-libstdc++" in fix


def test_torch_compile_and_aotinductor_with_a_good_compiler(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    ((status, finding, _),) = [f for f in doctor.cxx_runtime_findings("c++") if "AOTInductor" in f[1]]
    assert status == "ok" and "with g++" in finding and "links libstdc++ dynamically" in finding


def test_the_compiler_named_is_the_one_inductor_uses():
    from torch._inductor import cpp_builder

    assert doctor.cxx_runtime.inductor_compiler() == cpp_builder.get_cpp_compiler()
