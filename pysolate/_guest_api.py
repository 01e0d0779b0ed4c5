"""The seam between the Host and whatever executes the sealed source.

The Host (``_host.py``) talks to a Guest only through these types, so the isolated
subprocess Guest (``_guest/``) and the in-process Guest for fast tests
(``pysolate.testing``) are interchangeable. Only plain data crosses (``occurrences.plain``).

Lifecycle of one Guest: ``start`` (may happen while tokens still stream) → ``run(source,
handler)`` exactly once → ``aclose``. A session's Guest (``SessionGuest``) instead takes
``turn(source, handler)`` any number of times, in one set of globals, until ``aclose``. The Guest calls ``handler(capability, method, args,
kwargs)`` for every capability call the program makes, in program order, one at a time.
The handler returns a plain result, or raises ``ToolFailure`` to make the call raise inside
the program at that point, or ``LimitExceeded`` to end the run with status ``limit`` (every
Guest stops the program then, whatever it catches).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

CallHandler = Callable[[str, str, tuple[object, ...], dict[str, object]], Awaitable[object]]
"""``await handler(capability, method, args, kwargs)`` → plain result, or raises ToolFailure."""


class ToolFailure(Exception):
    """A capability call failed; the Guest raises it inside the program at the call.

    ``type_name`` names the exception class the program sees: a builtin exception class of
    that name when one exists (so ``except FileNotFoundError`` works), otherwise
    ``pysolate.ToolError`` carrying the name. ``args`` are plain data.
    """

    def __init__(self, type_name: str, message: str, args: tuple[object, ...] = ()) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message
        self.exc_args = args or (message,)


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """An exception as the program saw it: class name, ``str(exc)``, line in the agent source."""

    type: str
    message: str
    line: int | None


class LimitExceeded(Exception):
    """A limit of the run was passed: the Guest stops the program and the run ends with
    status ``limit`` (``aborted``), ``info`` naming the limit. Raised by the Guest runners
    themselves (calls, frames) and by the handler (the Host's byte budget)."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.info = ErrorInfo(type_name, message, None)


@dataclass(frozen=True, slots=True)
class GuestLimits:
    """Resource limits of one Guest run; exceeding one ends the run with a clear error."""

    wall_time: float = 30.0
    """Seconds from ``run`` to the end of the program, tool time included."""
    cpu_time: float = 10.0
    """Seconds of CPU the Guest process may use."""
    memory_bytes: int = 512 * 1024 * 1024
    """Address-space bound of the Guest process."""
    output_bytes: int = 1024 * 1024
    """Bytes of stdout the program may print."""
    max_calls: int = 10_000
    """Capability calls one run may make."""
    max_frame_bytes: int = 8 * 1024 * 1024
    """Largest broker frame in either direction."""
    max_processes: int = 64
    """Threads (and, at the ``rlimits`` level, processes) the Guest may hold at once."""
    max_open_files: int = 64
    """File descriptors the Guest may hold at once (``RLIMIT_NOFILE``): what bounds the
    kernel memory its pipes (and, at ``rlimits``, sockets) pin, which ``memory_bytes``
    does not count where no cgroup memory controller does (docs/isolation.md)."""
    max_host_bytes: int = 32 * 1024 * 1024
    """Bytes the Host may hold for one run, or for a session's turn and the branch its earlier
    turns left: the receipts' arguments and results (those past ``RECEIPT_INLINE_BYTES``
    held as a digest) and keys, and the workspace branch's content. Past it the call fails,
    the run ends ``aborted`` (``HostBytesLimit``) and nothing is committed. The default
    keeps 500 concurrent runs within 16 GiB, leaving a third of a 24 GiB machine for what
    a call holds while it is served (at most two frames of ``max_frame_bytes``, bounded
    items: docs/tools.md, "Bounds")."""


@dataclass(frozen=True, slots=True)
class Isolation:
    """Which isolation was in force for a run (``level`` is the strongest that applied)."""

    level: Literal["in_process", "process", "rlimits", "seccomp", "landlock", "namespaces"]
    mechanisms: tuple[str, ...] = ()


GuestStatus = Literal["ok", "error", "limit", "crashed", "protocol_error"]
"""How a Guest's run ended: the program finished (``ok``) or raised (``error``), a limit
stopped it, the process died, or it broke the protocol."""


@dataclass(frozen=True, slots=True)
class GuestOutcome:
    """What one Guest run produced.

    ``status``: ``ok`` (program finished), ``error`` (program raised; ``error`` set),
    ``limit`` (a limit ended it; ``error.type`` names the limit), ``crashed`` (the process
    died), ``protocol_error`` (the Guest broke the broker protocol).
    """

    status: GuestStatus
    value: object = None
    stdout: str = ""
    error: ErrorInfo | None = None
    isolation: Isolation = field(default_factory=lambda: Isolation("process"))


class Guest(Protocol):
    """One Guest interpreter, started ahead of its source."""

    async def run(self, source: str, handler: CallHandler) -> GuestOutcome:
        """Execute the sealed ``source`` once. Cancellation kills the Guest and re-raises."""
        ...

    async def aclose(self) -> None:
        """Stop the Guest and release its resources; idempotent."""
        ...


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What one turn of a session produced, and what its Guest kept.

    ``known``: the plain-data globals the turn left (name → value), ``opaque``: the names
    of the other globals (``_guest._turn_report``); both are the Guest's word, good only for
    speculation. ``alive``: whether the Guest can take another turn (False after any end
    but ``ok`` or ``error``: the Guest was stopped and its globals are gone).
    """

    outcome: GuestOutcome
    known: Mapping[str, object]
    opaque: tuple[str, ...]
    alive: bool


class SessionGuest(Protocol):
    """One Guest interpreter kept across the turns of a session."""

    async def turn(self, source: str, handler: CallHandler, *, wall_time: float) -> TurnOutcome:
        """Execute the sealed ``source`` in the globals earlier turns left.

        ``wall_time`` bounds this turn (tool time included); passing it stops the Guest.
        Cancellation stops the Guest and re-raises.
        """
        ...

    async def aclose(self) -> None:
        """Stop the Guest and release its resources; idempotent."""
        ...


class SessionGuestFactory(Protocol):
    """Starts the Guests of sessions (``Host(session_factory=...)``): any async callable of
    this signature, e.g. ``start_subprocess_session`` or ``pysolate.testing.in_process_session``."""

    async def __call__(
        self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits
    ) -> SessionGuest:
        """Start a Guest for a session that will expose ``capabilities``."""
        ...


class GuestFactory(Protocol):
    """Starts the Guest of one run (``Host(guest_factory=...)``): any async callable of this
    signature, e.g. ``start_subprocess_guest`` (the default), ``pysolate.testing.in_process_guest``
    or ``pysolate.ray.RayGuestFactory``. It is called before the source is sealed, so the
    Guest's start overlaps the stream."""

    async def __call__(
        self, capabilities: Mapping[str, Sequence[str]], limits: GuestLimits
    ) -> Guest:
        """Start a Guest that will expose ``capabilities`` (name → method names)."""
        ...
