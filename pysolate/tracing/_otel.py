"""The OpenTelemetry instrument: GenAI-convention spans for runs, tool calls and claims.

Spans (all INTERNAL, children of the run span, which is a child of whatever span is
current when the run starts, e.g. the framework's ``execute_tool run_code``):

- ``pysolate.run`` per run (deliberately not a GenAI operation, see ``_attributes.RUN``):
  ``pysolate.run_id``, the enclosing code action's ``gen_ai.tool.call.id`` and
  ``gen_ai.conversation.id`` when the caller gave them (``code_action``),
  ``pysolate.source_hash`` (at seal), ``pysolate.status`` and ``pysolate.count.*`` (at the
  end); events ``pysolate.snapshot`` per accepted snapshot and ``pysolate.seal``.
- ``execute_tool {capability}.{method}`` per *physical* observation, with the GenAI tool
  attributes plus ``pysolate.lane``, ``.effect``, ``.call_key`` and, for early work,
  ``.disposition``.
- ``claim {capability}.{method}`` per *logical* Guest call served by early work, linked to
  the ``execute_tool`` span it claimed.
- ``shared {capability}.{method}`` per call served by a physical call *another run* made
  (the Host's observation table; issue 40): ``pysolate.shared_from`` (that run's id),
  ``pysolate.served_by`` (that call's tool-call id) and a link to its ``execute_tool`` span.

Tool-call ids are the run id followed by the Host's per-run id (``3f2a…-early-1``), so they
are unique across runs; ``gen_ai.conversation.id`` is on every span of the run.

Timing of early work: its disposition is known only when it is claimed or the run ends,
often after the execution finished. The span stays open until then but is ended with the
*completion* timestamp, so its duration is the execution's and it still carries the
disposition (OpenTelemetry attributes cannot be set on an ended span).

Errors follow the conventions: status ERROR and ``error.type``; recording exception events
is discouraged, and the status description (the exception message, which may quote
arguments such as a path) is set only when payloads are opted in. Cancellation and the
``cancelled``/``orphaned`` dispositions are not errors.

With no SDK configured (or a sampler that drops the run) the run span does not record, and
the run falls back to the null hooks: one ``start_span`` per run is the whole cost, which is
why a default ``Host()`` traces through the global provider.
"""

from __future__ import annotations

import enum
import importlib.metadata
import json
import logging
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Final

from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from occurrences import tool_name

from . import _attributes as A
from ._context import current_code_action, current_session_turn
from ._interface import (
    NO_RESULT,
    ClaimTrace,
    Disposition,
    Lane,
    ObservationTrace,
    RunTrace,
)
from ._null import NULL_RUN

_log = logging.getLogger("pysolate.tracing")

MAX_PAYLOAD_CHARS: Final = 8192
"""Longest ``gen_ai.tool.call.arguments``/``.result`` value; longer JSON is cut and marked."""

_TRUNCATED: Final = "…[truncated]"


def error_type(error: BaseException | str | None) -> str | None:
    """The ``error.type`` of a failure, or None when it is not an error (cancellation).

    A ``ToolFailure`` (anything with a string ``type_name``) reports the class the program
    sees; builtin exceptions their bare name; others ``module.QualName``.
    """
    if error is None:
        return None
    if isinstance(error, str):
        return error or A.ERROR_TYPE_OTHER
    if not isinstance(error, Exception):
        return None
    type_name = getattr(error, "type_name", None)
    if isinstance(type_name, str) and type_name:
        return type_name
    cls = type(error)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _payload(value: object) -> str:
    """JSON text of a plain value (bytes and other leftovers as their repr), bounded."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    if len(text) > MAX_PAYLOAD_CHARS:
        return text[: MAX_PAYLOAD_CHARS - len(_TRUNCATED)] + _TRUNCATED
    return text


def _set_error(span: trace.Span, error: BaseException | str | None, *, describe: bool) -> None:
    kind = error_type(error)
    if kind is None:
        return
    span.set_attribute(A.ERROR_TYPE, kind)
    description = str(error) if describe and isinstance(error, BaseException) else None
    span.set_status(Status(StatusCode.ERROR, description))


class _Phase(enum.Enum):
    """Lifecycle of an observation span."""

    RUNNING = enum.auto()
    """Executing; disposition unknown."""
    COMPLETED = enum.auto()
    """Early work finished; the span waits for its disposition, end time already fixed."""
    SETTLED = enum.auto()
    """Early work has its disposition (e.g. claimed) but is still executing."""
    ENDED = enum.auto()


class _Move(enum.Enum):
    COMPLETE = enum.auto()
    SETTLE = enum.auto()


def _next_phase(phase: _Phase, move: _Move, *, early: bool) -> _Phase | None:
    """The one transition function of observation spans; None for an illegal move."""
    if move is _Move.COMPLETE:
        if phase is _Phase.RUNNING:
            return _Phase.COMPLETED if early else _Phase.ENDED
        if phase is _Phase.SETTLED:
            return _Phase.ENDED
        return None
    if not early:
        return None
    if phase is _Phase.RUNNING:
        return _Phase.SETTLED
    if phase is _Phase.COMPLETED:
        return _Phase.ENDED
    return None


class _OTelObservation:
    __slots__ = (
        "_completed_at",
        "_describe",
        "_early",
        "_phase",
        "_record",
        "_run",
        "call_id",
        "span",
    )

    def __init__(self, run: _OTelRun, span: trace.Span, call_id: str, *, early: bool) -> None:
        self._run = run
        self.span = span
        self.call_id = call_id
        self._early = early
        self._record = run.record_payloads
        self._describe = run.record_payloads
        self._phase = _Phase.RUNNING
        self._completed_at: int | None = None  # set exactly when phase left RUNNING by COMPLETE

    def activated(self) -> AbstractContextManager[object]:
        # The Host reports the outcome through ``completed``; ``use_span`` must not add an
        # exception event or a status (with the message) of its own.
        return trace.use_span(
            self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )

    def _move(self, move: _Move, what: str) -> bool:
        nxt = _next_phase(self._phase, move, early=self._early)
        if nxt is None:
            if self._phase is not _Phase.ENDED:  # hooks after the run ended are expected
                _log.warning(
                    "tracing: %s ignored on %s observation in phase %s",
                    what,
                    "early" if self._early else "formal",
                    self._phase.name,
                )
            return False
        self._phase = nxt
        return True

    def completed(
        self, *, error: BaseException | str | None = None, result: object = NO_RESULT
    ) -> None:
        if not self._move(_Move.COMPLETE, "completed"):
            return
        self._completed_at = time.time_ns()
        _set_error(self.span, error, describe=self._describe)
        if self._record and result is not NO_RESULT and error is None:
            self.span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, _payload(result))
        if self._phase is _Phase.ENDED:
            self._end(self._completed_at)

    def settled(self, disposition: Disposition) -> None:
        was_running = self._phase is _Phase.RUNNING
        if not self._move(_Move.SETTLE, "settled"):
            return
        self.span.set_attribute(A.DISPOSITION, str(disposition))
        if was_running and disposition == "cancelled":
            self._phase = _Phase.ENDED
            self._end(None)
        elif self._phase is _Phase.ENDED:
            self._end(self._completed_at)

    def close(self) -> None:
        """The run ended: end the span whatever its phase (completion time if known)."""
        if self._phase is not _Phase.ENDED:
            self._phase = _Phase.ENDED
            self._end(self._completed_at)

    def _end(self, at: int | None) -> None:
        self.span.end(end_time=at)
        self._run.forget(self)


class _OTelClaim:
    __slots__ = ("_ended", "_run", "span")

    def __init__(self, run: _OTelRun, span: trace.Span) -> None:
        self._run = run
        self.span = span
        self._ended = False

    def ended(
        self, *, error: BaseException | str | None = None, result: object = NO_RESULT
    ) -> None:
        if self._ended:
            return
        _set_error(self.span, error, describe=self._run.record_payloads)
        if self._run.record_payloads and result is not NO_RESULT and error is None:
            self.span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, _payload(result))
        self.close()

    def close(self) -> None:
        if not self._ended:
            self._ended = True
            self.span.end()
            self._run.forget(self)


class _OTelRun:
    __slots__ = (
        "_context",
        "_conversation_id",
        "_ended",
        "_open",
        "_run_id",
        "_span",
        "_tracer",
        "record_payloads",
    )

    def __init__(
        self,
        tracer: trace.Tracer,
        span: trace.Span,
        *,
        run_id: str,
        conversation_id: str | None,
        record_payloads: bool,
    ) -> None:
        self._tracer = tracer
        self._span = span
        self._run_id = run_id
        self._conversation_id = conversation_id
        self._context = trace.set_span_in_context(span)
        self.record_payloads = record_payloads
        # Observations and claims not yet ended; closed at the run's end so no span leaks.
        self._open: dict[_OTelObservation | _OTelClaim, None] = {}
        self._ended = False

    def unique(self, call_id: str) -> str:
        """The Host's per-run call id made unique across runs."""
        return f"{self._run_id}-{call_id}"

    def forget(self, handle: _OTelObservation | _OTelClaim) -> None:
        self._open.pop(handle, None)

    def snapshot_accepted(self, *, statements: int, new_statements: int, chars: int) -> None:
        self._span.add_event(
            A.SNAPSHOT_EVENT,
            {
                A.SNAPSHOT_STATEMENTS: statements,
                A.SNAPSHOT_NEW_STATEMENTS: new_statements,
                A.SNAPSHOT_CHARS: chars,
            },
        )

    def sealed(self, source_hash: str, *, statements: int, chars: int) -> None:
        self._span.set_attribute(A.SOURCE_HASH, source_hash)
        self._span.add_event(
            A.SEAL_EVENT,
            {
                A.SOURCE_HASH: source_hash,
                A.SNAPSHOT_STATEMENTS: statements,
                A.SNAPSHOT_CHARS: chars,
            },
        )

    def _tool_attributes(
        self,
        capability: str,
        method: str,
        call_id: str,
        call_key: str | None,
        arguments: Mapping[str, object] | None,
    ) -> dict[str, str]:
        attributes = {
            A.GEN_AI_TOOL_NAME: tool_name(capability, method),
            A.GEN_AI_TOOL_CALL_ID: call_id,
            A.GEN_AI_TOOL_TYPE: "function",
            A.CAPABILITY: capability,
            A.METHOD: method,
            A.RUN_ID: self._run_id,
        }
        if self._conversation_id is not None:
            attributes[A.GEN_AI_CONVERSATION_ID] = self._conversation_id
        if call_key is not None:
            attributes[A.CALL_KEY] = call_key
        if self.record_payloads and arguments is not None:
            attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] = _payload(dict(arguments))
        return attributes

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
        call_id = self.unique(call_id)
        attributes = {
            **self._tool_attributes(capability, method, call_id, call_key, arguments),
            A.LANE: str(lane),
            A.EFFECT: str(effect),
        }
        links = []
        if shared_from is None:
            attributes[A.GEN_AI_OPERATION_NAME] = A.EXECUTE_TOOL
            name = f"{A.EXECUTE_TOOL} {tool_name(capability, method)}"
        else:  # not an execution (tool-call counts must not double): served by another run's
            attributes[A.SHARED_FROM] = shared_from
            name = f"{A.SHARED} {tool_name(capability, method)}"
            if isinstance(served_by, _OTelObservation):
                attributes[A.SERVED_BY] = served_by.call_id
                links.append(Link(served_by.span.get_span_context(), {A.LINK_RELATION: A.LINK_SHARED_FROM}))
        span = self._tracer.start_span(
            name,
            context=self._context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
        )
        observation = _OTelObservation(self, span, call_id, early=lane != "formal")
        self._open[observation] = None
        return observation

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
        call_id = self.unique(call_id)
        attributes = self._tool_attributes(capability, method, call_id, call_key, arguments)
        links = []
        if isinstance(observation, _OTelObservation):
            attributes[A.CLAIMED_OBSERVATION] = observation.call_id
            links.append(
                Link(observation.span.get_span_context(), {A.LINK_RELATION: A.LINK_CLAIMS})
            )
        span = self._tracer.start_span(
            f"{A.CLAIM} {tool_name(capability, method)}",
            context=self._context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
        )
        claim = _OTelClaim(self, span)
        self._open[claim] = None
        return claim

    def ended(
        self,
        status: str,
        *,
        counts: Mapping[str, int] | None = None,
        error_type: str | None = None,
    ) -> None:
        if self._ended:
            _log.warning("tracing: run ended twice")
            return
        self._ended = True
        for handle in list(self._open):
            handle.close()
        self._span.set_attribute(A.STATUS, str(status))
        for name, value in (counts or {}).items():
            self._span.set_attribute(A.COUNT_PREFIX + name, value)
        if status != "ok":
            self._span.set_attribute(A.ERROR_TYPE, error_type or A.ERROR_TYPE_OTHER)
            self._span.set_status(Status(StatusCode.ERROR))
        self._span.end()


def _package_version() -> str | None:
    try:
        return importlib.metadata.version("pysolate")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return None


class OTelInstrument:
    """Records runs as OpenTelemetry spans.

    ``tracer_provider``: where spans go; default the global one, resolved at each run (so
    nothing is recorded until the application configures an SDK, and an SDK configured
    after the Host was built is used). ``record_payloads``: opt in to recording tool-call
    arguments and results (``gen_ai.tool.call.arguments``/``.result``, JSON, at most
    ``MAX_PAYLOAD_CHARS``) and error messages; off by default because they may hold user
    data. ``agent_name``: ``gen_ai.agent.name`` of the agent the code runs for.
    """

    __slots__ = ("_agent_name", "_record_payloads", "_tracer")

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        record_payloads: bool = False,
        agent_name: str | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(
            "pysolate", _package_version(), tracer_provider=tracer_provider, schema_url=A.SCHEMA_URL
        )
        self._record_payloads = record_payloads
        self._agent_name = agent_name

    def run_started(
        self, *, run_id: str, agent_name: str | None = None, isolation: str | None = None
    ) -> RunTrace:
        name = agent_name or self._agent_name
        action = current_code_action()
        attributes: dict[str, str | int] = {A.RUN_ID: run_id}
        if isolation:
            attributes[A.ISOLATION] = isolation
        if name:
            attributes[A.GEN_AI_AGENT_NAME] = name
        if action.tool_call_id is not None:
            attributes[A.GEN_AI_TOOL_CALL_ID] = action.tool_call_id
        if action.conversation_id is not None:
            attributes[A.GEN_AI_CONVERSATION_ID] = action.conversation_id
        turn = current_session_turn()
        if turn is not None:
            attributes[A.SESSION_ID] = turn.session_id
            attributes[A.TURN] = turn.turn
        span = self._tracer.start_span(A.RUN, kind=SpanKind.INTERNAL, attributes=attributes)
        if not span.is_recording():
            span.end()
            return NULL_RUN
        return _OTelRun(
            self._tracer,
            span,
            run_id=run_id,
            conversation_id=action.conversation_id,
            record_payloads=self._record_payloads,
        )


GLOBAL_INSTRUMENT: Final = OTelInstrument()
"""A default ``Host()``'s instrument: the global tracer provider, no payloads."""
