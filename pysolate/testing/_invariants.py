"""The accounting invariants every finished run must hold, as one assertion a test can call."""

from __future__ import annotations

from collections.abc import Mapping

from occurrences import MethodSpec

from .._result import RunResult

_EARLY_DISPOSITIONS = frozenset({"claimed", "cancelled", "late", "orphaned"})


def check_invariants(result: RunResult, specs: Mapping[str, Mapping[str, MethodSpec]] | None = None) -> None:
    """Assert the accounting invariants every finished run must hold (issue 6).

    - every early (speculative) physical observation has exactly one disposition, ``claimed``
      exactly when a receipt claimed it, and work that never started is ``cancelled``;
    - ``physical ≤ logical + orphaned + cancelled + late`` and the report's counts agree
      with the receipts and observations;
    - no receipt without a call: receipts are numbered in program order, each claimed one
      names an observation with its exact key, and observations are claimed exactly as
      often as receipts say;
    - with ``specs`` (``Host.method_specs()``): no early observation of a method that is
      not ``pure`` or ``immutable_read``.

    Raises ``AssertionError`` naming the broken invariant.
    """
    report, calls = result.report, result.calls
    observations = {obs.id: obs for obs in result.observations}
    assert [c.index for c in calls] == list(range(len(calls))), "receipts are not in program order"
    assert report.logical == len(calls), f"logical {report.logical} != {len(calls)} receipts"
    assert report.claimed == sum(c.lane == "claimed" for c in calls), "claimed count != claimed receipts"
    assert report.direct == sum(c.lane == "direct" for c in calls), "direct count != direct receipts"
    referencing: dict[int, int] = dict.fromkeys(observations, 0)
    for call in calls:
        if call.lane != "claimed":
            continue
        obs = observations.get(call.observation_id)  # type: ignore[arg-type]
        assert obs is not None, f"receipt {call.index} claims unknown observation {call.observation_id}"
        assert obs.key == call.key, f"receipt {call.index} claimed observation {obs.id} of another key"
        referencing[obs.id] += 1
    counts = dict.fromkeys(_EARLY_DISPOSITIONS, 0)
    for obs in observations.values():
        if obs.lane == "formal":
            assert obs.disposition is None, f"formal observation {obs.id} has a disposition"
            assert obs.claims == 1 + referencing[obs.id], f"formal observation {obs.id} claim count"
            continue
        assert obs.disposition in _EARLY_DISPOSITIONS, f"early observation {obs.id}: {obs.disposition!r}"
        counts[obs.disposition] += 1
        assert obs.claims == referencing[obs.id], f"early observation {obs.id} claim count"
        assert (obs.disposition == "claimed") == (obs.claims > 0), f"early observation {obs.id} disposition"
        if not obs.physical:
            assert obs.disposition == "cancelled", f"never-started observation {obs.id} is {obs.disposition}"
        if specs is not None:
            effect = specs[obs.capability][obs.method].effect
            assert effect.speculable, f"early observation {obs.id} of {obs.capability}.{obs.method} ({effect})"
    assert (report.cancelled, report.late, report.orphaned) == (
        counts["cancelled"],
        counts["late"],
        counts["orphaned"],
    ), "report dispositions differ from the observations'"
    assert report.physical <= report.logical + report.orphaned + report.cancelled + report.late, (
        f"physical {report.physical} > logical + orphaned + cancelled + late"
    )
