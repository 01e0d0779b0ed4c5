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
- an object with a ``text_stream`` attribute (the Anthropic SDK's ``MessageStream``): its
  text stream is used.

Dict-shaped events (raw JSON from an HTTP client, ``model_dump()`` output) work the same
as attribute-shaped ones. The shape is decided per event, so a stream may mix them. An
event of no known shape raises ``StreamShapeError`` rather than being dropped: silently
losing text would change the program that gets sealed.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from .._exceptions import PysolateError

_ABSENT = object()

OPENAI_RESPONSES_TEXT_DELTA = "response.output_text.delta"
OPENAI_CHAT_HELPER_TEXT_DELTA = "content.delta"
ANTHROPIC_BLOCK_DELTA = "content_block_delta"
ANTHROPIC_TEXT_DELTA = "text_delta"


class StreamShapeError(PysolateError, TypeError):
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


def _get(obj: object, name: str) -> Any:
    """``obj.name`` or ``obj[name]`` for dict events; ``_ABSENT`` when neither exists."""
    if isinstance(obj, dict):
        return obj.get(name, _ABSENT)
    return getattr(obj, name, _ABSENT)


def event_text(event: object, index: int = 0) -> str | None:
    """The text one event carries, ``None`` for a known event without text.

    Raises ``StreamShapeError`` for an event of no known shape.
    """
    if isinstance(event, str):
        return event
    choices = _get(event, "choices")
    if choices is not _ABSENT:
        choice = next((c for c in choices or () if _get(c, "index") in (0, _ABSENT)), None)
        if choice is None:
            return None
        delta = _get(choice, "delta")
        if delta is _ABSENT or delta is None:
            return None
        content = _get(delta, "content")
        return content if isinstance(content, str) else None
    kind = _get(event, "type")
    if isinstance(kind, str):
        if kind in (OPENAI_RESPONSES_TEXT_DELTA, OPENAI_CHAT_HELPER_TEXT_DELTA):
            delta = _get(event, "delta")
            return delta if isinstance(delta, str) else None
        if kind == ANTHROPIC_BLOCK_DELTA:
            delta = _get(event, "delta")
            if delta is not _ABSENT and _get(delta, "type") == ANTHROPIC_TEXT_DELTA:
                text = _get(delta, "text")
                return text if isinstance(text, str) else None
        return None
    raise StreamShapeError(event, index)


async def text_chunks(stream: object) -> AsyncIterator[str]:
    """Yield the text of ``stream``, chunk by chunk, skipping events without text.

    ``stream`` is an async iterable of any shape in the module docstring, or an object
    with ``text_stream``. Empty strings are dropped. Cancellation propagates from the
    underlying stream unchanged; so does any exception it raises. Raises
    ``StreamShapeError`` for an event of no known shape and ``TypeError`` when
    ``stream`` is not async-iterable at all.
    """
    text_stream = getattr(stream, "text_stream", None)
    if text_stream is not None:
        stream = text_stream
    if not isinstance(stream, AsyncIterable):
        raise TypeError(
            f"expected an async iterable of chunks or an object with .text_stream, "
            f"not {type(stream).__name__}"
        )
    index = 0
    async for event in stream:
        text = event_text(event, index)
        index += 1
        if text:
            yield text
