"""The instrument that records nothing, and costs one method call per hook.

Every hook returns a shared module-level singleton, so a Host without tracing allocates
nothing per run, per observation or per claim (``tests/pysolate/test_tracing.py`` counts
the Python calls a whole run's hooks make).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext

from ._interface import (
    NO_RESULT,
    ClaimTrace,
    Disposition,
    Instrument,
    Lane,
    ObservationTrace,
    RunTrace,
)

_NO_CONTEXT: AbstractContextManager[object] = nullcontext()  # reusable: it holds no state


class _NullClaim:
    __slots__ = ()

    def ended(
        self, *, error: BaseException | str | None = None, result: object = NO_RESULT
    ) -> None:
        pass


class _NullObservation:
    __slots__ = ()

    def activated(self) -> AbstractContextManager[object]:
        return _NO_CONTEXT

    def completed(
        self, *, error: BaseException | str | None = None, result: object = NO_RESULT
    ) -> None:
        pass

    def settled(self, disposition: Disposition) -> None:
        pass


class _NullRun:
    __slots__ = ()

    def snapshot_accepted(self, *, statements: int, new_statements: int, chars: int) -> None:
        pass

    def sealed(self, source_hash: str, *, statements: int, chars: int) -> None:
        pass

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
        return NULL_OBSERVATION

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
        return NULL_CLAIM

    def ended(
        self,
        status: str,
        *,
        counts: Mapping[str, int] | None = None,
        error_type: str | None = None,
    ) -> None:
        pass


class NullInstrument:
    """Records nothing. The Host's default when no tracing is asked for."""

    __slots__ = ()

    def run_started(
        self, *, run_id: str, agent_name: str | None = None, isolation: str | None = None
    ) -> RunTrace:
        return NULL_RUN


NULL_CLAIM: ClaimTrace = _NullClaim()
NULL_OBSERVATION: ObservationTrace = _NullObservation()
NULL_RUN: RunTrace = _NullRun()
"""The run trace that records nothing (what ``NULL_INSTRUMENT.run_started`` returns)."""
NULL_INSTRUMENT: Instrument = NullInstrument()
"""The shared ``NullInstrument``: pass it as ``Host(instrument=...)`` to record nothing."""
