"""The instrument interface: the hooks the Host calls, and nothing about how they record.

Prior art: anyio keeps its ``abc`` apart from its backends, and OpenTelemetry itself splits
API from SDK. Here the Host depends only on these classes, whose every hook does nothing:
``NULL_INSTRUMENT`` is an ``Instrument`` itself, so a Host without tracing pays one method
call per hook, allocates nothing (each hook returns a shared singleton) and never imports a
tracer. An instrument that records turns the hooks into one typed event stream
(``_events.py``, ``_stream.py``); OpenTelemetry spans (``_otel.py``) and live progress are
listeners of it.

Shape of one run, as the Host drives it::

    run = instrument.run_started(run_id="r1")
    run.snapshot_accepted(statements=2, new_statements=1, chars=80)   # per accepted snapshot
    obs = run.observation_started("docs", "search", call_id="p1", lane="speculative", ...)
    with obs.activated():                    # the tool's own spans nest under it
        ...
    obs.completed()                          # or completed(error=exc)
    run.sealed(source_hash, statements=5, chars=300)
    claim = run.claimed("docs", "search", call_id="c1", observation=obs, ...)
    claim.ended()
    obs.settled("claimed")                   # final disposition of early work
    # served by another run's physical call (the Host's observation table), linked to it:
    shared = run.observation_started("docs", "search", ..., shared_from="r0", served_by=its_obs)
    run.ended("ok", counts={"logical": 3, ...})

Every hook may be called from the Host's event loop only (they are not thread-safe), and
none of them raises on misuse: a hook out of order is ignored and logged, because a tracing
mistake must never change a run's outcome.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Final, TypeAlias

Lane: TypeAlias = str
"""Which lane ran a physical observation: ``"speculative"`` (early, before seal),
``"branch"`` (early, on a speculative layer of the run's branch: a write, or a read of what
it wrote) or ``"formal"`` (for the Guest's own call). Plain ``str`` so StrEnums of the
scheduler fit."""

Disposition: TypeAlias = str
"""The end of early physical work (docs/glossary.md): ``"claimed"``, ``"cancelled"``,
``"late"``, ``"orphaned"`` or ``"discarded"`` (work on a dropped branch layer;
``scheduler``'s ``Disposition`` StrEnum fits). Formal work has none."""


class _NoResult:
    """Sentinel type: "no result to record" (``None`` is a legitimate tool result)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_RESULT"


NO_RESULT: Final = _NoResult()
"""The ``result`` of a hook that has no result to record (``None`` is a result)."""


_NO_CONTEXT: AbstractContextManager[object] = nullcontext()  # reusable: it holds no state


class ClaimTrace:
    """One logical Guest call served by an early physical observation."""

    __slots__ = ()

    def ended(
        self, *, error: BaseException | str | None = None, result: object = NO_RESULT
    ) -> None:
        """The Guest received the claimed value (or the claimed failure, ``error``)."""


class ObservationTrace:
    """One physical execution of a capability method.

    Weakly referable: a listener may key what it keeps about an observation by its handle
    for as long as someone (another run served by it) holds the handle."""

    __slots__ = ("__weakref__",)

    def activated(self) -> AbstractContextManager[object]:
        """Make this observation the current span while the tool runs, so spans the tool
        itself creates (an HTTP client's, say) nest under it."""
        return _NO_CONTEXT

    def completed(
        self, *, error: BaseException | str | None = None, result: object = NO_RESULT
    ) -> None:
        """The execution finished: returned ``result`` or raised ``error``.

        ``error`` is the exception (a ``ToolFailure`` records its ``type_name``) or a type
        name. A ``BaseException`` that is not an ``Exception`` (cancellation) is not an
        error. Formal work ends its span here; early work ends it once also settled.
        """

    def settled(self, disposition: Disposition) -> None:
        """Early work only: its final disposition. ``cancelled`` ends the span at once;
        otherwise the span ends at its completion time (now, or when it completes)."""


class RunTrace:
    """One run: from the first chunk to the result."""

    __slots__ = ()

    def snapshot_accepted(self, *, statements: int, new_statements: int, chars: int) -> None:
        """The accepted complete prefix grew (``Snapshot.statements``, ``.new_statements``,
        ``.end``)."""

    def sealed(self, source_hash: str, *, statements: int, chars: int) -> None:
        """The complete source parsed and is sealed (see ``source_hash()``)."""

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
        """A physical observation starts. ``call_key`` is ``CallKey.digest()``;
        ``arguments`` (bound to parameter names) are recorded only on opt-in.

        ``shared_from`` (a run id): no physical call of this run's, but a call served by the
        physical call that run made (the Host's observation table); ``served_by`` is that
        call's trace, when this Host traced it, to link to."""
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
        """A logical Guest call claims ``observation`` (linked to its span)."""
        return NULL_CLAIM

    def ended(
        self,
        status: str,
        *,
        counts: Mapping[str, int] | None = None,
        error_type: str | None = None,
    ) -> None:
        """The run is over with ``status`` (``"ok"``, ``"error"``, ``"rejected"``,
        ``"aborted"``; ``pysolate.RunStatus`` fits). Any observation or claim still open
        is ended now (a thread that finishes later reports into an ended span, which
        records nothing)."""


class Instrument:
    """Factory of run traces; one per Host, shared by concurrent runs.

    This base records nothing (``NULL_INSTRUMENT``); a subclass overrides ``run_started``
    (and returns its own ``RunTrace``), or builds on ``StreamInstrument`` to receive the
    run as events."""

    __slots__ = ()

    def run_started(
        self, *, run_id: str, agent_name: str | None = None, isolation: str | None = None
    ) -> RunTrace:
        """A run starts (first chunk, or ``run_source``). ``isolation`` is the level its
        Guest runs at (``Host.isolation()``; ``"custom"`` for a custom Guest factory)."""
        return NULL_RUN


NullInstrument = Instrument
"""The instrument that records nothing: the no-op base itself (kept as a name)."""

NULL_CLAIM: Final[ClaimTrace] = ClaimTrace()
NULL_OBSERVATION: Final[ObservationTrace] = ObservationTrace()
NULL_RUN: Final[RunTrace] = RunTrace()
"""The run trace that records nothing (what ``NULL_INSTRUMENT.run_started`` returns)."""
NULL_INSTRUMENT: Final[Instrument] = Instrument()
"""The shared no-op instrument: pass it as ``Host(instrument=...)`` to record nothing."""


def source_hash(source: str) -> str:
    """The sealed source's identity in traces and reports: 16 hex digits of its SHA-256."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]
