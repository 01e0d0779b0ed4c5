"""Extension points: what a custom Guest or Guest factory implements, in one namespace.

Most users never need these: ``Host()`` starts the isolated subprocess Guest itself. A Host
that runs its Guests elsewhere takes a factory instead — ``Host(guest_factory=...)`` for
runs, ``Host(session_factory=...)`` for sessions — and a factory is any async callable
with the signature of ``GuestFactory`` (or ``SessionGuestFactory``) returning an object
with the methods of ``Guest`` (or ``SessionGuest``). The Guest executes the sealed source
and sends each capability call to the ``CallHandler`` it is given (the Host's broker); it
reports how the run ended as a ``GuestOutcome``. The factories that come with Pysolate:

- ``start_subprocess_guest``, ``start_subprocess_session``: the default, an isolated child
  interpreter at the Host's isolation level (docs/isolation.md);
- ``pysolate.testing.in_process_guest`` / ``in_process_session``: the program runs in the
  Host's own process, no isolation (tests and replays only);
- ``pysolate.ray.RayGuestFactory``: Guests on the nodes of a Ray cluster (docs/scale-out.md).

The tracing back end is the other extension point: ``Host(instrument=...)`` takes any
``pysolate.tracing.Instrument``.

A factory that cannot start a Guest raises ``GuestStartError``. Between a Guest and the
broker two exceptions are signals, never raised to the code that embeds the Host: the
handler raises ``ToolFailure`` for a call that failed (the Guest raises it in the program at
the call) and ``LimitExceeded`` for a limit the run passed (the Guest ends the run with
status ``limit``).
"""

from ._guest import GuestStartError, start_subprocess_guest, start_subprocess_session
from ._guest_api import (
    CallHandler,
    ErrorInfo,
    Guest,
    GuestFactory,
    GuestLimits,
    GuestOutcome,
    GuestStatus,
    Isolation,
    LimitExceeded,
    SessionGuest,
    SessionGuestFactory,
    ToolFailure,
    TurnOutcome,
)

__all__ = [
    "CallHandler",
    "ErrorInfo",
    "Guest",
    "GuestFactory",
    "GuestLimits",
    "GuestOutcome",
    "GuestStartError",
    "GuestStatus",
    "Isolation",
    "LimitExceeded",
    "SessionGuest",
    "SessionGuestFactory",
    "ToolFailure",
    "TurnOutcome",
    "start_subprocess_guest",
    "start_subprocess_session",
]
