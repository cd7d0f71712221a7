"""The operators this template ships as examples, declared once: `nox -s new` copies DEFAULT_TEMPLATE
when --like is not given, and `nox -s fork` tests a fork's own operators (every other one) with the
examples deleted, or, in the template itself, the default template alone."""

from __future__ import annotations

EXAMPLES = ("weighted_square", "rms_norm", "cross_entropy")
DEFAULT_TEMPLATE = "weighted_square"  # the smallest complete operator


def fork_plan(ops: list[str]) -> tuple[list[str], list[str]]:
    """(kept, deleted) of the tree's operators for `nox -s fork`: a fork's own operators, else the
    default template (or, without it, the first operator there is)."""
    own = [op for op in ops if op not in EXAMPLES]
    if own:
        kept = own
    elif DEFAULT_TEMPLATE in ops:
        kept = [DEFAULT_TEMPLATE]
    else:
        kept = ops[:1]
    return kept, [op for op in ops if op not in kept]
