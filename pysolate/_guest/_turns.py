"""A session's turns against one isolated subprocess Guest child.

``start_subprocess_session`` starts the child exactly as ``start_subprocess_guest`` does
(same isolation, same ``init``); ``SubprocessTurns.turn`` then sends ``turn`` frames instead
of the one ``run`` (``_wire``), serving calls with the single run's own call path
(``SubprocessGuest._serve``: grants, plain data, silence while a call is served). Every end
of a turn maps to one status, as for a run (``_process``)::

    turn_done ok / error            → the turn's outcome; the child lives on (alive)
    turn_done limit, done limit     → limit (MemoryLimit, OutputLimit, FrameLimit)
    wall time of the turn           → limit WallTimeLimit
    more calls than allowed         → limit CallLimit (per turn)
    malformed or out-of-turn frame  → protocol_error (a frame sent between turns too)
    any death before turn_done      → crashed, or limit CPUTimeLimit

Any end but ``ok``/``error`` kills and reaps the child: the session cannot go on with
globals it no longer knows (``alive`` is False). Cancellation does the same, then
re-raises. The child's pipes and exit are watched only while a turn runs (between turns it
blocks reading the channel), so nothing runs in the background between turns.

The RLIMITs of the child are per process, hence per session: ``cpu_time`` is the CPU the
whole session may use, ``memory_bytes`` bounds it at every moment (so every turn too).
Output written to fd 1 directly, around ``sys.stdout``, is drained and dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import anyio

from .._guest_api import CallHandler, GuestLimits, GuestOutcome, TurnOutcome
from . import _isolation
from ._frames import (
    INLINE_FRAME_BYTES,
    Done,
    ProtocolViolation,
    ReadyFrame,
    TurnDone,
    parse_guest_frame,
)
from ._process import (
    SubprocessGuest,
    _LimitHit,
    _State,
)
from ._start import start_subprocess_guest
from ._stepped import guest_frame
from .child._wire import HEADER, encode_frame


class SubprocessTurns:
    """Turns of one session in one subprocess Guest child (``SessionGuest``)."""

    def __init__(self, guest: SubprocessGuest) -> None:
        # The child now takes turns, never a ``run``: SubprocessGuest.run refuses from here.
        guest._state = _State.RUNNING
        self._guest = guest
        self._alive = True  # False once the child was stopped (any end but ok/error)

    async def turn(self, source: str, handler: CallHandler, *, wall_time: float) -> TurnOutcome:
        """See ``SessionGuest.turn``. Raises ``RuntimeError`` after the child was stopped;
        an exception other than ``ToolFailure`` from ``handler`` propagates after the child
        is killed."""
        if not self._alive:
            raise RuntimeError("this session's Guest was stopped")
        g = self._guest
        g._ending = None
        g._died_in_call = False
        try:
            async with anyio.create_task_group() as pumps:
                g._output.pump(g._process, pumps, g._overflowed)
                pumps.start_soon(g._watch_exit)
                done, _, host_bug = await g._conversed(
                    functools.partial(self._converse, source, handler), wall_time, "turn"
                )
                pumps.cancel_scope.cancel()
            g._output.stop()
        except BaseException:
            await self.aclose()
            raise
        if host_bug is not None:
            await self.aclose()
            raise host_bug
        if isinstance(done, TurnDone) and done.status in ("ok", "error") and g._ending is None:
            outcome = GuestOutcome(done.status, done.value, done.stdout, done.error, g.isolation)
            return TurnOutcome(outcome, done.known, done.opaque, alive=True)
        await self.aclose()
        if done is not None and g._ending is None:
            g._end(done.status, done.error)
        if g._ending is None:
            g._end(*g._death())
        assert g._ending is not None
        status, error = g._ending
        stdout = done.stdout if isinstance(done, TurnDone) else ""
        return TurnOutcome(
            GuestOutcome(status, None, stdout, error, g.isolation), {}, (), alive=False
        )

    async def _converse(self, source: str, handler: CallHandler) -> TurnDone | Done:
        g = self._guest
        if g._channel.spoke_out_of_turn():
            raise ProtocolViolation("a frame arrived between turns")
        await g._channel.send(
            encode_frame({"t": "turn", "source": source, "output_bytes": g._limits.output_bytes})
        )
        first = g._calls
        while True:
            payload = await g._channel.receive()
            frame = (
                parse_guest_frame(payload)
                if len(payload) <= INLINE_FRAME_BYTES
                else await guest_frame(payload)
            )
            if isinstance(frame, TurnDone | Done):
                return frame
            if isinstance(frame, ReadyFrame):
                raise ProtocolViolation("ready in a turn")
            g._calls += 1
            if g._calls - first > g._limits.max_calls:
                raise _LimitHit("CallLimit", f"the turn made more than {g._limits.max_calls} calls")
            reply = await g._serve(frame, handler)
            if len(reply) - HEADER.size > g._limits.max_frame_bytes:
                raise _LimitHit(
                    "FrameLimit",
                    f"the reply to {frame.capability}.{frame.method} exceeds {g._limits.max_frame_bytes} bytes",
                )
            await g._channel.send(reply)

    async def aclose(self) -> None:
        """Kill and reap the child; idempotent, shielded from cancellation."""
        self._alive = False
        with anyio.CancelScope(shield=True):
            await self._guest.aclose()


async def start_subprocess_session(
    capabilities: Mapping[str, Sequence[str]],
    limits: GuestLimits,
    *,
    isolation: _isolation.IsolationChoice = "strongest",
    fork_server: bool = True,
) -> SubprocessTurns:
    """Start an isolated Guest child for a session (``start_subprocess_guest``'s options,
    errors and cancellation behaviour)."""
    return SubprocessTurns(
        await start_subprocess_guest(
            capabilities, limits, isolation=isolation, fork_server=fork_server
        )
    )
