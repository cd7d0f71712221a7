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
