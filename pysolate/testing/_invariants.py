"""The accounting invariants every finished run must hold, as one assertion a test can call."""

from __future__ import annotations

from collections.abc import Mapping

from occurrences import Effect, MethodSpec

from .._report._result import RunResult

_EARLY_DISPOSITIONS = frozenset({"claimed", "cancelled", "late", "orphaned", "discarded"})


def check_invariants(
    result: RunResult, specs: Mapping[str, Mapping[str, MethodSpec]] | None = None
) -> None:
    """Assert the accounting invariants every finished run must hold (issue 6).

    - every early (speculative) physical observation has exactly one disposition, ``claimed``
      exactly when a receipt claimed it, and work that never started is ``cancelled`` (or
      ``discarded`` with its branch layer; work another run's call served, ``shared_from``,
      is no physical work of this run's); only work on a branch layer is ``discarded``;
    - ``physical ≤ logical + orphaned + cancelled + late + discarded`` and the report's
      counts agree with the receipts and observations;
    - no receipt without a call: receipts are numbered in program order, each claimed one
      names an observation with its exact key and the same ``shared_from``, observations are
      claimed exactly as often as receipts say, and ``host_shared`` counts the receipts
      another run's call served;
    - with ``specs`` (``Host.method_specs()``): no early observation of a method that is
      not ``pure`` or ``immutable_read``, but a ``write`` on a branch layer.

    Raises ``AssertionError`` naming the broken invariant.
    """
    report, calls = result.report, result.calls
    observations = {obs.id: obs for obs in result.observations}
    assert [c.index for c in calls] == list(range(len(calls))), "receipts are not in program order"
    assert report.logical == len(calls), f"logical {report.logical} != {len(calls)} receipts"
    assert report.claimed == sum(c.lane == "claimed" for c in calls), (
        "claimed count != claimed receipts"
    )
    assert report.direct == sum(c.lane == "direct" for c in calls), (
        "direct count != direct receipts"
    )
    assert report.host_shared == sum(c.shared_from is not None for c in calls), (
        "host_shared != receipts served by other runs"
    )
    referencing: dict[int, int] = dict.fromkeys(observations, 0)
    for call in calls:
        if call.lane != "claimed":
            continue
        obs = observations.get(call.observation_id)  # type: ignore[arg-type]
        assert obs is not None, (
            f"receipt {call.index} claims unknown observation {call.observation_id}"
        )
        assert obs.key == call.key, (
            f"receipt {call.index} claimed observation {obs.id} of another key"
        )
        assert obs.shared_from == call.shared_from, (
            f"receipt {call.index} and its observation name different servers"
        )
        referencing[obs.id] += 1
    counts = dict.fromkeys(_EARLY_DISPOSITIONS, 0)
    for obs in observations.values():
        if obs.lane == "formal":
            assert obs.disposition is None, f"formal observation {obs.id} has a disposition"
            assert obs.claims == 1 + referencing[obs.id], f"formal observation {obs.id} claim count"
            continue
        assert obs.disposition in _EARLY_DISPOSITIONS, (
            f"early observation {obs.id}: {obs.disposition!r}"
        )
        counts[obs.disposition] += 1
        assert obs.claims == referencing[obs.id], f"early observation {obs.id} claim count"
        assert (obs.disposition == "claimed") == (obs.claims > 0), (
            f"early observation {obs.id} disposition"
        )
        if not obs.physical and obs.shared_from is None:
            assert obs.disposition in ("cancelled", "discarded"), (
                f"never-started observation {obs.id} is {obs.disposition}"
            )
        if obs.disposition == "discarded":
            assert obs.layer is not None, f"observation {obs.id} discarded off any branch layer"
        if specs is not None:
            effect = specs[obs.capability][obs.method].effect
            early = effect.speculable or (effect is Effect.WRITE and obs.layer is not None)
            assert early, f"early observation {obs.id} of {obs.capability}.{obs.method} ({effect})"
    assert (report.cancelled, report.late, report.orphaned, report.discarded) == (
        counts["cancelled"],
        counts["late"],
        counts["orphaned"],
        counts["discarded"],
    ), "report dispositions differ from the observations'"
    wasted = report.orphaned + report.cancelled + report.late + report.discarded + report.reruns
    assert report.physical <= report.logical + wasted, (
        f"physical {report.physical} > logical + orphaned + cancelled + late + discarded + reruns"
    )
    if specs is not None:
        writes = [
            o
            for o in observations.values()
            if o.layer is not None and specs[o.capability][o.method].effect.may_write
        ]
        assert report.early_writes == len(writes), (
            f"early writes {report.early_writes} != {len(writes)} on layers"
        )
