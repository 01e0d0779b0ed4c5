"""Live progress of a run, for people watching a terminal (``pysolate demo``).

A demo that sits silent while the model streams hides the very thing it is there to show:
calls starting before the code is complete, and claims the moment it is. The Host already
reports every such event to its instrument, so progress is a listener of the run's event
stream (``pysolate.tracing.events``), beside the listeners of the instrument it wraps
(tracing keeps working).
Token arrival is the one event the Host does not report; ``counted`` wraps the stream for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

from rich.text import Text

from ..tracing import Instrument, ObservationTrace
from ..tracing.events import (
    Claimed,
    Event,
    Listener,
    ObservationCompleted,
    ObservationStarted,
    RunEnded,
    RunStarted,
    Sealed,
    SnapshotAccepted,
    StreamInstrument,
    listeners_of,
)


@dataclass(slots=True)
class Progress:
    """What a run has done so far; updated from the event loop, read by the display."""

    phase: str = "waiting"
    tokens: int = 0
    statements: int = 0
    sealed: bool = False
    early_started: int = 0
    early_done: int = 0
    claims: int = 0
    program_calls: int = 0
    status: str | None = None

    def render(self) -> Text:
        """One line: the stream, early work, the program, as they stand."""
        line = Text()
        line.append(f"{self.phase:<17}", style="bold")
        line.append(f"tokens {self.tokens:>4}  stmts {self.statements:>3}")
        line.append("  sealed" if self.sealed else "        ", style="bold blue")
        line.append(f"  early {self.early_done:>2}/{self.early_started:<2}", style="green")
        line.append(f" claimed {self.claims:>2}", style="green")
        line.append(f"  direct {self.program_calls:>2}", style="magenta")
        if self.status is not None:
            line.append(f"  {self.status}", style="bold")
        return line


async def counted(chunks: AsyncIterable[str], progress: Progress) -> AsyncIterator[str]:
    """``chunks`` unchanged, counting each one as a token in ``progress``."""
    async for chunk in chunks:
        progress.tokens += 1
        yield chunk


class ProgressInstrument(StreamInstrument):
    """An instrument that counts a run's events into ``progress``: one listener of the run's
    stream beside those of ``inner`` (whose recording goes on unchanged)."""

    __slots__ = ("_inner", "progress")

    def __init__(self, inner: Instrument, progress: Progress) -> None:
        self._inner = inner
        self.progress = progress

    def listeners(self, started: RunStarted) -> tuple[Listener, ...]:
        return (*listeners_of(self._inner, started), ProgressListener(self.progress))


class ProgressListener(Listener):
    """Counts one run's events into ``progress`` (early work: the ``speculative`` lane)."""

    __slots__ = ("_early", "_progress")

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._early: set[ObservationTrace] = set()

    def received(self, event: Event) -> None:
        progress = self._progress
        match event:
            case SnapshotAccepted():
                progress.statements = event.statements
            case Sealed():
                progress.sealed = True
                progress.statements = event.statements
            case ObservationStarted() if event.lane == "speculative":
                progress.early_started += 1
                self._early.add(event.observation)
            case ObservationStarted():
                progress.program_calls += 1
            case ObservationCompleted() if event.observation in self._early:
                progress.early_done += 1
            case Claimed():
                progress.claims += 1
            case RunEnded():
                progress.status = str(event.status)
