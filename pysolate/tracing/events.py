"""A run's lifecycle as one typed event stream, for recordings of your own.

Every recording of a run is a listener of this stream: OpenTelemetry spans
(``OTelInstrument``), the demo's live progress, or yours. Subclass ``StreamInstrument``,
return your ``Listener`` from ``listeners`` and pass the instrument as
``Host(instrument=...)``; ``listeners_of`` lets it record beside another instrument.

The order of events, the one promise a listener relies on (the stream keeps it by dropping
a hook that would break it, and logs the drop unless it follows the run's end):

- ``RunStarted`` comes first: ``StreamInstrument.listeners`` receives it, and may decline
  the run (no listener: nothing more is reported). ``RunEnded`` comes last,
  once; nothing follows it (a tool thread that finishes later reports into nothing).
- An observation's ``ObservationStarted`` precedes every event that names it. Then at most
  one ``ObservationCompleted`` and, for early work only (lane not ``"formal"``), at most one
  ``ObservationSettled``, in either order: early work may be claimed while it runs, or
  settle after it finished. A ``cancelled`` settle of running work is its last event.
- ``Claimed`` names an observation already started; its ``ClaimEnded`` follows, at most once.
- Every event is emitted on the Host's event loop, synchronously inside the hook, so a
  listener reads the time of an event as "now" and is never called concurrently.
"""

from ._events import Claimed as Claimed
from ._events import ClaimEnded as ClaimEnded
from ._events import Event as Event
from ._events import Listener as Listener
from ._events import ObservationCompleted as ObservationCompleted
from ._events import ObservationSettled as ObservationSettled
from ._events import ObservationStarted as ObservationStarted
from ._events import RunEnded as RunEnded
from ._events import RunStarted as RunStarted
from ._events import Sealed as Sealed
from ._events import SnapshotAccepted as SnapshotAccepted
from ._stream import EventStream as EventStream
from ._stream import HookListener as HookListener
from ._stream import StreamInstrument as StreamInstrument
from ._stream import listeners_of as listeners_of

__all__ = [
    "ClaimEnded",
    "Claimed",
    "Event",
    "EventStream",
    "HookListener",
    "Listener",
    "ObservationCompleted",
    "ObservationSettled",
    "ObservationStarted",
    "RunEnded",
    "RunStarted",
    "Sealed",
    "SnapshotAccepted",
    "StreamInstrument",
    "listeners_of",
]
