"""``text_chunks``: any model stream in, an async iterator of text chunks out.

Duck-typed on the event *shapes* of the SDKs, so none of them is a dependency:

- plain ``str`` chunks (already text);
- OpenAI Chat Completions chunks: ``chunk.choices[0].delta.content``; ``content`` is None
  on role-only, tool-call and finish chunks, and ``choices`` is empty on the final usage
  chunk (``stream_options={"include_usage": True}``). With ``n > 1`` only the choice with
  ``index == 0`` is the program;
- OpenAI Responses events: ``type == "response.output_text.delta"`` carries ``.delta``;
  every other event type (created, in_progress, output_item.added, ...done, completed,
  function-call argument deltas, reasoning) is ignored;
- the OpenAI SDK's chat helper stream (``client.chat.completions.stream``): its
  ``content.delta`` events carry ``.delta``; ``chunk`` events (the raw chunk again),
  ``content.done`` and tool-argument events are ignored;
- Anthropic Messages events: ``type == "content_block_delta"`` with
  ``delta.type == "text_delta"`` carries ``delta.text``; ``input_json_delta`` (tool use),
  ``thinking_delta``, ``signature_delta``, ``ping``, ``message_start`` and the rest are
  ignored;
- the Anthropic SDK's ``MessageStream``: its events are the raw events above plus derived
  ones (``text``, ``input_json``, ...) that repeat them and are ignored. Any other object
  with a ``text_stream`` attribute that is not itself async-iterable: its text stream is used.

The end of a reply is read too: ``cut_reason`` names the SDK signals that the reply is
incomplete (OpenAI chat ``finish_reason`` ``"length"``/``"content_filter"``, Responses
``response.incomplete``/``response.failed``/``error``, Anthropic ``stop_reason``
``"max_tokens"``/``"refusal"``/``"model_context_window_exceeded"``/``"pause_turn"``), and
``text_chunks`` raises ``StreamCut`` there rather than end as if the reply were whole.

Dict-shaped events (raw JSON from an HTTP client, ``model_dump()`` output) work the same
as attribute-shaped ones. The shape is decided per event, so a stream may mix them. An
event of no known shape raises ``StreamShapeError`` rather than being dropped: silently
losing text would change the program that gets sealed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

from ._errors import StreamCut, StreamError
from ._events import events_of

ABSENT: Final = object()
"""What ``get`` returns for a field an event does not have."""

OPENAI_RESPONSES_TEXT_DELTA = "response.output_text.delta"
OPENAI_CHAT_HELPER_TEXT_DELTA = "content.delta"
ANTHROPIC_BLOCK_DELTA = "content_block_delta"
ANTHROPIC_TEXT_DELTA = "text_delta"
CHAT_CUT_REASONS: Final = frozenset({"length", "content_filter"})
"""OpenAI chat ``finish_reason`` values of an incomplete reply."""
RESPONSES_CUT_EVENTS: Final = frozenset({"response.incomplete", "response.failed", "error"})
"""Event types that end an incomplete or failed reply (OpenAI Responses; ``error`` also
Anthropic's)."""
ANTHROPIC_CUT_REASONS: Final = frozenset(
    {"max_tokens", "refusal", "model_context_window_exceeded", "pause_turn"}
)
"""Anthropic ``stop_reason`` values of an incomplete reply (``pause_turn``: the server paused
the turn, to be continued by another request)."""


class StreamShapeError(StreamError, TypeError):
    """A stream event matches none of the shapes ``text_chunks`` knows.

    ``event`` is the offending event; ``index`` its position in the stream (from 0).
    """

    def __init__(self, event: object, index: int) -> None:
        self.event = event
        self.index = index
        shown = repr(event)
        if len(shown) > 200:
            shown = shown[:200] + "…"
        super().__init__(
            f"stream event {index} has no known shape (str, OpenAI chat chunk, OpenAI "
            f"Responses event, Anthropic event): {type(event).__name__} {shown}"
        )


def get(obj: object, name: str) -> Any:
    """``obj.name`` or ``obj[name]`` for dict events; ``ABSENT`` when neither exists."""
    if isinstance(obj, dict):
        return obj.get(name, ABSENT)
    return getattr(obj, name, ABSENT)


def event_text(event: object, index: int = 0) -> str | None:
    """The text one event carries, ``None`` for a known event without text.

    Raises ``StreamShapeError`` for an event of no known shape.
    """
    if isinstance(event, str):
        return event
    choices = get(event, "choices")
    if choices is not ABSENT:
        choice = next((c for c in choices or () if get(c, "index") in (0, ABSENT)), None)
        if choice is None:
            return None
        delta = get(choice, "delta")
        if delta is ABSENT or delta is None:
            return None
        content = get(delta, "content")
        return content if isinstance(content, str) else None
    kind = get(event, "type")
    if isinstance(kind, str):
        if kind in (OPENAI_RESPONSES_TEXT_DELTA, OPENAI_CHAT_HELPER_TEXT_DELTA):
            delta = get(event, "delta")
            return delta if isinstance(delta, str) else None
        if kind == ANTHROPIC_BLOCK_DELTA:
            delta = get(event, "delta")
            if delta is not ABSENT and get(delta, "type") == ANTHROPIC_TEXT_DELTA:
                text = get(delta, "text")
                return text if isinstance(text, str) else None
        return None
    raise StreamShapeError(event, index)


def field(obj: object, name: str) -> Any:
    """``get`` that is None for an absent or None object or field (chains safely)."""
    if obj is None or obj is ABSENT:
        return None
    value = get(obj, name)
    return None if value is ABSENT else value


def cut_reason(event: object) -> str | None:
    """Why ``event`` ends the reply incomplete, or None (it does not, or has no end reason)."""
    if isinstance(event, str):
        return None
    choices = get(event, "choices")
    if choices is not ABSENT:
        for choice in choices or ():
            reason = get(choice, "finish_reason")
            if get(choice, "index") in (0, ABSENT) and reason in CHAT_CUT_REASONS:
                return f"OpenAI finish_reason={reason!r}"
        return None
    kind = get(event, "type")
    if kind == "chunk":  # the OpenAI chat helper stream repeats each raw chunk
        chunk = get(event, "chunk")
        return None if chunk is ABSENT else cut_reason(chunk)
    if kind in RESPONSES_CUT_EVENTS:
        response = field(event, "response")
        details = field(response, "incomplete_details")
        error = field(response, "error") or field(event, "error")
        reason = field(details, "reason") or field(error, "message") or field(event, "message")
        label = "the stream reported an error" if kind == "error" else f"OpenAI {kind}"
        return label + (f" ({reason})" if reason else "")
    if kind == "message_delta":
        delta = get(event, "delta")
        reason = get(delta, "stop_reason") if delta not in (ABSENT, None) else None
        if reason in ANTHROPIC_CUT_REASONS:
            return f"Anthropic stop_reason={reason!r}"
    return None


async def text_chunks(stream: object) -> AsyncIterator[str]:
    """Yield the text of ``stream``, chunk by chunk, skipping events without text.

    ``stream`` is an async iterable (or a sync iterable, read in the event loop) of any
    shape in the module docstring, or an object with ``text_stream``. Empty strings are
    dropped. Cancellation propagates from the underlying stream unchanged; so does any
    exception it raises. Raises ``StreamCut`` at an event saying the reply is incomplete,
    ``StreamShapeError`` for an event of no known shape, and ``TypeError`` when ``stream``
    is not a stream at all (with a hint for an un-entered stream manager or an
    un-awaited coroutine).
    """
    index = 0
    async for event in events_of(stream):
        reason = cut_reason(event)
        if reason is not None:
            raise StreamCut(reason)
        text = event_text(event, index)
        index += 1
        if text:
            yield text
