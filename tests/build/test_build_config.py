"""Build settings: CUDA is required, refused or detected as asked; arch list and MAX_JOBS defaults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.utils.cpp_extension

from custom_op import build_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("CUSTOM_OP_CUDA", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CUSTOM_OP_DEBUG", "CUSTOM_OP_WERROR"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_cuda_required_without_toolkit_fails_loudly(clean_env):
    clean_env.setenv("CUSTOM_OP_CUDA", "1")
    clean_env.setattr(torch.utils.cpp_extension, "CUDA_HOME", None)
    with pytest.raises(build_config.BuildConfigError, match="CUSTOM_OP_CUDA=1 but the CUDA kernels cannot be built"):
        build_config.cuda_enabled()


def test_cuda_required_with_cpu_torch_fails_loudly(clean_env):
    clean_env.setenv("CUSTOM_OP_CUDA", "1")
    clean_env.setattr(torch.version, "cuda", None)
    with pytest.raises(build_config.BuildConfigError, match="CPU-only build"):
        build_config.cuda_enabled()


def test_cuda_off(clean_env):
    clean_env.setenv("CUSTOM_OP_CUDA", "0")
    assert build_config.cuda_enabled() is False


def test_cuda_detected_without_toolkit_builds_cpu_and_says_so(clean_env, capsys):
    clean_env.setattr(torch.utils.cpp_extension, "CUDA_HOME", None)
    assert build_config.cuda_enabled() is False
    assert "CPU kernels only" in capsys.readouterr().out


def test_cuda_detected_with_toolkit_and_cuda_torch(clean_env):
    clean_env.setattr(torch.utils.cpp_extension, "CUDA_HOME", "/opt/cuda")
    clean_env.setattr(torch.version, "cuda", "13.0")
    assert build_config.cuda_enabled() is True


def test_bad_cuda_value(clean_env):
    clean_env.setenv("CUSTOM_OP_CUDA", "yes")
    with pytest.raises(build_config.BuildConfigError, match="must be 0, 1 or unset"):
        build_config.cuda_enabled()


def test_arch_list_honoured_or_defaulted(clean_env):
    clean_env.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert build_config.configure_cuda_arch_list() == "9.0"
    clean_env.delenv("TORCH_CUDA_ARCH_LIST")
    clean_env.setattr(torch.cuda, "is_available", lambda: False)
    assert build_config.configure_cuda_arch_list().startswith(build_config.DEFAULT_CUDA_ARCH_LIST)
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == build_config.DEFAULT_CUDA_ARCH_LIST


def test_max_jobs(clean_env):
    jobs = build_config.configure_max_jobs()
    assert jobs >= 1
    clean_env.setenv("MAX_JOBS", "3")
    assert build_config.configure_max_jobs() == 3


def test_debug_switch(clean_env):
    assert "-O3" in build_config.cxx_flags(False)
    clean_env.setenv("CUSTOM_OP_DEBUG", "1")
    assert "-O0" in build_config.cxx_flags(False) and "-G" in build_config.nvcc_flags()


def test_old_torch_refused():
    with pytest.raises(build_config.BuildConfigError, match=r"torch >= 2.11"):
        build_config.check_torch_version("2.10.1+cu128")
    build_config.check_torch_version("2.11.0")


@pytest.mark.skipif(not (ROOT / "setup.py").exists(), reason="needs the repository's setup.py")
def test_an_old_setuptools_is_named_with_the_version_needed(tmp_path):
    # a setuptools older than 77 (a fresh Python 3.11 venv's 65.5) as --no-build-isolation meets it
    (tmp_path / "setuptools").mkdir()
    (tmp_path / "setuptools" / "__init__.py").write_text("__version__ = '65.5.0'\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    command = [sys.executable, "setup.py", "--version"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "custom_op: building needs setuptools >= 77, found 65.5.0" in result.stderr
    assert "pip install 'setuptools>=77'" in result.stderr


def test_warnings_are_on_and_can_be_errors(clean_env):
    assert {"-Wall", "-Wextra"} <= set(build_config.cxx_flags(False))
    assert "-Werror" not in build_config.cxx_flags(False)
    clean_env.setenv("CUSTOM_OP_WERROR", "1")
    assert "-Werror" in build_config.cxx_flags(False)


def test_the_default_architectures_follow_the_toolkit():
    assert build_config.default_cuda_arch_list((13, 0)) == build_config.DEFAULT_CUDA_ARCH_LIST
    assert build_config.default_cuda_arch_list((12, 8)) == build_config.DEFAULT_CUDA_ARCH_LIST
    assert build_config.default_cuda_arch_list(None) == build_config.DEFAULT_CUDA_ARCH_LIST
    # Before 12.8 nvcc knows no Blackwell: Hopper's PTX serves it.
    assert build_config.default_cuda_arch_list((12, 4)) == build_config.DEFAULT_CUDA_ARCH_LIST_BEFORE_12_8
    assert "10.0" not in build_config.DEFAULT_CUDA_ARCH_LIST_BEFORE_12_8


def test_toolkit_version_is_nvccs(tmp_path):
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    nvcc.chmod(0o755)
    assert build_config.toolkit_version(str(tmp_path)) == (12, 4)
    assert build_config.toolkit_version(str(tmp_path / "missing")) is None


def test_the_architectures_built_are_set_and_recorded(clean_env):
    clean_env.setenv("TORCH_CUDA_ARCH_LIST", " 8.0 9.0+PTX ")
    assert build_config.configure_cuda_arch_list() == "8.0;9.0+PTX"
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0+PTX"
    # For the message of a GPU the build has no kernel for (csrc/common/cuda_errors.cu).
    assert "-DCUSTOM_OP_CUDA_ARCHS=8.0/9.0+PTX" in build_config.nvcc_flags()


def test_the_visible_gpus_architectures_with_ptx_for_the_newest(clean_env):
    clean_env.setattr(torch.cuda, "is_available", lambda: True)
    clean_env.setattr(torch.cuda, "device_count", lambda: 2)
    clean_env.setattr(torch.cuda, "get_device_capability", lambda i: [(9, 0), (8, 0)][i])
    assert build_config.configure_cuda_arch_list() == "8.0;9.0+PTX"


def test_the_cuda_library_holds_the_cu_files_and_the_cpp_files_again():
    cpu, cuda = build_config.cpu_library_sources(), build_config.cuda_library_sources()
    assert cpu and all(path.endswith(".cpp") for path in cpu)
    assert set(cpu) < set(cuda)
    assert {Path(path).suffix for path in set(cuda) - set(cpu)} == {".cu"}
    # Its .cpp files register nothing there (csrc/common/library.h): the CPU library has.
    assert "-DCUSTOM_OP_CUDA_LIBRARY" in build_config.cuda_library_flags(build_config.cxx_flags(True))
    assert "-DCUSTOM_OP_CUDA_LIBRARY" not in build_config.cxx_flags(True)


@pytest.mark.parametrize(
    "code", ["from custom_op import build_config; build_config.cuda_enabled()", "import bench.timing"]
)
def test_no_gpu_warning_the_user_cannot_act_on(code):
    # torch.utils.cpp_extension warns "No CUDA runtime is found" on import where no GPU is visible.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "No CUDA runtime" not in out.stderr + out.stdout
