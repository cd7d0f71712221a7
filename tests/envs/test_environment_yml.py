"""The real environment.yml, read as conda-lock reads it: the spec set each platform gets, and
selectors that conda-lock would misread refused before it runs."""

from __future__ import annotations

import pytest

from tools.envs import paths
from tools.envs.conda import errors, spec


def _specs(platform: str) -> dict[str, str]:
    lock_spec = spec.load_spec(paths.ENVIRONMENT_YML)
    return {dep.name: spec.match_spec(dep) for dep in lock_spec.dependencies[platform]}


def test_linux_64_gets_the_cuda_13_build_of_pytorch_and_its_toolchain():
    specs = _specs("linux-64")
    assert specs["pytorch"] == "pytorch >=2.13 cuda130_generic*"  # moves with PyTorch, CUDA 13.0 by name
    assert specs["cuda-version"] == "cuda-version 13.0.*"
    for name in ("cuda-nvcc", "cuda-cudart-dev", "libcublas-dev", "libcusparse-dev", "libcusolver-dev", "cuda-cccl"):
        assert name in specs, name
    assert specs["gxx_linux-64"] == "gxx_linux-64 14.*"
    assert "cxx-compiler" not in specs


@pytest.mark.parametrize("platform", ["linux-aarch64", "osx-arm64"])
def test_the_cpu_platforms_get_pytorch_without_cuda(platform):
    specs = _specs(platform)
    assert specs["pytorch"] == "pytorch >=2.13"
    assert "cxx-compiler" in specs
    assert not [name for name in specs if name.startswith(("cuda", "libcu", "gxx_linux"))]


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64", "osx-arm64"])
def test_every_platform_gets_the_build_and_test_tools_and_not_conda_lock(platform):
    specs = _specs(platform)
    for name in ("python", "ninja", "setuptools", "nox", "pytest", "hypothesis", "numpy"):
        assert name in specs, (platform, name)
    assert "conda-lock" not in specs  # it runs in the tools venv


@pytest.mark.parametrize(
    "line",
    [
        "  - cuda-nvcc   # [linux64] (the compiler)",  # conda-lock ignores it: kept on every platform
        "  - cuda-nvcc   # [not linux64]",  # dropped on every platform
        "  - cuda-nvcc   # [linux and x86_64]",
        "  - cuda-nvcc   # [linux64 or aarch64]",
    ],
)
def test_a_selector_conda_lock_would_misread_is_refused(tmp_path, line):
    env_yml = tmp_path / "environment.yml"
    env_yml.write_text(f"channels:\n  - conda-forge\nplatforms:\n  - linux-64\ndependencies:\n  - python\n{line}\n")
    with pytest.raises(errors.CondaEnvError, match=r"environment.yml line 7 .*conda-lock"):
        spec.load_spec(env_yml)


def test_selectors_conda_lock_reads_are_accepted(tmp_path):
    env_yml = tmp_path / "environment.yml"
    env_yml.write_text(
        "channels:\n  - conda-forge\nplatforms:\n  - linux-64\n  - osx-arm64\ndependencies:\n"
        "  - a   # [linux64]  a note after the selector\n  - b   # [osx]\n  - c\n"
    )
    lock_spec = spec.load_spec(env_yml)
    assert [d.name for d in lock_spec.dependencies["linux-64"]] == ["a", "c"]
    assert [d.name for d in lock_spec.dependencies["osx-arm64"]] == ["b", "c"]
