"""Every operator of the registry deployed without Python (docs/deploying.md): each is exported
(torch.export) on its own; a model calling all of them is compiled to one AOTInductor package per
device, which the C++ runner (tools/deploy/runner.cpp, no Python in it) and Python's
aoti_load_package both run: each operator's output equals the Python model's, bit for bit."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from torch import nn

import custom_op
from custom_op import _library, cxx_runtime, ops
from custom_op.testing import outputs

build_runner = pytest.importorskip("tools.deploy.build_runner", reason="run from the repository root")

pytestmark = pytest.mark.export

SPECS = ops.specs()
SHAPE = (3, 37)  # small, with rows of an odd length (a vectorized loop's tail)


def by_op(test):
    return pytest.mark.parametrize("spec", SPECS, ids=[spec.name for spec in SPECS])(test)


class OpCall(nn.Module):
    """One operator's public function on the sample's tensors, its other arguments fixed."""

    def __init__(self, spec, sample) -> None:
        super().__init__()
        self.function, self.args, self.kwargs = spec.function, sample.args, sample.kwargs

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        given = iter(tensors)
        args = [next(given) if isinstance(a, torch.Tensor) else a for a in self.args]
        return self.function(*args, **self.kwargs)


class Model(nn.Module):
    """Every operator given, each on its own inputs (taken in turn from the flat list); their outputs
    in one flat tuple."""

    def __init__(self, calls: list[tuple[OpCall, int]]) -> None:
        super().__init__()
        self.calls = nn.ModuleList(call for call, _ in calls)
        self.counts = [count for _, count in calls]

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results, start = [], 0
        for call, count in zip(self.calls, self.counts, strict=True):
            results += outputs(call(*tensors[start : start + count]))
            start += count
        return tuple(results)


@dataclass
class Deployment:
    """One device's package of every operator that exports, its inputs and the Python model's outputs."""

    export_errors: dict[str, Exception] = field(default_factory=dict)
    exported: dict[str, torch.export.ExportedProgram] = field(default_factory=dict)
    places: dict[str, slice] = field(default_factory=dict)  # operator -> its outputs' places
    inputs: list[torch.Tensor] = field(default_factory=list)
    expected: list[torch.Tensor] = field(default_factory=list)
    package: Path | None = None
    inputs_file: Path | None = None


def deploy(device: str, folder: Path) -> Deployment:
    if custom_op.LIBRARY_PATH is None:
        raise custom_op._LOAD_ERROR
    deployment, calls = Deployment(), []
    for spec in SPECS:
        sample = spec.sample_of_shape(SHAPE, torch.float32, device)
        call = OpCall(spec, sample)
        try:
            deployment.exported[spec.name] = torch.export.export(call, tuple(sample.tensors))
        except Exception as error:  # the operator's own test reports it; the others are deployed
            deployment.export_errors[spec.name] = error
            continue
        with torch.no_grad():
            expected = outputs(call(*sample.tensors))
        start = len(deployment.expected)
        deployment.places[spec.name] = slice(start, start + len(expected))
        deployment.expected += expected
        calls.append((call, len(sample.tensors)))
        deployment.inputs += sample.tensors
    if not calls:
        return deployment
    model = Model(calls)
    # AOTInductor compiles the package with this compiler: one that links libstdc++ statically
    # makes a package that crashes as it loads.
    cxx_runtime.check_toolchain(cxx_runtime.inductor_compiler())
    folder.mkdir(parents=True)
    program = torch.export.export(model, tuple(deployment.inputs))
    deployment.package = Path(torch._inductor.aoti_compile_and_package(program, package_path=str(folder / "model.pt2")))
    deployment.inputs_file = folder / "inputs.pt"
    torch.save([t.cpu() for t in deployment.inputs], deployment.inputs_file)
    return deployment


def once_per_device(make):
    """make(device) once per device, its exception too: a compile that failed is not redone for
    every operator's test, each fails with its error."""
    made = {}

    def get(device: str):
        if device not in made:
            try:
                made[device] = (make(device), None)
            except Exception as error:
                made[device] = (None, error)
        result, error = made[device]
        if error is not None:
            raise error
        return result

    return get


@pytest.fixture(scope="module")
def deployments(tmp_path_factory):
    """device -> its Deployment, made once per module (one AOTInductor compile per device)."""
    root = tmp_path_factory.mktemp("deploy")
    return once_per_device(lambda device: deploy(device, root / device))


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Path:
    return build_runner.build(tmp_path_factory.mktemp("runner") / "runner")


def run(runner: Path, deployment: Deployment, output: Path, *libraries: str) -> subprocess.CompletedProcess:
    command = [runner, deployment.package, deployment.inputs_file, output, *libraries]
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runner_outputs(runner, deployments, tmp_path_factory):
    """device -> the C++ runner's outputs of that device's package, the operators' libraries loaded (the CPU
    library, and the CUDA library where torch has CUDA), as Python loaded them."""

    @once_per_device
    def outputs(device: str) -> tuple[torch.Tensor, ...]:
        output = tmp_path_factory.mktemp(f"runner-{device}") / "outputs.pt"
        result = run(runner, deployments(device), output, *custom_op.LIBRARY_PATHS)
        assert result.returncode == 0, f"the runner failed ({result.returncode}): {result.stderr[-4000:]}"
        return torch.load(output)

    return outputs


def deployed(deployments, spec, device: str) -> Deployment:
    deployment = deployments(device)
    if spec.name in deployment.export_errors:
        pytest.fail(f"{spec.name} is not in the package: it does not export (test_export says why)")
    return deployment


@by_op
def test_export(spec, device, deployments):
    """The operator exports on its own, and the graph calls it as one op (not traced through)."""
    deployment = deployments(device)
    if spec.name in deployment.export_errors:
        raise deployment.export_errors[spec.name]
    own = {spec.overload(_library.NAMESPACE, name) for name in (spec.name, *spec.extra_ops)}
    targets = {node.target for node in deployment.exported[spec.name].graph.nodes}
    assert own & targets, f"{spec.name}: none of {own} in the exported graph's calls {targets}"


@by_op
def test_cpp_runner_matches_python(spec, device, deployments, runner_outputs):
    deployment = deployed(deployments, spec, device)
    place = deployment.places[spec.name]
    want = [t.cpu() for t in deployment.expected[place]]
    torch.testing.assert_close(list(runner_outputs(device)[place]), want, rtol=0, atol=0)


@by_op
def test_aoti_load_package_matches_python(spec, device, deployments):
    deployment = deployed(deployments, spec, device)
    model = torch._inductor.aoti_load_package(str(deployment.package))
    place = deployment.places[spec.name]
    torch.testing.assert_close(list(model(*deployment.inputs)[place]), deployment.expected[place], rtol=0, atol=0)


def test_the_runner_has_no_python(runner):
    linkage = cxx_runtime.inspect(runner)
    if linkage is None:
        pytest.skip("needs readelf and nm (binutils)")
    assert linkage.ok, linkage.describe()
    assert any(n.startswith("libtorch") for n in linkage.needed), linkage.needed
    assert not [n for n in linkage.needed if n.startswith(("libpython", "libtorch_python"))], linkage.needed


def test_without_the_operators_library_the_runner_names_what_is_missing(runner, deployments, tmp_path):
    deployment = deployments("cpu")
    if deployment.package is None:
        pytest.skip("no operator in the tree exports")
    result = run(runner, deployment, tmp_path / "outputs.pt")
    assert result.returncode == 1
    assert f"Could not find schema for {_library.NAMESPACE}::" in result.stderr, result.stderr
    assert "pass its library's path after OUTPUTS.pt" in result.stderr
    assert not (tmp_path / "outputs.pt").exists()


def test_a_compiler_that_links_libstdcxx_statically_is_refused(tmp_path):
    gxx = shutil.which("g++")
    if gxx is None or not sys.platform.startswith("linux"):
        pytest.skip("needs g++ on Linux")
    with pytest.raises(cxx_runtime.StaticCxxRuntimeError, match="linked libstdc\\+\\+ statically"):
        build_runner.build(tmp_path / "runner", cxx=f"{gxx} -static-libstdc++")
    assert not (tmp_path / "runner").exists()
