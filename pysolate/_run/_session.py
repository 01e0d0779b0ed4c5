"""Sessions: one Guest kept across an agent's turns, the contract extended turn by turn.

``async with host.session() as session:`` then ``await session.run_stream(...)`` or
``await session.run_source(...)``, turn after turn. Each turn is sealed and run like a
single run (``_run.Run``), in the globals the earlier turns left. The contract
(docs/contract.md, "Sessions"): turn N's result equals turn N of a fresh session whose
turns 1..N all ran with ``run_source(..., speculate=False)``. What each end of a turn does
to the session:

    ok, error (the program raised)   kept: globals, workspace writes (a REPL keeps what
                                     ran before the exception)
    rejected, aborted before seal    nothing changed (the Guest never saw the source);
                                     its settled early reads may serve the next turn
    aborted after the Guest got it   BROKEN: the Guest was stopped mid-turn (a limit, a
      (limit, crash, protocol error,  crash...); its workspace layer is dropped, every
      the caller cancelling)          later turn raises ``SessionBroken``
    idle/session time limit passed   BROKEN (``SessionExpired``): the Guest was stopped

Why broken rather than "nothing changed": a Guest stopped mid-turn leaves globals nobody
knows (half a loop ran), and replaying turns 1..N-1 to rebuild them would repeat their
writes behind the caller's back (contract 6). So the session says so, typed, and the
workspace branch keeps exactly the turns that completed (each turn writes on a layer of the
session's branch, adopted only when the turn keeps its effects).

Speculation across turns: discovery in turn N starts from the plain-data globals the Guest
reported after turn N-1 (``occurrences.PriorGlobals``), and a rejected turn's settled early
results are reused by the next turn's early calls with the same exact key (the model's
retry after a syntax error), as long as no turn ran in the Guest in between. On a Host that
shares work (``Host(share=...)``), the shared calls a rejected turn's early work still waits on
run on for the next turn (``RunSharing.hold``), whose calls of the same keys wait on them
instead of calling again; the hold ends when that turn ends. Later turns also find the
earlier turns' settled ``pure`` results in the Host's table, and their ``immutable_read``
ones while the view is the root's (a path the session wrote has a view of its own). None
of it needs trust in the Guest's report: only ``pure``/``immutable_read`` calls start early
or share, and every claim is exact by key.

Prior art: the REPL (a failing statement keeps what ran before it); smolagents and
Pydantic AI code mode, whose executors keep program state between an agent's steps.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Self, cast

import anyio
from anyio.abc import TaskGroup

from occurrences import CallKey, PriorGlobals
from scheduler import LanePolicy, Observation, ObservationState, SpeculativeLane

from .._calls._registry import new_run_id
from .._calls._sharing import RunSharing, release
from .._exceptions import SessionBroken, SessionBusy, SessionClosed, SessionExpired
from .._guest_api import (
    CallHandler,
    ErrorInfo,
    GuestLimits,
    GuestOutcome,
    Isolation,
    SessionGuest,
    SessionGuestFactory,
)
from .._report._result import RunResult, RunStatus
from .._workspace._workspace import Workspace
from ..streams import DEFAULT_DEADLINE, DEFAULT_IDLE_TIMEOUT, Code, CodeReader
from ..tracing import session_turn
from ._run import HostRuns, Run
from ._session_state import SessionLimits, SessionState, SessionStatistics, advance
from ._setup_warnings import noted

if TYPE_CHECKING:
    from scheduler import ObservationTable, SharedCall

    from .._guest._isolation import IsolationChoice

MAX_CARRIED = 256
"""Early results of rejected turns kept for the next turn (the oldest go first)."""


class _Turn:
    """One turn's Guest side (``_guest_start.RunGuest``: the session's Guest, which the
    session starts and stops) and what the turn did to the session."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.prior: PriorGlobals | None = session.prior
        # The turn writes into layers of the session's branches (Workspace.layer).
        self.targets: dict[str, object] = {
            name: b.layer() if isinstance(b, Workspace) else b
            for name, b in session._branches.items()
        }
        self.entered = False  # the Guest was handed the program: the session changed
        self.alive = True  # the Guest can take another turn
        self.known: Mapping[str, object] = {}
        self.opaque: tuple[str, ...] = ()
        self.lane: SpeculativeLane | None = None
        self.reused = 0
        self.kept = False  # it holds shared calls for the next turn (``keep``)

    async def start(self) -> None:
        """The session started its Guest when it opened."""

    async def ready(self) -> None:
        """The session's Guest is waited for in ``run`` (a start failure aborts the turn)."""

    async def aclose(self) -> None:
        """The session's Guest outlives the turn."""

    async def run(self, program: str, handler: CallHandler) -> GuestOutcome:
        session = self._session
        self.entered = True
        guest = await session._take_guest()
        if guest is None:
            self.alive = False
            error = session._guest_error
            info = ErrorInfo(
                type(error).__name__, f"the session's Guest did not start: {error}", None
            )
            return GuestOutcome("crashed", error=info, isolation=Isolation("process"))
        wall = min(session._guest_limits.wall_time, session._remaining())
        turn = await guest.turn(program, handler, wall_time=max(wall, 0.0))
        self.alive = turn.alive
        self.known, self.opaque = turn.known, turn.opaque
        return turn.outcome

    def carried(self, key: CallKey) -> Observation | None:
        """A settled early observation of an earlier rejected turn with this exact key,
        reused instead of a new physical call (nothing ran in the Guest since it was made)."""
        obs = self._session._carried.get(key)
        if obs is not None:
            self.reused += 1
        return obs

    def keep(self, sharing: RunSharing) -> None:
        """The turn ends before its Guest got a program: the shared calls its early work
        waits on (``RunSharing.hold``) are the session's to keep for the next turn."""
        session = self._session
        release(session._held)  # (what an earlier turn kept served this one already)
        session._held = sharing.hold()
        self.kept = True


class Session:
    """Turns of an agent against one Guest that keeps its globals (see the module docstring).

    Use as ``async with host.session() as session:``; leaving the block stops the Guest.
    The workspace branches (``workspaces``) stay open for the caller to commit or discard.
    Turns are sequential: starting one while another runs raises ``SessionBusy``.
    """

    def __init__(
        self,
        host: HostRuns,
        factory: SessionGuestFactory,
        limits: SessionLimits,
        guest_limits: GuestLimits,
    ) -> None:
        self._host = host
        self._factory = factory
        self.id = uuid.uuid4().hex[:16]
        """This session's id: every turn's run span carries it (``pysolate.session_id``)."""
        self.limits = limits
        self._guest_limits = guest_limits
        self._state = SessionState.NEW
        self._tg: TaskGroup | None = None
        self._guest: SessionGuest | None = None
        self._guest_error: BaseException | None = None  # the start failed
        self._guest_ready = anyio.Event()
        self._idle: anyio.CancelScope | None = None  # the idle timer armed since the last turn
        self._opened = 0.0
        # Session-owned objects formal calls run against (a workspace branch per Workspace).
        self._branches: dict[str, object] = {}
        self._carried: dict[CallKey, Observation] = {}  # settled early results of rejected turns
        # Shared calls a rejected turn's early work waited on, kept running for the next turn.
        self._held: list[tuple[ObservationTable, SharedCall]] = []
        self._broken: SessionBroken | None = None
        self.prior = PriorGlobals()
        """The globals the last executed turn left, as its Guest reported them."""
        self._turns = self._executed = self._rejected = self._reused = 0

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        self._state = advance(self._state, SessionState.IDLE)
        self._opened = anyio.current_time()
        for name, registration in self._host.registry.registrations.items():
            if registration.run_scoped:
                self._branches[name] = registration.obj.for_run()  # type: ignore[attr-defined]
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._start_guest)
        self._arm_idle()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Stop the Guest (shielded) and end the session; the branches stay open."""
        assert self._tg is not None
        self._state = advance(self._state, SessionState.CLOSED)
        self._carried.clear()
        release(self._held)
        with anyio.CancelScope(shield=True):
            await self._stop_guest()
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def _start_guest(self) -> None:
        try:
            self._guest = await self._factory(
                self._host.registry.capabilities(), self._guest_limits
            )
        except Exception as exc:  # reported to the first turn that needs the Guest
            self._guest_error = exc
        finally:
            self._guest_ready.set()

    async def _take_guest(self) -> SessionGuest | None:
        """The started Guest, or None if it could not start (``_guest_error`` says why)."""
        await self._guest_ready.wait()
        return self._guest

    async def _stop_guest(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        if self._guest is not None:
            await self._guest.aclose()

    def _remaining(self) -> float:
        return self._opened + self.limits.wall_time - anyio.current_time()

    def _arm_idle(self) -> None:
        assert self._tg is not None
        scope = self._idle = anyio.CancelScope()

        async def expire() -> None:
            with scope:
                idle = self.limits.idle_time <= self._remaining()
                await anyio.sleep(max(0.0, min(self.limits.idle_time, self._remaining())))
                if self._state is SessionState.IDLE:
                    why = (
                        f"idle for {self.limits.idle_time}s"
                        if idle
                        else f"open for {self.limits.wall_time}s"
                    )
                    self._break(SessionExpired(f"the session's Guest was stopped: {why}"))
                    with anyio.CancelScope(shield=True):
                        await self._stop_guest()

        self._tg.start_soon(expire)

    def _break(self, error: SessionBroken) -> None:
        self._broken = error
        self._carried.clear()
        release(self._held)
        self._state = advance(self._state, SessionState.BROKEN)

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def workspaces(self) -> dict[str, Workspace]:
        """The session's workspace branches: the writes of every turn that kept its effects."""
        return {name: b for name, b in self._branches.items() if isinstance(b, Workspace)}

    def statistics(self) -> SessionStatistics:
        return SessionStatistics(
            self._turns, self._executed, self._rejected, self._reused, self._state
        )

    # -- turns ---------------------------------------------------------------------------------

    async def run_stream(
        self,
        chunks: AsyncIterable[object] | Iterable[object],
        *,
        code: Code | None = None,
        speculate: bool = True,
        policy: LanePolicy | None = None,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        deadline: float | None = DEFAULT_DEADLINE,
    ) -> RunResult:
        """Run the next turn from a model's stream (``Host.run_stream``'s streams, code
        formats, timeouts, misuse errors and result).

        Raises ``SessionBroken`` (``SessionExpired``) when the session's Guest was stopped,
        ``SessionBusy`` while another turn runs, ``SessionClosed`` outside ``async with``.
        A Guest that could not start makes the turn ``aborted`` (and the session broken).
        Cancellation stops the stream's early work; if the Guest had the program it is
        stopped too and the session is broken.
        """
        reader = CodeReader(chunks, code, idle_timeout=idle_timeout, deadline=deadline)
        turn = self._begin()
        notes = self._host.setup_warnings() if speculate else ()
        try:
            with session_turn(self.id, self._turns):
                result = await self._run(turn, reader, speculate, policy)
        except BaseException as exc:
            self._fail(turn, exc)
            raise
        return self._end(turn, noted(result, notes) if notes else result)

    async def run_source(
        self,
        source: str,
        *,
        speculate: bool = True,
        policy: LanePolicy | None = None,
    ) -> RunResult:
        """Run ``source`` as the next turn. ``speculate=False`` is the sequential reference:
        a fresh session whose turns all ran so is what every session is compared with.

        A source that does not compile is ``rejected`` and changes nothing. Errors and
        cancellation as ``run_stream``. Speculating, the source is a one-chunk stream (so a
        rejected turn's settled early reads serve the retry, as a streamed turn's do).
        """
        if speculate:
            return await self.run_stream(_once(source), policy=policy)
        turn = self._begin()
        try:
            with session_turn(self.id, self._turns):
                result = await self._run(turn, source, False, policy)
        except BaseException as exc:
            self._fail(turn, exc)
            raise
        return self._end(turn, result)

    async def _run(
        self, turn: _Turn, program: CodeReader | str, speculate: bool, policy: LanePolicy | None
    ) -> RunResult:
        """The turn's run: the Host's one path (``_run.Run``), with the session's Guest, its
        workspace layers, the globals earlier turns left and their carried early results."""
        host = self._host
        run_id = new_run_id()
        run = Run(
            host,
            turn,
            run_id=run_id,
            trace=host.trace_run(run_id),
            speculate=speculate,
            policy=policy,
            limits=self._guest_limits,
            targets=turn.targets,
            prior=turn.prior,
            carried=turn.carried,
            hold=turn.keep,
        )
        result = await run.execute(program)
        turn.lane = run.lane
        return result

    def _begin(self) -> _Turn:
        if self._state is SessionState.RUNNING:
            raise SessionBusy("another turn of this session is running")
        if self._state is SessionState.BROKEN:
            assert self._broken is not None
            raise type(self._broken)(str(self._broken), self._broken.reason)
        if self._state is not SessionState.IDLE:
            raise SessionClosed(
                f"the session is {self._state.value}; turns run inside `async with host.session()`"
            )
        if self._remaining() <= 0:
            expired = SessionExpired(
                f"the session's Guest was stopped: open for {self.limits.wall_time}s"
            )
            self._break(expired)
            raise expired
        if self._idle is not None:
            self._idle.cancel()
        self._state = advance(self._state, SessionState.RUNNING)
        self._turns += 1
        return _Turn(self)

    def _fail(self, turn: _Turn, exc: BaseException) -> None:
        """The turn raised (cancellation, a Host bug, the Guest's start failure)."""
        if not turn.kept:
            release(self._held)
        if self._state is not SessionState.RUNNING:
            return  # closed meanwhile
        if turn.entered:
            self._break(
                SessionBroken(
                    f"turn {self._turns} was stopped after its Guest got the program: {exc!r}", exc
                )
            )
            return
        self._state = advance(self._state, SessionState.IDLE)
        self._arm_idle()

    def _end(self, turn: _Turn, result: RunResult) -> RunResult:
        self._reused += turn.reused
        if not turn.kept:
            release(self._held)  # the shared calls a rejected turn kept have served this one
        if turn.entered:
            self._executed += 1
            self._carried.clear()  # the Guest ran: state may have moved on
            if turn.alive:
                self._branches.update(turn.targets)
                self.prior = PriorGlobals(dict(turn.known), frozenset(turn.opaque))
            else:
                reason = result.error
                self._break(SessionBroken(_broken_message(self._turns, reason), reason))
        else:
            self._rejected += result.status is RunStatus.REJECTED
            if turn.lane is not None:
                self._carry(turn.lane)
        if self._state is SessionState.RUNNING:
            self._state = advance(self._state, SessionState.IDLE)
            self._arm_idle()
        return replace(result, workspaces=self.workspaces)

    def _carry(self, lane: SpeculativeLane) -> None:
        """Keep the settled, successful early results of a turn that never reached the Guest
        (a failure is not kept: the next turn calls again, as a sequential run would)."""
        for obs in lane.observations():
            # Work on a branch layer is of that turn's lineage only (``scheduler._branches``).
            if (
                obs.lane == "speculative"
                and obs.layer is None
                and obs.state is ObservationState.SUCCEEDED
            ):
                self._carried.pop(obs.key, None)
                self._carried[obs.key] = obs
        while len(self._carried) > MAX_CARRIED:
            del self._carried[next(iter(self._carried))]


def _broken_message(turn: int, reason: ErrorInfo | None) -> str:
    what = f"{reason.type}: {reason.message}" if reason is not None else "the Guest stopped"
    return f"turn {turn} was aborted after its Guest got the program ({what}); the session's globals are gone"


async def _once(source: str) -> AsyncIterator[str]:
    yield source


def default_session_factory(
    isolation: IsolationChoice = "strongest", fork_server: bool = True
) -> SessionGuestFactory:
    """The isolated subprocess Guest, kept across turns, at the Host's ``isolation`` level
    (forked from the fork server where that keeps the level whole, unless ``fork_server``
    is off)."""
    from .._guest import start_subprocess_session  # type: ignore[import-not-found,attr-defined,unused-ignore]

    return cast(
        SessionGuestFactory,
        functools.partial(start_subprocess_session, isolation=isolation, fork_server=fork_server),
    )
