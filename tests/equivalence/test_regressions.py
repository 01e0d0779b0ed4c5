"""Failures the equivalence suite found, shrunk to minimal programs and kept.

Each names the bug it caught and the commit that fixed it; each runs through the full
differential check (``differential``: equality with the sequential reference, run-end
invariants, no early effects).
"""

from __future__ import annotations

import dataclasses

import pytest

from pysolate import LanePolicy

from .harness import QUIET, differential


@pytest.mark.parametrize("concurrency", [1, 8])
def test_follower_of_a_late_leader_settles_late(concurrency: int) -> None:
    """Bug: two equal-key sync reads (leader and graph follower) still in flight when the
    program ended made the lane settle the follower ``following -> late``, an illegal
    transition: the run crashed with ``IllegalTransition`` instead of returning the
    program's ``ZeroDivisionError``. Fixed by letting a follower end as its leader does."""
    conditions = dataclasses.replace(
        QUIET, latencies={"docs.fetch": 0.05}, policy=LanePolicy(concurrency=concurrency)
    )
    pair = differential("1/0\nf = docs.fetch('a')\np = docs.fetch('a')\n", conditions)
    assert pair.speculative.error is not None and pair.speculative.error.type == "ZeroDivisionError"
    assert [o.disposition for o in pair.speculative.observations] == ["late"]


def test_lone_surrogate_is_rejected_like_the_sequential_run() -> None:
    """Bug: ``run_source`` reported a source with a lone surrogate as ``SealError`` on
    line 1, ``run_stream`` as ``UnicodeEncodeError`` with no line. Fixed in ``seal()``."""
    pair = differential("r = docs.search('alpha')\nx = '\udcff'\n", QUIET)
    assert pair.speculative.status == "rejected"
    assert (
        pair.speculative.error is not None and pair.speculative.error.type == "UnicodeEncodeError"
    )
