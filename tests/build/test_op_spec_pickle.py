"""A spec goes to a worker process by name (its functions need not pickle): found again in the
module that defines it, the op's own testing.py by default, never through the registry."""

from __future__ import annotations

import pickle

import pytest

from custom_op import ops
from custom_op.testing import OpSpec

SPECS = ops.specs()


@pytest.mark.skipif(not SPECS, reason="no operator in the tree")
@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_an_operators_spec_pickles_to_itself(spec):
    assert pickle.loads(pickle.dumps(spec)) is spec


def test_a_spec_its_module_does_not_define_is_a_clear_error():
    spec = OpSpec(name="nowhere", function=abs, reference=abs, samples=abs, bad_inputs=abs, make_sample=abs,
                  bench_shapes=abs, bytes_moved=abs, module=__name__)  # fmt: skip
    with pytest.raises(LookupError, match=f"no OpSpec 'nowhere' in {__name__} .* give the spec's module="):
        pickle.loads(pickle.dumps(spec))
