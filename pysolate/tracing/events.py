"""A run's lifecycle as one typed event stream, for recordings of your own.

Every recording of a run is a listener of this stream: OpenTelemetry spans
(``OTelInstrument``), the demo's live progress, the run's own timeline
(``RunResult.timeline``) and observation records (``RunResult.observations``), or yours.
Subclass ``StreamInstrument``, return your ``Listener`` from ``listeners`` and pass the
instrument as ``Host(instrument=...)``; ``listeners_of`` lets it record beside another
instrument. A listener that reads only the run's record (not each call as it happens) sets
``follows_calls = False``; a run no listener follows makes no event per call.

The order of events, the one promise a listener relies on (the stream keeps it by dropping
a hook that would break it, and logs the drop unless it follows the run's end):

- ``RunStarted`` comes first: ``StreamInstrument.listeners`` receives it, and may decline
  the run (no listener: nothing more is reported). ``RunEnded`` comes last,
  once; nothing follows it (a tool thread that finishes later reports into nothing).
- The program: ``SnapshotAccepted`` each time the accepted prefix grows; once the text was
  read to its end, ``TokensArrived``; then, if it seals, ``Sealed``, and if the Guest is
  given it, ``GuestStarted`` and, when the Guest returned, ``GuestEnded``. A run that
  fails before (cut, rejected) lacks the later ones.
- An observation's ``ObservationStarted`` precedes every event that names it. Then at most
  one ``ObservationCompleted`` and, for early work only (lane not ``"formal"``), at most one
  ``ObservationSettled``, in either order: early work may be claimed while it runs, or
  settle after it finished. A ``cancelled`` settle of running work is its last event.
- ``Claimed`` names an observation already started; its ``ClaimEnded`` follows, at most once.
- The events of a call (``ObservationStarted`` to ``ClaimEnded``) reach only listeners that
  follow calls.
- The run's record comes just before ``RunEnded``, after every other event: one
  ``ObservationRecorded`` for each observation of the run's lane (early and formal, in the
  lane's order, every disposition final), then one ``CallsRecorded`` with the receipts. A
  run interrupted by its caller (or a Host bug) has no record: ``RunEnded`` (``aborted``)
  follows its last other event.
- Every event is emitted on the Host's event loop, synchronously inside the hook, so a
  listener reads the time of an event as "now" and is never called concurrently. Times the
  run measured itself travel in the events (``at``, ``first``/``last``, the records' and
  receipts' ``started``/``ended``: seconds since the run started), so a listener given the
  events again later draws the same timeline.
"""

from ._events import CallsRecorded as CallsRecorded
from ._events import Claimed as Claimed
from ._events import ClaimEnded as ClaimEnded
from ._events import Event as Event
from ._events import GuestEnded as GuestEnded
from ._events import GuestStarted as GuestStarted
from ._events import Listener as Listener
from ._events import ObservationCompleted as ObservationCompleted
from ._events import ObservationRecorded as ObservationRecorded
from ._events import ObservationSettled as ObservationSettled
from ._events import ObservationStarted as ObservationStarted
from ._events import RecordedCall as RecordedCall
from ._events import RunEnded as RunEnded
from ._events import RunStarted as RunStarted
from ._events import Sealed as Sealed
from ._events import SnapshotAccepted as SnapshotAccepted
from ._events import TokensArrived as TokensArrived
from ._stream import EventStream as EventStream
from ._stream import HookListener as HookListener
from ._stream import StreamInstrument as StreamInstrument
from ._stream import listeners_of as listeners_of
from ._stream import stream_of as stream_of

__all__ = [
    "CallsRecorded",
    "ClaimEnded",
    "Claimed",
    "Event",
    "EventStream",
    "GuestEnded",
    "GuestStarted",
    "HookListener",
    "Listener",
    "ObservationCompleted",
    "ObservationRecorded",
    "ObservationSettled",
    "ObservationStarted",
    "RecordedCall",
    "RunEnded",
    "RunStarted",
    "Sealed",
    "SnapshotAccepted",
    "StreamInstrument",
    "TokensArrived",
    "listeners_of",
    "stream_of",
]
