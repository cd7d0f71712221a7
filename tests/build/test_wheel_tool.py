"""tools/wheel.py's own decisions, without building: the architectures it builds whatever GPU is
visible, the toolkit it is pointed at, and its refusal of a CUDA library that needs libcudart."""

from __future__ import annotations

import zipfile

import pytest

wheel = pytest.importorskip("tools.wheel", reason="run from the repository root")


@pytest.fixture
def toolkit(monkeypatch):
    """The toolkit version the wheel tool finds, set by the test."""
    found = {"version": (13, 0)}
    monkeypatch.setattr(wheel.build_config, "toolkit_version", lambda home=None: found["version"])
    return found


def test_the_default_architectures_whatever_is_set_or_visible(toolkit, monkeypatch):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")  # e.g. set by a GPU machine's image
    assert wheel.build_environment(None, None)["TORCH_CUDA_ARCH_LIST"] == wheel.build_config.DEFAULT_CUDA_ARCH_LIST
    toolkit["version"] = (12, 4)
    expected = wheel.build_config.DEFAULT_CUDA_ARCH_LIST_BEFORE_12_8
    assert wheel.build_environment(None, None)["TORCH_CUDA_ARCH_LIST"] == expected


def test_the_architectures_asked_for(toolkit):
    assert wheel.build_environment(None, "8.0 9.0+PTX")["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0+PTX"


def test_another_toolkit_comes_first(toolkit, tmp_path):
    env = wheel.build_environment(tmp_path, None)
    assert env["CUDA_HOME"] == str(tmp_path)
    assert env["PATH"].split(":")[0] == str(tmp_path / "bin")


def fake_wheel(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for member in members:
            archive.writestr(member, b"")
    return path


def test_a_cuda_library_that_needs_libcudart_is_refused(tmp_path, monkeypatch):
    built = fake_wheel(tmp_path / "w.whl", ["custom_op/_C.abi3.so", "custom_op/_C_cuda.abi3.so"])
    assert wheel.libraries(built) == {"_C": "custom_op/_C.abi3.so", "_C_cuda": "custom_op/_C_cuda.abi3.so"}
    needs = ["libc10.so", "libtorch_cuda.so"]
    monkeypatch.setattr(wheel.cxx_runtime, "inspect", lambda library: wheel.cxx_runtime.Linkage(needed=needs))
    wheel.check_cuda_runtime_inside(built)
    needs.append("libcudart.so.13")
    with pytest.raises(wheel.WheelError, match=r"needs libcudart\.so\.13: the CUDA runtime must be linked in"):
        wheel.check_cuda_runtime_inside(built)


def test_a_cpu_only_wheel_has_no_cuda_library_to_check(tmp_path):
    wheel.check_cuda_runtime_inside(fake_wheel(tmp_path / "w.whl", ["custom_op/_C.abi3.so"]))
