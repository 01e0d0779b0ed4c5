"""Live progress of a run, for people watching a terminal (``pysolate demo``).

A demo that sits silent while the model streams hides the very thing it is there to show:
calls starting before the code is complete, and claims the moment it is. The Host already
reports every such event to its instrument, so progress is an instrument too: it counts what
the hooks say and hands every hook on to the instrument it wraps (tracing keeps working).
Token arrival is the one event the Host does not report; ``counted`` wraps the stream for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass

from rich.text import Text

from .tracing import NO_RESULT, ClaimTrace, Instrument, Lane, ObservationTrace, RunTrace


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


class ProgressInstrument:
    """An ``Instrument`` that counts a run's events into ``progress`` and forwards them."""

    __slots__ = ("_inner", "progress")

    def __init__(self, inner: Instrument, progress: Progress) -> None:
        self._inner = inner
        self.progress = progress

    def run_started(
        self, *, run_id: str, agent_name: str | None = None, isolation: str | None = None
    ) -> RunTrace:
        inner = self._inner.run_started(run_id=run_id, agent_name=agent_name, isolation=isolation)
        return _ProgressRun(inner, self.progress)


class _ProgressObservation:
    __slots__ = ("_early", "_inner", "_progress")

    def __init__(self, inner: ObservationTrace, progress: Progress, *, early: bool) -> None:
        self._inner = inner
        self._progress = progress
        self._early = early

    def activated(self) -> AbstractContextManager[object]:
        return self._inner.activated()

    def completed(self, *, error: BaseException | str | None = None, result: object = NO_RESULT) -> None:
        if self._early:
            self._progress.early_done += 1
        self._inner.completed(error=error, result=result)

    def settled(self, disposition: str) -> None:
        self._inner.settled(disposition)


class _ProgressRun:
    __slots__ = ("_inner", "_progress")

    def __init__(self, inner: RunTrace, progress: Progress) -> None:
        self._inner = inner
        self._progress = progress

    def snapshot_accepted(self, *, statements: int, new_statements: int, chars: int) -> None:
        self._progress.statements = statements
        self._inner.snapshot_accepted(statements=statements, new_statements=new_statements, chars=chars)

    def sealed(self, source_hash: str, *, statements: int, chars: int) -> None:
        self._progress.sealed = True
        self._progress.statements = statements
        self._inner.sealed(source_hash, statements=statements, chars=chars)

    def observation_started(
        self,
        capability: str,
        method: str,
        *,
        call_id: str,
        lane: Lane,
        effect: str,
        call_key: str | None = None,
        arguments: Mapping[str, object] | None = None,
        shared_from: str | None = None,
        served_by: ObservationTrace | None = None,
    ) -> ObservationTrace:
        early = lane == "speculative"
        if early:
            self._progress.early_started += 1
        else:
            self._progress.program_calls += 1
        if isinstance(served_by, _ProgressObservation):
            served_by = served_by._inner
        inner = self._inner.observation_started(
            capability, method, call_id=call_id, lane=lane, effect=effect, call_key=call_key, arguments=arguments,
            shared_from=shared_from, served_by=served_by,
        )
        return _ProgressObservation(inner, self._progress, early=early)

    def claimed(
        self,
        capability: str,
        method: str,
        *,
        call_id: str,
        observation: ObservationTrace,
        call_key: str | None = None,
        arguments: Mapping[str, object] | None = None,
    ) -> ClaimTrace:
        self._progress.claims += 1
        if isinstance(observation, _ProgressObservation):
            observation = observation._inner
        return self._inner.claimed(
            capability, method, call_id=call_id, observation=observation, call_key=call_key, arguments=arguments
        )

    def ended(self, status: str, *, counts: Mapping[str, int] | None = None, error_type: str | None = None) -> None:
        self._progress.status = str(status)
        self._inner.ended(status, counts=counts, error_type=error_type)
