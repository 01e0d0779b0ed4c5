"""A run fed from a streamed tool call, sealed only when the framework runs that call.

A framework streams a ``run_code`` call's JSON arguments long before it executes the tool
(and it may never execute it: an approval, a guardrail, a different call in the end). So
the integration starts ``host.run_stream`` on the argument deltas at once — the prefix
parser, early reads and the Guest's start-up overlap the model — but holds the stream
open (``until_confirmed``) until the tool is executed with its final ``code``, and seals
only if the streamed arguments decode to exactly that code. Anything else supersedes it:
the run is ``aborted`` unsealed, nothing of it ran in a Guest, and the code runs whole.

Lifecycle (``done`` is set exactly once, when the run's task ends): fed → confirmed or
superseded → done. Both ends of the queue are closed when it ends, so nothing outlives it.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._report._result import RunResult
from ._common import CONFIRM, SUPERSEDE, until_confirmed


@dataclass(slots=True, eq=False)
class GatedRun:
    """One streamed tool call's run, waiting for the framework to execute the call."""

    call_id: str | None
    send: MemoryObjectSendStream[str | bool]
    receive: MemoryObjectReceiveStream[str | bool]
    fed: list[str] = field(default_factory=list)  # argument JSON text sent, in order
    broken: bool = False  # arguments arrived that are not JSON text: never sealed
    ended: bool = False  # CONFIRM or SUPERSEDE was sent: the queue takes nothing more
    done: anyio.Event = field(default_factory=anyio.Event)
    result: RunResult | None = None
    error: Exception | None = None

    @classmethod
    def open(cls, call_id: str | None) -> GatedRun:
        """A gated run's record (inside the event loop); its task runs ``chunks()``."""
        send, receive = anyio.create_memory_object_stream[str | bool](math.inf)
        return cls(call_id, send, receive)

    def chunks(self) -> AsyncIterator[str]:
        """The argument text for ``run_stream``, ending only on confirmation."""
        return until_confirmed(self.receive)

    def feed(self, text: str) -> None:
        """Forward argument JSON text (ignored once the run is decided)."""
        if not self.decided and not self.broken:
            self.fed.append(text)
            self.send.send_nowait(text)

    @property
    def decided(self) -> bool:
        """Confirmed, superseded or ended: nothing more is fed."""
        return self.ended or self.done.is_set()

    def carries(self, argument: str, code: str) -> bool:
        """Whether the streamed arguments are exactly a call with ``code``."""
        if self.broken:
            return False
        try:
            arguments = json.loads("".join(self.fed))
        except ValueError:
            return False
        return (
            isinstance(arguments, dict)
            and type(arguments.get(argument)) is str
            and arguments[argument] == code
        )

    def confirm(self) -> None:
        """Seal what was fed (the caller checked ``carries``)."""
        self._last(CONFIRM)

    def drop(self) -> None:
        """Abort the run unsealed (its task ends on its own)."""
        self._last(SUPERSEDE)

    async def supersede(self) -> None:
        """Abort the run unsealed and wait until its early work is stopped."""
        self.drop()
        await self.done.wait()

    async def outcome(self) -> RunResult:
        """The run's result once it ended; what the run raised is raised here."""
        await self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def finish(self, result: RunResult | None, error: Exception | None) -> None:
        """Called once by the run's task as it ends (also when it was cancelled)."""
        self.result, self.error = result, error
        self.send.close()
        self.receive.close()
        self.done.set()

    def _last(self, item: bool) -> None:
        if not self.decided:
            self.ended = True
            self.send.send_nowait(item)
            self.send.close()
