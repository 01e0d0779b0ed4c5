"""Mutation check: disabling any one correctness gate makes the equivalence suite fail.

Each test installs a mutant with ``monkeypatch`` (never committed to the code), then runs
the suite's own checks and asserts they catch it: the generated differential property
(generation only, no shrinking: the first failing program is enough), or the fault
catalogue test that guards that gate. The gates are those of docs/contract.md's rules:
effect eligibility (2), the view id in the call key (3), fresh copies on claims (4),
exception placement (5), seal-before-run (1), the in-order claims and discards of
early branch writes (2's extension, issue 17), early work never taking the program's
time or threads (7, issue 36: in real time, through the contended generator or the fault
catalogue), and sharing across runs only what the effect allows (8, issue 40: through the
many-runs generator, ``many``). Results: ``docs/equivalence.md``.
"""

from __future__ import annotations

import ast
import dataclasses
import weakref
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from occurrences import CallKey, Effect, PrefixParser, SealError, Snapshot
from pysolate._calls import _broker, _execute
from pysolate._calls._broker import RunScope
from pysolate._calls._run_objects import RunObjects
from pysolate._calls._sharing import HostSharing, RunSharing
from pysolate._calls._threads import WorkerThreads
from pysolate._run import _stream_run
from pysolate.testing import in_process_guest
from scheduler import BranchSpeculation, Observation, _lane
from scheduler._shared import ObservationTable

from . import test_faults_contention, test_faults_stream
from .contention import contended_conditions, contended_programs, differential_series
from .harness import check_pair, scheduled_pair
from .many import run_many_generated
from .programs import Conditions, conditions, programs

MUTANT_PROGRAMS = 300
"""Generated programs a mutant is given to be caught in (each run stops at the first catch;
the slowest, no fresh copies, took 175 once the generator learned issue 13's faults)."""


@dataclasses.dataclass(slots=True)
class Verdict:
    """How the generated suite fared against a mutant."""

    programs: int
    failure: BaseException | None


def run_generated(limit: int = MUTANT_PROGRAMS) -> Verdict:
    """Run the differential property over up to ``limit`` derandomized cases; stop at the
    first failing one. Cases run on seeded schedules on the mock clock
    (``scheduled_pair``), so whether a mutant is caught does not depend on machine load."""
    seen = 0

    @settings(
        derandomize=True,
        database=None,
        deadline=None,
        max_examples=limit,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(programs(), conditions(), st.integers(0, 2**32 - 1))
    def prop(source: str, case: Conditions, seed: int) -> None:
        nonlocal seen
        seen += 1
        check_pair(scheduled_pair(source, case, seed))

    try:
        prop()
    except Exception as exc:
        return Verdict(seen, exc)
    return Verdict(seen, None)


def test_the_unmutated_code_passes_the_same_programs() -> None:
    """Control: the programs the mutants fail on pass without a mutant."""
    verdict = run_generated(60)
    assert verdict.failure is None, verdict.failure


def test_mutant_effect_eligibility(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every method counts as speculable: live reads, writes and unknown calls run early
    (in the graph, the lane, ``Host.call_root`` and the broker alike)."""
    monkeypatch.setattr(Effect, "speculable", property(lambda self: True))
    verdict = run_generated()
    assert verdict.failure is not None


def test_mutant_view_id_dropped_from_the_call_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Formal calls are keyed by the root's view, whatever the run wrote before them."""

    def root_view(self: RunObjects, capability: str, method: str, call: _broker.BoundCall) -> str:
        obj = self.registrations[capability].obj
        if isinstance(obj, _broker.Viewed):
            return obj.view_of(method, call.arguments)
        return "epoch:0"

    monkeypatch.setattr(RunObjects, "view_of", root_view)
    verdict = run_generated()
    assert verdict.failure is not None


def test_mutant_no_fresh_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker hands out the held value itself: a program mutating a result changes
    what a later claim of the same key sees."""
    monkeypatch.setattr(_broker, "fresh_copy", lambda value: value)
    monkeypatch.setattr(_execute, "fresh_copy", lambda value: value)
    verdict = run_generated()
    assert verdict.failure is not None


def test_mutant_failure_raised_at_the_next_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed early read surfaces at the program's next call, whatever it is (raised
    as soon as it is known, instead of where the program reaches it)."""
    handler = RunScope.handler
    surfaced: weakref.WeakKeyDictionary[RunScope, set[int]] = weakref.WeakKeyDictionary()

    async def eager(
        self: RunScope,
        capability: str,
        method: str,
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> object:
        done = surfaced.setdefault(self, set())
        for obs in getattr(self.claims, "_early", ()):
            if obs.error is not None and not obs.claims and obs.id not in done:
                done.add(obs.id)
                raise obs.error
        return await handler(self, capability, method, args, kwargs)

    monkeypatch.setattr(RunScope, "handler", eager)
    verdict = run_generated()
    assert verdict.failure is not None


def test_mutant_failure_swallowed_at_the_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """A held early failure is not re-raised where the program claims it."""
    claimed = RunScope._claimed

    def swallow(
        self: RunScope, call: _broker.BoundCall, key: object, obs: object, now: float
    ) -> object:
        if getattr(obs, "error", None) is not None:
            obs.error = None  # type: ignore[attr-defined]
        return claimed(self, call, key, obs, now)  # type: ignore[arg-type]

    monkeypatch.setattr(RunScope, "_claimed", swallow)
    verdict = run_generated()
    assert verdict.failure is not None


class _Unsealed(PrefixParser):
    """A parser whose ``close`` returns the accepted prefix when the whole does not parse."""

    accepted: dict[int, str] = {}  # parser id -> source of its last snapshot

    def feed(self, text: str) -> Snapshot | None:
        snapshot = super().feed(text)
        if snapshot is not None:
            self.accepted[id(self)] = snapshot.source
        return snapshot

    def close(self) -> Snapshot:
        try:
            return super().close()
        except SealError:
            return _prefix_snapshot(self.accepted.get(id(self), ""))


def _prefix_snapshot(prefix: str) -> Snapshot:
    body = ast.parse(prefix).body
    return Snapshot(body, prefix, first_new=len(body))


def test_mutant_run_without_seal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream that does not seal runs its accepted prefix anyway. Generated programs
    always seal, so the fault catalogue is what must catch this one."""
    monkeypatch.setattr(_stream_run, "PrefixParser", _Unsealed)
    with pytest.raises(AssertionError):
        anyio.run(test_faults_stream.test_syntax_error_at_seal_is_rejected_and_runs_nothing)
    with pytest.raises(AssertionError):
        anyio.run(
            test_faults_stream.test_cut_stream_is_rejected_and_runs_nothing,
            "workspace.write_text('a.txt', ",
        )


class _Hasty(_Unsealed):
    """A parser that stops at its first accepted snapshot: the Guest gets that prefix
    while the stream still runs, and the rest of the stream is ignored."""

    def feed(self, text: str) -> Snapshot | None:
        if id(self) in self.accepted:
            return None
        return super().feed(text)

    def close(self) -> Snapshot:
        return _prefix_snapshot(self.accepted.get(id(self), ""))


def test_mutant_guest_given_source_before_the_stream_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stream_run, "PrefixParser", _Hasty)
    verdict = run_generated()
    assert verdict.failure is not None


async def _claim_any_equal(
    self: BranchSpeculation, capability: str, key: CallKey
) -> Observation | None:
    """Out of order: the first unclaimed speculative write with an equal key, wherever it is
    in the chain, and no discard when a program's write claims nothing."""
    chain = self._chains.get(capability)
    if chain is None:
        return None
    for k, obs in enumerate(chain.writes):
        if k >= chain.claimed and obs.key == key:
            await obs.done.wait()
            if not obs.settled:
                return None
            self._layers.adopt(capability, k + 1)
            chain.claimed = k + 1
            obs.claims += 1
            return obs
    return None


def test_mutant_branch_writes_claimed_out_of_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program's write claims any equal-key speculative write, not only the next one in
    program order, and a write that claims nothing leaves the layer in place (issue 17)."""
    monkeypatch.setattr(BranchSpeculation, "claim_write", _claim_any_equal)
    verdict = run_generated()
    assert verdict.failure is not None


def test_mutant_reads_of_a_discarded_layer_stay_claimable(monkeypatch: pytest.MonkeyPatch) -> None:
    """When a program's write does not claim, the layer's writes are discarded but the
    reads speculated on it stay in the claim table (issue 17)."""

    def writes_only(self: BranchSpeculation, chain: Any, k: int) -> None:
        chain.closed = chain.lost = True
        for obs in chain.writes[k:]:
            self._lane.discard(obs)

    monkeypatch.setattr(BranchSpeculation, "_discard_from", writes_only)
    verdict = run_generated()
    assert verdict.failure is not None


# -- contention (issue 36): real threads and time, so generated cases run as in the suite --

CONTENDED_MUTANT_CASES = 80
"""Contended cases a contention mutant is given to be caught in (stops at the first)."""

CONTENDED_SEED = 1
"""The contended cases' seed: fixed, so the cases do not change when the property's source
is reformatted (``derandomize`` seeds from the source; a reformat once drew 80 cases that
missed the abandoned-threads mutant; seed 1 catches both contention mutants within 80)."""


def run_contended(limit: int = CONTENDED_MUTANT_CASES) -> Verdict:
    """The contended differential and series properties (``contention``) over up to
    ``limit`` derandomized cases, stopping at the first failure."""
    seen = 0

    @seed(CONTENDED_SEED)
    @settings(
        database=None,
        deadline=None,
        max_examples=limit,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(
        st.lists(contended_programs(max_statements=5), min_size=1, max_size=3),
        contended_conditions(),
    )
    def prop(sources: list[str], case: Conditions) -> None:
        nonlocal seen
        seen += 1
        differential_series(sources, case)

    try:
        prop()
    except Exception as exc:
        return Verdict(seen, exc)
    return Verdict(seen, None)


def test_mutant_an_early_timeout_is_claimed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lane takes an early call its own timeout stopped for the tool's failure: the
    program is handed a timeout that waits shared with other early calls caused."""

    class _Never(Exception):
        pass

    monkeypatch.setattr(_lane, "LaneStopped", _Never)
    verdict = run_contended()
    assert verdict.failure is not None


def test_mutant_a_read_queued_behind_early_calls_is_not_run_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A program's read that timed out while early calls of its tool ran is taken as timed out."""
    monkeypatch.setattr(WorkerThreads, "early_overlapped", lambda self, capability, mark: False)
    with pytest.raises(AssertionError, match="status"):
        anyio.run(
            test_faults_contention.test_a_read_queued_inside_the_tool_behind_early_reads_runs_again,
            in_process_guest,
        )


def test_mutant_abandoned_early_threads_count_against_the_programs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Threads of abandoned early calls count toward ``max_stuck`` with the program's own
    (one count, as before issue 36): a later run's sync call is refused."""
    abandon = WorkerThreads._abandon

    def shared(self: WorkerThreads, state: Any, early: bool) -> bool:
        return abandon(self, state, False)

    monkeypatch.setattr(WorkerThreads, "_abandon", shared)
    verdict = run_contended()
    assert verdict.failure is not None


# -- work shared across runs (issue 40): many runs at once on one Host ------------------------

MANY_MUTANT_SETS = 200
"""Sets of concurrent runs (``many``) a sharing mutant is given to be caught in."""


def _caught(limit: int = MANY_MUTANT_SETS) -> BaseException | None:
    _seen, failure = run_many_generated(limit)
    return failure


def test_the_unmutated_table_passes_the_same_sets() -> None:
    """Control: the sets the sharing mutants fail on pass without a mutant."""
    assert _caught(30) is None


def test_mutant_an_immutable_read_shared_across_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Host's table keys calls without their view: a ``docs.fetch`` of one root serves
    a run on the other (contract 8: an ``immutable_read`` only within one root)."""
    find, open_ = ObservationTable.find, ObservationTable.open

    def blind(key: CallKey) -> CallKey:
        return dataclasses.replace(key, view="")

    monkeypatch.setattr(ObservationTable, "find", lambda self, key: find(self, blind(key)))
    monkeypatch.setattr(
        ObservationTable,
        "open",
        lambda self, key, owner, lane: open_(self, blind(key), owner, lane),
    )
    assert _caught() is not None


def test_mutant_a_live_read_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table admits ``live_read`` calls: one run's clock tick serves another's (or its
    own next) call."""
    shared = (Effect.PURE, Effect.IMMUTABLE_READ, Effect.LIVE_READ)
    monkeypatch.setattr(HostSharing, "shares", lambda self, call: call.spec.effect in shared)
    assert _caught() is not None


def test_mutant_a_branch_view_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table admits a program's read whatever its view: two runs' workspace branches
    both reach ``+w1`` with different contents, and one's read serves the other's."""
    monkeypatch.setattr(
        RunSharing,
        "admits_formal",
        lambda self, call, key: self._formal and self._host.shares(call),
    )
    assert _caught() is not None
