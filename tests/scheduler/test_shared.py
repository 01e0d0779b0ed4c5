"""The Host's observation table: one physical call per exact key, bounded, failures never kept,
an early call cancelled only when its last waiter left (``scheduler._shared``)."""

from __future__ import annotations

import anyio
import pytest
from waiting import wait_until_quiet

from occurrences import CallKey
from scheduler import EntryState, ObservationTable, Probe, SharedProbe

pytestmark = pytest.mark.anyio


class Clock:
    """A controlled clock: the table's TTL is checked against ``now``."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def key(arguments: str, view: str = "static") -> CallKey:
    return CallKey("docs", "search", "1", arguments, view)


def table(
    clock: Clock, *, ttl: float = 10.0, max_entries: int = 8, max_chars: int = 1000
) -> ObservationTable:
    return ObservationTable(ttl=ttl, max_entries=max_entries, max_chars=max_chars, clock=clock)


def settled(t: ObservationTable, k: CallKey, value: object, chars: int = 1) -> None:
    entry = t.open(k, "run-a", "formal")
    entry.probe.adopt()
    t.settle(entry, value=value, chars=chars)


def test_a_success_serves_within_its_ttl_and_not_after() -> None:
    clock = Clock()
    t = table(clock, ttl=10.0)
    settled(t, key('["a"]'), ["a1"])
    clock.now = 10.0
    found = t.find(key('["a"]'))
    assert found is not None and found.state is EntryState.SUCCEEDED and found.value == ["a1"]
    clock.now = 10.5
    assert t.find(key('["a"]')) is None
    assert t.statistics().evicted == 1 and t.statistics().settled == 0


def test_keys_are_exact_a_view_or_an_argument_apart_is_another_key() -> None:
    t = table(Clock())
    settled(t, key('["a"]', view="root-1"), "one")
    assert t.find(key('["a"]', view="root-2")) is None
    assert t.find(key('["b"]', view="root-1")) is None
    assert t.find(CallKey("docs", "search", "2", '["a"]', "root-1")) is None  # another version


def test_the_oldest_successes_go_first_past_the_entry_and_size_bounds() -> None:
    t = table(Clock(), max_entries=2, max_chars=10)
    for name in "abc":
        settled(t, key(f'["{name}"]'), name, chars=3)
    assert t.find(key('["a"]')) is None and t.find(key('["c"]')) is not None
    settled(t, key('["d"]'), "d", chars=6)  # 3 + 3 + 6 > 10: b goes too
    assert t.find(key('["b"]')) is None
    assert t.find(key('["c"]')) is not None and t.find(key('["d"]')) is not None
    assert t.statistics().chars == 9
    settled(t, key('["huge"]'), "x", chars=11)  # past the bound alone: never kept
    assert t.find(key('["huge"]')) is None


def test_a_ttl_of_zero_keeps_nothing_settled() -> None:
    t = table(Clock(), ttl=0.0)
    settled(t, key('["a"]'), "a")
    assert t.find(key('["a"]')) is None


def test_failures_and_stops_leave_the_table_at_once() -> None:
    t = table(Clock())
    failing = t.open(key('["bad"]'), "run-a", "formal")
    failing.probe.adopt()
    t.settle(failing, error=LookupError("bad"))
    stopped = t.open(key('["cut"]'), "run-a", "formal")
    t.settle(stopped, stopped=True)
    assert t.find(key('["bad"]')) is None and t.find(key('["cut"]')) is None
    stats = t.statistics()
    assert (stats.failed, stats.stopped, stats.physical, stats.open) == (
        1,
        1,
        1,
        0,
    )  # the stop never ran its tool


async def test_waiters_get_the_outcome_and_the_last_to_leave_early_work_cancels_it() -> None:
    t = table(Clock())
    entry = t.open(key('["a"]'), "run-a", "speculative")
    entry.scope = anyio.CancelScope()
    t.join(entry, counted=False)
    t.join(entry)
    assert t.leave(entry) is True  # one waiter is left: the call goes on
    assert not entry.scope.cancel_called
    assert t.leave(entry) is False  # the last one: cancelled, out of the table
    assert entry.scope.cancel_called and t.find(key('["a"]')) is None
    assert t.statistics().cancelled == 1

    served = t.open(key('["b"]'), "run-a", "speculative")
    got: list[object] = []

    async def waiter() -> None:
        t.join(served)
        await served.wait()
        got.append(served.value)
        t.leave(served)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        tg.start_soon(waiter)
        await wait_until_quiet()
        served.probe.invoke()
        t.settle(served, value="b1", chars=2)
    assert got == ["b1", "b1"] and t.statistics().physical == 1


def test_a_programs_call_is_never_cancelled_by_its_waiters_leaving() -> None:
    t = table(Clock())
    entry = t.open(key('["a"]'), "run-a", "formal")
    t.join(entry)
    assert t.leave(entry) is True and entry.state is EntryState.OPEN


def test_a_follower_is_queued_exactly_while_the_shared_call_is_then_invoked() -> None:
    shared, follower, late = SharedProbe(), Probe(), Probe()
    shared.follow(follower)
    assert not follower.queued and not follower.invoked  # on its way: a claim urges it
    assert follower.urge is not None
    follower.urge()
    assert shared.urged  # the shared call must not queue for a thread now (contract 7)
    shared.queued = True  # it waits for a thread: so does its waiter
    assert follower.queued
    assert follower.withdraw() is True  # queued behind work: its lane may withdraw it
    other = Probe()
    shared.follow(other)
    assert other.queued
    shared.queued = False
    assert shared.invoke() is True
    assert other.invoked and not other.queued
    assert not follower.invoked  # a withdrawn follower is never invoked
    shared.follow(late)
    assert late.invoked  # joined a call already running: waits for it
    shared.unfollow(other)
    assert other.urge is None


def test_a_programs_call_adopts_queued_early_work_but_not_running_work() -> None:
    queued = SharedProbe()
    assert queued.adopt() is True and queued.started and queued.withdrawn
    assert queued.invoke() is False  # the early task never runs the tool
    running = SharedProbe()
    assert running.invoke() is True
    assert running.adopt() is False
