"""text_chunks: every supported SDK event shape yields exactly the text, nothing else.

The fakes mirror the real SDK objects field for field (openai ``ChatCompletionChunk``,
``Response*Event``; anthropic ``RawMessageStreamEvent`` variants and ``MessageStream``),
built from SimpleNamespace (attribute-shaped) or dicts (raw JSON shape).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from types import SimpleNamespace as NS

import pytest

from pysolate.streams import StreamCut, StreamShapeError, event_text, text_chunks

pytestmark = pytest.mark.anyio


async def aiter_of(items: Iterable[object]) -> AsyncIterator[object]:
    for item in items:
        yield item


async def collect(stream: object) -> list[str]:
    return [chunk async for chunk in text_chunks(stream)]


# OpenAI Chat Completions ---------------------------------------------------------------


def chat_chunk(content=None, *, role=None, tool_calls=None, finish=None, index=0, choices=True):
    delta = NS(content=content, role=role, tool_calls=tool_calls, refusal=None, function_call=None)
    choice = NS(delta=delta, finish_reason=finish, index=index, logprobs=None)
    return NS(
        id="chatcmpl-1",
        object="chat.completion.chunk",
        created=0,
        model="gpt-x",
        choices=[choice] if choices else [],
        usage=None if choices else NS(prompt_tokens=3, completion_tokens=5, total_tokens=8),
    )


async def test_openai_chat_chunks_with_role_none_content_and_usage_chunk():
    events = [
        chat_chunk("", role="assistant"),  # first chunk: role only, empty content
        chat_chunk("x = "),
        chat_chunk(None),  # content None
        chat_chunk("docs.search('a')"),
        chat_chunk(None, finish="stop"),
        chat_chunk(choices=False),  # include_usage: empty choices
    ]
    assert await collect(aiter_of(events)) == ["x = ", "docs.search('a')"]


async def test_openai_chat_tool_call_deltas_carry_no_text():
    tool = [NS(index=0, id="call_1", type="function", function=NS(name="f", arguments='{"a"'))]
    events = [chat_chunk(None, tool_calls=tool), chat_chunk("ok")]
    assert await collect(aiter_of(events)) == ["ok"]


async def test_openai_chat_with_n_choices_follows_choice_zero():
    events = [chat_chunk("a", index=0), chat_chunk("B", index=1), chat_chunk("b", index=0)]
    assert await collect(aiter_of(events)) == ["a", "b"]


async def test_openai_chat_dict_shaped_and_null_choices():
    events = [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "a"}}]},
        {"choices": [{"index": 0, "delta": {}}]},  # delta without content
        {"choices": [{"index": 0, "delta": None}]},
        {"choices": None, "usage": {"total_tokens": 1}},
        {"choices": [{"index": 0, "delta": {"content": "b"}}]},
    ]
    assert await collect(aiter_of(events)) == ["a", "b"]


# OpenAI Responses ----------------------------------------------------------------------


def resp(kind: str, **fields: object) -> NS:
    return NS(type=kind, sequence_number=0, **fields)


async def test_openai_responses_text_deltas_only():
    events = [
        resp("response.created", response=NS(id="resp_1", status="in_progress")),
        resp("response.in_progress", response=NS(id="resp_1")),
        resp("response.output_item.added", output_index=0, item=NS(type="message")),
        resp(
            "response.content_part.added",
            item_id="m",
            output_index=0,
            content_index=0,
            part=NS(type="output_text", text=""),
        ),
        resp(
            "response.output_text.delta",
            item_id="m",
            output_index=0,
            content_index=0,
            delta="x = ",
            logprobs=[],
        ),
        resp(
            "response.output_text.delta",
            item_id="m",
            output_index=0,
            content_index=0,
            delta="1\n",
            logprobs=[],
        ),
        resp(
            "response.output_text.done",
            item_id="m",
            output_index=0,
            content_index=0,
            text="x = 1\n",
        ),
        resp(
            "response.function_call_arguments.delta", item_id="f", output_index=1, delta='{"q": 1}'
        ),  # has .delta, is not text
        resp(
            "response.reasoning_summary_text.delta",
            item_id="r",
            output_index=0,
            summary_index=0,
            delta="thinking",
        ),
        resp("response.completed", response=NS(id="resp_1", status="completed")),
    ]
    assert await collect(aiter_of(events)) == ["x = ", "1\n"]


async def test_openai_responses_dict_shaped():
    events = [
        {"type": "response.created", "response": {}},
        {"type": "response.output_text.delta", "delta": "a"},
        {"type": "response.output_text.delta", "delta": "b"},
    ]
    assert await collect(aiter_of(events)) == ["a", "b"]


async def test_openai_chat_helper_stream_content_deltas_only():
    """``client.chat.completions.stream`` yields a ``chunk`` event (the raw chunk) and a
    ``content.delta`` event per text chunk: the text must come out once."""
    events = [
        NS(type="chunk", chunk=chat_chunk("a"), snapshot=NS()),
        NS(type="content.delta", delta="a", snapshot="a", parsed=None),
        NS(type="chunk", chunk=chat_chunk(None, tool_calls=[]), snapshot=NS()),
        NS(
            type="tool_calls.function.arguments.delta",
            name="f",
            index=0,
            arguments="{",
            parsed_arguments=None,
            arguments_delta="{",
        ),
        NS(type="chunk", chunk=chat_chunk("b"), snapshot=NS()),
        NS(type="content.delta", delta="b", snapshot="ab", parsed=None),
        NS(type="content.done", content="ab", parsed=None),
    ]
    assert await collect(aiter_of(events)) == ["a", "b"]


# Anthropic -----------------------------------------------------------------------------


def anthropic_events() -> list[object]:
    return [
        NS(type="message_start", message=NS(id="msg_1", role="assistant", content=[])),
        NS(type="content_block_start", index=0, content_block=NS(type="thinking", thinking="")),
        NS(type="content_block_delta", index=0, delta=NS(type="thinking_delta", thinking="hmm")),
        NS(type="content_block_delta", index=0, delta=NS(type="signature_delta", signature="s")),
        NS(type="content_block_stop", index=0),
        NS(type="ping"),
        NS(type="content_block_start", index=1, content_block=NS(type="text", text="")),
        NS(type="content_block_delta", index=1, delta=NS(type="text_delta", text="y = ")),
        NS(type="content_block_delta", index=1, delta=NS(type="text_delta", text="2")),
        NS(type="content_block_stop", index=1),
        NS(
            type="content_block_start",
            index=2,
            content_block=NS(type="tool_use", id="toolu_1", name="f", input={}),
        ),
        NS(
            type="content_block_delta",
            index=2,
            delta=NS(type="input_json_delta", partial_json='{"a": '),
        ),
        NS(type="content_block_stop", index=2),
        NS(
            type="message_delta",
            delta=NS(stop_reason="tool_use", stop_sequence=None),
            usage=NS(output_tokens=9),
        ),
        NS(type="message_stop"),
    ]


async def test_anthropic_raw_events_text_deltas_only():
    assert await collect(aiter_of(anthropic_events())) == ["y = ", "2"]


async def test_anthropic_dict_shaped_events():
    events = [
        {"type": "message_start", "message": {}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{"},
        },
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    ]
    assert await collect(aiter_of(events)) == ["a"]


class FakeMessageStream:
    """The shape of anthropic's ``AsyncMessageStream``: iterating it gives each raw event
    followed by the events derived from it (``text`` repeats a ``text_delta``);
    ``text_stream`` gives only the text, without the stop reason."""

    def __init__(self, texts: list[str], stop_reason: str = "end_turn") -> None:
        self._texts = texts
        self._stop = stop_reason

    async def __aiter__(self):
        for text in self._texts:
            yield {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            }
            yield {"type": "text", "text": text, "snapshot": text}
        yield {"type": "message_delta", "delta": {"stop_reason": self._stop}}

    @property
    def text_stream(self) -> AsyncIterator[str]:
        raise AssertionError("the events carry the stop reason; text_stream does not")


class TextStreamOnly:
    """An object that is not iterable but has ``text_stream``."""

    def __init__(self, texts: list[str]) -> None:
        self.text_stream = aiter_of(texts)


async def test_message_stream_events_are_read_once_each():
    assert await collect(FakeMessageStream(["a", "", "b"])) == ["a", "b"]


async def test_message_stream_cut_by_max_tokens_raises_stream_cut():
    with pytest.raises(StreamCut, match="max_tokens"):
        await collect(FakeMessageStream(["a"], stop_reason="max_tokens"))


class FakeSyncMessageStream:
    """The shape of anthropic's sync ``MessageStream``: iterable itself, with a ``text_stream``
    that would lose the stop reason (and a tool call's input)."""

    def __iter__(self):
        yield {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "a"},
        }
        yield {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}

    @property
    def text_stream(self) -> Iterator[str]:
        raise AssertionError("the events carry the stop reason; text_stream does not")


async def test_a_sync_message_stream_is_iterated_itself_not_its_text_stream():
    with pytest.raises(StreamCut, match="max_tokens"):
        await collect(FakeSyncMessageStream())


async def test_object_with_only_text_stream_uses_it():
    assert await collect(TextStreamOnly(["a", "", "b"])) == ["a", "b"]


# Plain text and errors -----------------------------------------------------------------


async def test_plain_strings_pass_through_and_empties_drop():
    assert await collect(aiter_of(["a", "", "b\n"])) == ["a", "b\n"]


async def test_mixed_shapes_in_one_stream():
    events = ["a", chat_chunk("b"), resp("response.output_text.delta", delta="c")]
    assert await collect(aiter_of(events)) == ["a", "b", "c"]


async def test_unknown_event_shape_is_an_error_not_silently_dropped():
    with pytest.raises(StreamShapeError, match="stream event 1 has no known shape") as info:
        await collect(aiter_of(["a", 42]))
    assert info.value.index == 1 and info.value.event == 42
    assert isinstance(info.value, TypeError)


async def test_sync_iterable_of_str_is_read():
    assert await collect(["a", "", "b"]) == ["a", "b"]


@pytest.mark.parametrize("stream", [42, None, "text", b"text"])
async def test_not_a_stream_is_a_type_error(stream: object):
    with pytest.raises(TypeError, match="expected"):
        await collect(stream)


async def test_errors_from_the_underlying_stream_propagate_unchanged():
    async def failing() -> AsyncIterator[str]:
        yield "a"
        raise ConnectionResetError("network")

    seen: list[str] = []
    with pytest.raises(ConnectionResetError, match="network"):
        async for chunk in text_chunks(failing()):
            seen.append(chunk)
    assert seen == ["a"]


def test_event_text_of_single_events():
    assert event_text("x") == "x"
    assert event_text(chat_chunk(None)) is None
    assert event_text(NS(type="ping")) is None
    assert event_text({"type": "response.output_text.delta", "delta": None}) is None
    with pytest.raises(StreamShapeError):
        event_text(NS(foo=1))
