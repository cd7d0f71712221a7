"""The README's snippet, saved as a script in a folder outside the checkout and run there with the
checkout on PYTHONPATH (as the README says): it imports the package, runs an op forward and
backward and prints its check."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = next(p.parent.name for p in ROOT.glob("*/_library.py"))


def _snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    return next(block for block in blocks if f"import torch, {PACKAGE}" in block)


def test_the_readme_snippet_runs_as_a_script_outside_the_checkout(tmp_path):
    snippet = _snippet()
    called = set(re.findall(rf"\b{PACKAGE}\.(\w+)\(", snippet)) - {"jit"}
    missing = sorted(op for op in called if not (ROOT / PACKAGE / "ops" / op).is_dir())
    if missing:  # a fork that deleted the example its README still shows
        pytest.skip(
            f"the README's snippet calls {', '.join(missing)}, which this tree does not have: rewrite it for yours"
        )
    script = tmp_path / "snippet.py"
    script.write_text(snippet)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    # Its closing line, "<package> <version> on <device>: ..." (a fork's snippet prints its own op's check).
    assert re.search(rf"^{PACKAGE} \S+ on (cpu|cuda): \S", done.stdout, re.M), done.stdout
