"""A sample's label as its test id (custom_op/testing.id_of): a number's sign is kept, so samples that
differ only in it (eps=1 and eps=-1) get ids of their own."""

from __future__ import annotations

import pytest

from custom_op.testing import id_of


@pytest.mark.parametrize(
    "label, test_id",
    [
        ("eps=-1.0", "eps_-1.0"),
        ("eps=1.0", "eps_1.0"),
        ("ignore_index=-100", "ignore_index_-100"),
        ("0-dim", "0_dim"),
        ("x 1-D, transposed", "x_1_D_transposed"),
        ("", "default"),
    ],
)
def test_a_label_becomes_an_id_that_keeps_a_numbers_sign(label, test_id):
    assert id_of(label) == test_id
