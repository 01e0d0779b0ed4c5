"""``ToolCallSelector``: the JSON argument deltas of one tool call, from any SDK's stream.

Duck-typed on event shapes like ``text_chunks`` (dicts work as well as objects); the call
is the *first* call of the named tool, and its deltas are told apart from other calls'
the way each SDK keys them:

- OpenAI Chat Completions chunks: ``choices[0].delta.tool_calls[i]``; the call's first delta
  carries ``function.name``, every delta its ``index``. The call has ended when a delta of
  another index arrives (the API streams calls one after another) or the choice gets a
  ``finish_reason``;
- the OpenAI SDK's chat helper stream: ``tool_calls.function.arguments.delta`` events
  (``name``, ``index``, ``arguments_delta``), ended by ``...arguments.done``; its ``chunk``
  events repeat the raw chunks and are not read for arguments;
- OpenAI Responses events (raw or the SDK's helper stream): ``response.output_item.added``
  with a ``function_call`` item names the call; ``response.function_call_arguments.delta``
  events of its ``output_index`` (and ``item_id``, when both carry one) are its deltas;
  ``...arguments.done`` or ``response.output_item.done`` end it;
- Anthropic Messages events (raw or the SDK's ``MessageStream``): ``content_block_start``
  with a ``tool_use`` block names the call; ``content_block_delta`` events of its ``index``
  whose delta is an ``input_json_delta`` carry ``partial_json``; ``content_block_stop``
  ends it. The helper's derived ``input_json`` events repeat those deltas and are skipped;
- ``str`` chunks are the JSON text itself (a recording of the deltas); the call ends with
  the stream. Text that cannot start a JSON object (a model's prose, an SDK's
  ``text_stream``) raises ``ToolArgumentsError`` at its first chunk, saying so.

An event of no known shape raises ``StreamShapeError``, as in ``text_chunks``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ._adapters import ABSENT, StreamShapeError, field, get
from ._errors import ToolArgumentsError
from ._events import events_of

CHAT_HELPER_ARGS_DELTA = "tool_calls.function.arguments.delta"
CHAT_HELPER_ARGS_DONE = "tool_calls.function.arguments.done"
RESPONSES_ITEM_ADDED = "response.output_item.added"
RESPONSES_ITEM_DONE = "response.output_item.done"
RESPONSES_ARGS_DELTA = "response.function_call_arguments.delta"
RESPONSES_ARGS_DONE = "response.function_call_arguments.done"
ANTHROPIC_BLOCK_START = "content_block_start"
ANTHROPIC_BLOCK_DELTA = "content_block_delta"
ANTHROPIC_BLOCK_STOP = "content_block_stop"


class ToolCallSelector:
    """Feed every event of a stream; get the chosen call's argument text out.

    ``found``: the call has been seen (by name); ``ended``: the SDK has said its
    arguments are complete. Events after the end give nothing.
    """

    __slots__ = ("_item", "_json", "_key", "ended", "found", "tool")

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self._key: tuple[str, object] | None = None  # (shape, the call's index in that shape)
        self._item: object = None  # the Responses call's item id, when it has one
        self._json = False  # str chunks: the text has been seen to start a JSON object
        self.found = False
        self.ended = False

    def feed(self, event: object, index: int) -> str:
        """The argument text ``event`` adds to the chosen call ('' if none)."""
        if self.ended:
            return ""
        if isinstance(event, str):
            if not self._json and (head := event.lstrip()):
                if head[0] != "{":
                    raise ToolArgumentsError(
                        f"ToolCallCode({self.tool!r}) reads that tool call's JSON arguments, but the "
                        f"stream is text ({head[:40]!r}): pass the SDK's stream of events itself (not "
                        "its text_stream or text_chunks(...)), or code='raw' or 'markdown' for a "
                        "program in the text; nothing was run"
                    )
                self._json = True
            self.found = True
            return event
        choices = get(event, "choices")
        if choices is not ABSENT:
            return self._chat(choices)
        kind = get(event, "type")
        if not isinstance(kind, str):
            raise StreamShapeError(event, index)
        if kind == CHAT_HELPER_ARGS_DELTA:
            if self._claim("chat-helper", field(event, "index"), field(event, "name")):
                return _text(field(event, "arguments_delta"))
        elif kind == CHAT_HELPER_ARGS_DONE:
            self._end_if("chat-helper", field(event, "index"))
        elif kind == RESPONSES_ITEM_ADDED:
            item = field(event, "item")
            if field(item, "type") == "function_call" and self._claim(
                "responses", field(event, "output_index"), field(item, "name")
            ):
                self._item = field(item, "id")
        elif kind == RESPONSES_ARGS_DELTA:
            if self._responses_match(event):
                return _text(get(event, "delta"))
        elif kind in (RESPONSES_ARGS_DONE, RESPONSES_ITEM_DONE):
            if self._responses_match(event):
                self.ended = True
        elif kind == ANTHROPIC_BLOCK_START:
            block = field(event, "content_block")
            if field(block, "type") == "tool_use":
                self._claim("anthropic", field(event, "index"), field(block, "name"))
        elif kind == ANTHROPIC_BLOCK_DELTA:
            delta = field(event, "delta")
            if (
                self._key == ("anthropic", field(event, "index"))
                and field(delta, "type") == "input_json_delta"
            ):
                return _text(field(delta, "partial_json"))
        elif kind == ANTHROPIC_BLOCK_STOP:
            self._end_if("anthropic", field(event, "index"))
        return ""

    def _claim(self, shape: str, key: object, name: object) -> bool:
        """Whether this delta belongs to the chosen call, choosing it on its first sight."""
        if self._key is None and name == self.tool:
            self._key = (shape, key)
            self.found = True
        return self._key == (shape, key)

    def _end_if(self, shape: str, key: object) -> None:
        if self._key == (shape, key):
            self.ended = True

    def _responses_match(self, event: object) -> bool:
        if self._key != ("responses", field(event, "output_index")):
            return False
        item = field(event, "item_id") or field(field(event, "item"), "id")
        return self._item is None or item is None or item == self._item

    def _chat(self, choices: Any) -> str:
        choice = next((c for c in choices or () if get(c, "index") in (0, ABSENT)), None)
        pieces: list[str] = []
        for call in field(field(choice, "delta"), "tool_calls") or ():
            at = field(call, "index")
            if self._key is not None and self._key != ("chat", at):
                if self._key[0] == "chat" and at is not None:
                    self.ended = True  # the next call started: ours is complete
                    break
                continue
            if self._claim("chat", at, field(field(call, "function"), "name")):
                pieces.append(_text(field(field(call, "function"), "arguments")))
        if self._key is not None and field(choice, "finish_reason") is not None:
            self.ended = True
        return "".join(pieces)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


async def tool_arguments(stream: object, tool: str) -> AsyncIterator[str]:
    """Yield the JSON argument text of the first call of ``tool`` in ``stream``, delta by delta.

    Stops when the SDK says the call's arguments are complete (the rest of the stream is
    not read). Raises ``StreamShapeError`` for an event of no known shape; cancellation
    and the stream's own exceptions propagate unchanged. Decode the text with
    ``json.loads`` or, incrementally, ``run_stream(code=ToolCallCode(tool))``.
    """
    selector = ToolCallSelector(tool)
    index = 0
    async for event in events_of(stream):
        text = selector.feed(event, index)
        index += 1
        if text:
            yield text
        if selector.ended:
            return
