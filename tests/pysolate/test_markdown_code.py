"""Markdown replies: the run seals at the selected block's closing fence.

Properties: prose after the block does not delay the result (a stream that never sends
another event after the fence still gives the result, and is closed); what comes after the
fence (more prose, a cut, an error) changes nothing; ``MarkdownCode(block=n)`` runs the
n-th Python block (from 0), ``block="last"`` the last one, each equal to ``run_source`` of
that block; a block number that is not there is ``NoCodeBlock``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from occurrences import Effect
from pysolate import Host
from pysolate.streams import MarkdownCode
from pysolate.testing import Script, ScriptedTool, in_process_guest, observable, scripted_tool

pytestmark = pytest.mark.anyio

BLOCKS = [
    "a = docs.search('first')\na\n",
    "b = docs.search('second')\nb\n",
    "c = docs.search('third')\nc\n",
]
REPLY = (
    "Plan:\n```python\n" + BLOCKS[0] + "```\nThen:\n```js\nnot python\n```\n"
    "```py\n" + BLOCKS[1] + "```\nAnd:\n```python3\n" + BLOCKS[2] + "```\nDone.\n"
)


def make_host() -> tuple[Host, ScriptedTool]:
    docs = scripted_tool(
        search=Script(lambda q: [f"hit:{q}"], effect=Effect.PURE, version="1", latency=0.01)
    )
    host = Host(guest_factory=in_process_guest)
    host.register("docs", docs)
    return host, docs


async def reference(source: str) -> dict[str, object]:
    return observable(await make_host()[0].run_source(source, speculate=False))


async def test_trailing_prose_does_not_delay_the_result_and_the_stream_is_closed() -> None:
    host, _ = make_host()
    after_fence = anyio.Event()  # never set: the model "keeps writing" forever
    state: list[str] = []

    async def reply() -> AsyncIterator[str]:
        try:
            yield "Here:\n```python\n" + BLOCKS[0]
            yield "```\nSome explanation"
            state.append("prose")
            await after_fence.wait()
            yield " that never ends"
        finally:
            state.append("closed")

    with anyio.fail_after(30):  # a hang guard only; the run ends without the rest
        result = await host.run_stream(reply(), code="markdown", idle_timeout=None)
    assert result.status == "ok" and result.value == ["hit:first"]
    assert observable(result) == await reference(BLOCKS[0])
    assert state == ["prose", "closed"]  # the rest was read while it ran, then closed


@pytest.mark.parametrize(
    "after",
    [
        pytest.param(
            {"choices": [{"index": 0, "delta": {"content": None}, "finish_reason": "length"}]},
            id="cut",
        ),
        pytest.param(ConnectionResetError("gone"), id="error"),
    ],
)
async def test_a_cut_or_error_after_the_closing_fence_changes_nothing(after: object) -> None:
    host, _ = make_host()

    async def reply() -> AsyncIterator[object]:
        yield "```python\n" + BLOCKS[0] + "```\n"
        await anyio.sleep(0.01)
        yield "trailing prose"
        if isinstance(after, Exception):
            raise after
        yield after

    result = await host.run_stream(reply(), code="markdown")
    assert result.status == "ok"
    assert observable(result) == await reference(BLOCKS[0])


@pytest.mark.parametrize(("block", "expected"), [(0, 0), (1, 1), (2, 2), ("last", 2)])
async def test_markdown_code_selects_a_block(block: int | str, expected: int) -> None:
    host, _ = make_host()
    pieces = [REPLY[i : i + 9] for i in range(0, len(REPLY), 9)]
    result = await host.run_stream(pieces, code=MarkdownCode(block=block))  # type: ignore[arg-type]
    assert result.status == "ok", result.error
    assert observable(result) == await reference(BLOCKS[expected])


async def test_a_block_number_that_is_not_there_is_no_code_block() -> None:
    host, docs = make_host()
    result = await host.run_stream([REPLY], code=MarkdownCode(block=3))
    assert result.status == "rejected"
    assert (
        result.error is not None
        and result.error.type == "NoCodeBlock"
        and "number 3" in result.error.message
    )
    assert docs.calls == []


async def test_the_last_block_open_at_the_end_is_a_cut() -> None:
    host, _ = make_host()
    result = await host.run_stream([REPLY + "```python\nd = 1\n"], code=MarkdownCode(block="last"))
    assert (
        result.status == "aborted" and result.error is not None and result.error.type == "StreamCut"
    )


async def test_bare_fences_are_python_when_asked() -> None:
    host, _ = make_host()
    result = await host.run_stream(["```\n" + BLOCKS[0] + "```\n"], code=MarkdownCode(bare=True))
    assert result.status == "ok" and result.value == ["hit:first"]


@pytest.mark.parametrize("block", [-1, 1.5, True, "first"])
def test_bad_block_is_a_value_error(block: object) -> None:
    with pytest.raises(ValueError, match="index from 0 or 'last'"):
        MarkdownCode(block=block)  # type: ignore[arg-type]
