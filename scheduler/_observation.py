"""Physical observations: one real execution of a capability method, and how it ended.

Invariant (docs/glossary.md, "Disposition"): every *early* observation ends in exactly one
``Disposition`` — ``claimed`` if at least one Guest call took its result, otherwise
``cancelled`` (stopped before it completed), ``late`` (it could not be stopped, e.g. a thread,
or it completed after cancellation was requested) or ``orphaned`` (completed in time, never
claimed). Formal observations (made for the Guest's own call) are claimed by that call.
Early work on a speculative layer of a run's branch (``scheduler._branches``) may also end
``discarded``: the layer it ran on was dropped (a formal write did not claim its write, or
the run ended first), so nothing it did or saw can reach the program.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import anyio

from occurrences import CallKey, OccurrenceId


class ObservationState(enum.StrEnum):
    """Where one physical execution is in its lifecycle; ``_MOVES`` lists the legal moves."""

    QUEUED = "queued"
    """Dispatched, waiting for a concurrency slot; nothing has executed yet."""
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    """Stopped before it completed; the tool did not finish."""
    ABANDONED = "abandoned"
    """Cancellation was requested but the work (a thread) could not be interrupted."""


_MOVES: dict[ObservationState, frozenset[ObservationState]] = {
    ObservationState.QUEUED: frozenset({ObservationState.RUNNING, ObservationState.CANCELLED}),
    ObservationState.RUNNING: frozenset(
        {
            ObservationState.SUCCEEDED,
            ObservationState.FAILED,
            ObservationState.CANCELLED,
            ObservationState.ABANDONED,
        }
    ),
    ObservationState.SUCCEEDED: frozenset(),
    ObservationState.FAILED: frozenset(),
    ObservationState.CANCELLED: frozenset(),
    ObservationState.ABANDONED: frozenset(),
}


class IllegalObservationMove(RuntimeError):
    """A bug: an observation was moved along an edge its lifecycle does not have."""


class Disposition(enum.StrEnum):
    """How one early observation ended: exactly one per observation (the invariant above)."""

    CLAIMED = "claimed"
    CANCELLED = "cancelled"
    LATE = "late"
    ORPHANED = "orphaned"
    DISCARDED = "discarded"
    """Ran on a speculative branch layer that was dropped (``scheduler._branches``)."""


_INVOKING = threading.Lock()
"""Orders a probe's ``invoke`` (a worker thread, or the loop) against its ``withdraw`` (the
loop): exactly one of them wins. One lock for every probe: each holds it for two stores."""


class Probe:
    """Shared between the lane and the code that executes a call.

    ``invoke`` is called at the moment the tool itself is about to run (an async method
    just before it is called; a sync one in its worker thread, once it has a thread), and
    ``withdraw`` by the lane when the Guest's own call arrives first: exactly one of them
    succeeds, so a withdrawn call never invokes its tool, and a call whose tool was invoked
    is never withdrawn (its result is waited for, contract 7). The executor sets
    ``in_thread`` before it hands the call to a worker thread and ``thread_done`` when that
    thread returns, so the lane can tell a cancelled call (never finished) from an abandoned
    thread that runs on (``late``). Plain attributes written from the worker thread: a bool
    store is atomic under the GIL and the lane only reads them.
    """

    __slots__ = (
        "in_thread",
        "invoked",
        "queued",
        "thread_done",
        "urge",
        "urged",
        "withdrawn",
        "yield_slot",
    )

    def __init__(self) -> None:
        self.in_thread = False
        self.thread_done = False
        self.invoked = False
        self.withdrawn = False
        self.queued = False  # waits behind other work for a slot (of the lane, or a thread's)
        # Set by an executor that holds the call back on purpose (a batch still taking
        # members): a claim calls it instead of withdrawing the call, so the call is made at
        # once; ``urged`` then tells the executor to wait for nothing (no slot, no thread:
        # run now, or stop with ``LaneStopped`` and the Guest's call runs).
        self.urge: Callable[[], None] | None = None
        self.urged = False
        # Set by the lane: gives the call's slot back before it ends, for work that makes no
        # physical call of its own (a member joining another's batch).
        self.yield_slot: Callable[[], None] | None = None

    def invoke(self) -> bool:
        """The tool is about to run: True, unless the call was withdrawn (then it must not)."""
        with _INVOKING:
            if self.withdrawn:
                return False
            self.invoked = True
            return True

    def withdraw(self) -> bool:
        """Stop the call before its tool runs: True, unless the tool was already invoked."""
        with _INVOKING:
            if self.invoked:
                return False
            self.withdrawn = True
            return True


class LaneStopped(Exception):
    """Early work ended by the lane's own limits, not by the tool: its run exceeded the
    call timeout while other work may have shared what it waited on (a lock inside the tool,
    a connection, the machine), or it could not be given a thread. Never a settled outcome:
    no Guest call claims it; the Guest's own call runs instead (contract 7)."""


@dataclass(slots=True, eq=False)
class Observation:
    """One physical execution (or its placeholder while queued)."""

    id: int
    key: CallKey
    lane: Literal["speculative", "formal"]
    node_ids: list[OccurrenceId] = field(
        default_factory=list
    )  # occurrences it serves (speculative)
    state: ObservationState = ObservationState.QUEUED
    value: object = None
    error: BaseException | None = None  # the tool's exception, re-raised per claim
    started: float | None = None  # when it got a slot of the lane (None while queued)
    finished: float | None = None
    claims: int = 0
    cancel_requested: bool = False
    # Set on early work on a speculative branch layer: the layer's version it ran on (a
    # write: the version it made). None for work on a root or the run's own view.
    layer: int | None = None
    discarded: bool = False  # its layer was dropped: never claimed from then on
    probe: Probe = field(default_factory=Probe)
    done: anyio.Event = field(default_factory=anyio.Event)
    # Early work runs in its own scope, so the lane can stop one call (withdrawn before its
    # tool ran, its layer dropped) without touching the others. None for formal work.
    scope: anyio.CancelScope | None = None
    # The id of another run whose physical call served this one (the Host's observation
    # table, ``scheduler._shared``): then it is no physical call of this run's. None: its own.
    shared_from: str | None = None

    def move(self, new: ObservationState) -> None:
        if new not in _MOVES[self.state]:
            raise IllegalObservationMove(f"observation {self.id}: {self.state} -> {new}")
        self.state = new

    @property
    def physical(self) -> bool:
        """True once the tool was actually invoked (``Probe.invoke``) for this observation
        itself, not by another run whose call served it (``shared_from``)."""
        return self.probe.invoked and self.shared_from is None

    @property
    def settled(self) -> bool:
        return self.state in (ObservationState.SUCCEEDED, ObservationState.FAILED)

    def disposition(self) -> Disposition:
        """How this early observation ended; meaningful once the lane is closed."""
        if self.claims:
            return Disposition.CLAIMED
        if self.discarded:
            return Disposition.DISCARDED
        if self.state is ObservationState.ABANDONED:
            return Disposition.LATE
        if self.state is ObservationState.CANCELLED or self.state is ObservationState.QUEUED:
            return Disposition.CANCELLED
        if self.state is ObservationState.RUNNING:
            # Only possible if the lane is inspected before close(): nothing stopped it yet.
            return Disposition.CANCELLED
        return Disposition.LATE if self.cancel_requested else Disposition.ORPHANED
