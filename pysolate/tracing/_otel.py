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

The spans are a listener of the run's event stream (``_events.py``), which has already
checked the order of what it reports. With no SDK configured (or a sampler that drops the
run) the run span does not record, the instrument gives the run no listener and the run
falls back to the null hooks: one ``start_span`` per run is the whole cost, which is
why a default ``Host()`` traces through the global provider.
"""

from __future__ import annotations

import importlib.metadata
import json
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Final
from weakref import WeakKeyDictionary

from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from occurrences import tool_name

from . import _attributes as A
from ._context import current_code_action, current_session_turn
from ._events import (
    Claimed,
    ClaimEnded,
    Event,
    Listener,
    ObservationCompleted,
    ObservationSettled,
    ObservationStarted,
    RunEnded,
    RunStarted,
    Sealed,
    SnapshotAccepted,
)
from ._interface import NO_RESULT, ClaimTrace, Disposition, ObservationTrace
from ._stream import StreamInstrument

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


class _OTelObservation:
    """The span of one observation; the stream has checked every event's order."""

    __slots__ = ("_completed_at", "_settled", "call_id", "early", "span")

    def __init__(self, span: trace.Span, call_id: str, *, early: bool) -> None:
        self.span = span
        self.call_id = call_id
        self.early = early
        self._settled = False
        self._completed_at: int | None = None

    def completed(self, error: BaseException | str | None, result: object, *, record: bool) -> bool:
        """Record the outcome; True when the span ended (formal, or already settled)."""
        self._completed_at = time.time_ns()
        _set_error(self.span, error, describe=record)
        if record and result is not NO_RESULT and error is None:
            self.span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, _payload(result))
        if self.early and not self._settled:
            return False
        self.span.end(end_time=self._completed_at)
        return True

    def settled(self, disposition: Disposition) -> bool:
        """Record the disposition; True when the span ended (completed, or cancelled)."""
        self._settled = True
        self.span.set_attribute(A.DISPOSITION, str(disposition))
        if self._completed_at is None and disposition != "cancelled":
            return False
        self.span.end(end_time=self._completed_at)
        return True

    def close(self) -> None:
        """The run ended: end the span whatever its phase (completion time if known)."""
        self.span.end(end_time=self._completed_at)


class _OTelRun(Listener):
    """One run's spans, derived from its event stream."""

    __slots__ = (
        "_claims",
        "_context",
        "_conversation_id",
        "_known",
        "_mine",
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
        known: WeakKeyDictionary[ObservationTrace, _OTelObservation],
        *,
        run_id: str,
        conversation_id: str | None,
        record_payloads: bool,
    ) -> None:
        self._tracer = tracer
        self._span = span
        self._context = trace.set_span_in_context(span)
        self._known = known  # every observation's span, this Host's runs (for shared_from)
        self._run_id = run_id
        self._conversation_id = conversation_id
        self.record_payloads = record_payloads
        self._mine: dict[
            ObservationTrace, _OTelObservation
        ] = {}  # this run's (a plain dict: faster)
        # Observations and claims not yet ended; closed at the run's end so no span leaks.
        self._open: dict[ObservationTrace, _OTelObservation] = {}
        self._claims: dict[ClaimTrace, trace.Span] = {}

    def unique(self, call_id: str) -> str:
        """The Host's per-run call id made unique across runs."""
        return f"{self._run_id}-{call_id}"

    def activated(self, observation: ObservationTrace) -> AbstractContextManager[object] | None:
        known = self._mine.get(observation) or self._known.get(observation)
        if known is None:
            return None
        # The Host reports the outcome through ``completed``; ``use_span`` must not add an
        # exception event or a status (with the message) of its own.
        return trace.use_span(
            known.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )

    def received(self, event: Event) -> None:
        match event:
            case ObservationStarted():
                self._observation_started(event)
            case ObservationCompleted():
                obs = self._open[event.observation]
                if obs.completed(event.error, event.result, record=self.record_payloads):
                    del self._open[event.observation]
            case ObservationSettled():
                if self._open[event.observation].settled(event.disposition):
                    del self._open[event.observation]
            case Claimed():
                self._claimed(event)
            case ClaimEnded():
                span = self._claims.pop(event.claim)
                _set_error(span, event.error, describe=self.record_payloads)
                if self.record_payloads and event.result is not NO_RESULT and event.error is None:
                    span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, _payload(event.result))
                span.end()
            case SnapshotAccepted():
                self._span.add_event(
                    A.SNAPSHOT_EVENT,
                    {
                        A.SNAPSHOT_STATEMENTS: event.statements,
                        A.SNAPSHOT_NEW_STATEMENTS: event.new_statements,
                        A.SNAPSHOT_CHARS: event.chars,
                    },
                )
            case Sealed():
                self._span.set_attribute(A.SOURCE_HASH, event.source_hash)
                self._span.add_event(
                    A.SEAL_EVENT,
                    {
                        A.SOURCE_HASH: event.source_hash,
                        A.SNAPSHOT_STATEMENTS: event.statements,
                        A.SNAPSHOT_CHARS: event.chars,
                    },
                )
            case RunEnded():
                self._ended(event)

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

    def _observation_started(self, event: ObservationStarted) -> None:
        capability, method = event.capability, event.method
        call_id = self.unique(event.call_id)
        attributes = {
            **self._tool_attributes(capability, method, call_id, event.call_key, event.arguments),
            A.LANE: str(event.lane),
            A.EFFECT: str(event.effect),
        }
        links = []
        if event.shared_from is None:
            attributes[A.GEN_AI_OPERATION_NAME] = A.EXECUTE_TOOL
            name = f"{A.EXECUTE_TOOL} {tool_name(capability, method)}"
        else:  # not an execution (tool-call counts must not double): served by another run's
            attributes[A.SHARED_FROM] = event.shared_from
            name = f"{A.SHARED} {tool_name(capability, method)}"
            served_by = None if event.served_by is None else self._known.get(event.served_by)
            if served_by is not None:
                attributes[A.SERVED_BY] = served_by.call_id
                links.append(
                    Link(served_by.span.get_span_context(), {A.LINK_RELATION: A.LINK_SHARED_FROM})
                )
        span = self._tracer.start_span(
            name,
            context=self._context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
        )
        observation = _OTelObservation(span, call_id, early=event.early)
        self._open[event.observation] = observation
        self._mine[event.observation] = observation
        self._known[event.observation] = observation

    def _claimed(self, event: Claimed) -> None:
        call_id = self.unique(event.call_id)
        attributes = self._tool_attributes(
            event.capability, event.method, call_id, event.call_key, event.arguments
        )
        links = []
        observation = self._mine.get(event.observation) or self._known.get(event.observation)
        if observation is not None:
            attributes[A.CLAIMED_OBSERVATION] = observation.call_id
            links.append(
                Link(observation.span.get_span_context(), {A.LINK_RELATION: A.LINK_CLAIMS})
            )
        self._claims[event.claim] = self._tracer.start_span(
            f"{A.CLAIM} {tool_name(event.capability, event.method)}",
            context=self._context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
        )

    def _ended(self, event: RunEnded) -> None:
        for observation in self._open.values():
            observation.close()
        for claim in self._claims.values():
            claim.end()
        self._open.clear()
        self._claims.clear()
        self._span.set_attribute(A.STATUS, str(event.status))
        for name, value in (event.counts or {}).items():
            self._span.set_attribute(A.COUNT_PREFIX + name, value)
        if event.status != "ok":
            self._span.set_attribute(A.ERROR_TYPE, event.error_type or A.ERROR_TYPE_OTHER)
            self._span.set_status(Status(StatusCode.ERROR))
        self._span.end()


def _package_version() -> str | None:
    try:
        return importlib.metadata.version("pysolate")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return None


class OTelInstrument(StreamInstrument):
    """Records runs as OpenTelemetry spans: a listener of each run's event stream.

    ``tracer_provider``: where spans go; default the global one, resolved at each run (so
    nothing is recorded until the application configures an SDK, and an SDK configured
    after the Host was built is used). ``record_payloads``: opt in to recording tool-call
    arguments and results (``gen_ai.tool.call.arguments``/``.result``, JSON, at most
    ``MAX_PAYLOAD_CHARS``) and error messages; off by default because they may hold user
    data. ``agent_name``: ``gen_ai.agent.name`` of the agent the code runs for.
    """

    __slots__ = ("_agent_name", "_known", "_record_payloads", "_tracer")

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
        self._known: WeakKeyDictionary[ObservationTrace, _OTelObservation] = WeakKeyDictionary()

    def listeners(self, started: RunStarted) -> tuple[Listener, ...]:
        run_id, isolation = started.run_id, started.isolation
        name = started.agent_name or self._agent_name
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
            return ()
        run = _OTelRun(
            self._tracer,
            span,
            self._known,
            run_id=run_id,
            conversation_id=action.conversation_id,
            record_payloads=self._record_payloads,
        )
        return (run,)


GLOBAL_INSTRUMENT: Final = OTelInstrument()
"""A default ``Host()``'s instrument: the global tracer provider, no payloads."""
