"""The ops' sharding rules wait for DTensor: `import custom_op` does not import
torch.distributed.tensor, and rules handed to custom_op._sharding register right after it is
imported, or at once if it already is, or, where the rules' module imports DTensor first, when that
module's import ends (each case in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys, types
calls = []
probe = types.ModuleType("probe_rules")
probe.register = calls.append  # an op's sharding.py: register(namespace)
sys.modules["probe_rules"] = probe
"""


def _run(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE + code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_import_custom_op_leaves_dtensor_unimported_and_rules_register_on_its_import():
    _run("""
import custom_op
from custom_op import _sharding
assert "torch.distributed.tensor" not in sys.modules, "import custom_op imported DTensor"
_sharding.register_rules("probe_rules", "first")
_sharding.register_rules("probe_rules", "second")
assert calls == [], calls
import torch.distributed.tensor
assert calls == ["first", "second"], calls
assert not any(isinstance(f, type(_sharding._FINDER)) for f in sys.meta_path), "the finder stayed"
assert torch.distributed.tensor.__spec__.loader.__class__.__name__ != "_ThenRegister"
""")


def test_rules_register_at_once_when_dtensor_is_imported():
    _run("""
import torch.distributed.tensor
from custom_op import _sharding
_sharding.register_rules("probe_rules", "now")
assert calls == ["now"], calls
""")


def test_rules_whose_module_imports_dtensor_first_register_when_its_import_ends(tmp_path):
    (tmp_path / "rules_first.py").write_text(
        "import sys\nimport torch.distributed.tensor  # before register exists\n\n"
        "def register(namespace):\n    sys.modules['__main__'].calls.append(namespace)\n"
    )
    _run(f"""
sys.path.insert(0, {str(tmp_path)!r})
import custom_op
from custom_op import _sharding
assert "torch.distributed.tensor" not in sys.modules, "import custom_op imported DTensor"
_sharding.register_rules("probe_rules", "probe")
_sharding.register_rules("rules_first", "first")
import rules_first
assert calls == ["probe", "first"], (calls, _sharding.failed)
assert not _sharding.failed, _sharding.failed
assert not any(isinstance(f, type(_sharding._FINDER)) for f in sys.meta_path), "the finder stayed"
""")
