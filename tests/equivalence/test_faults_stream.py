"""Fault catalogue, stream side: bad or interrupted streams run no effect and lose nothing.

Every test asserts the outcome, that no ``live_read``/``write``/``unknown`` tool ran before
the stream ended (or at all, when nothing was sealed), and the run-end invariants
(``streamed`` checks them). Cancellation tests cancel the caller's scope at each phase of a
run (streaming, sealing, running, finalizing) and assert that the cancellation propagates
and that no task, thread-held call or child process is left behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anyio
import pytest
from waiting import wait_until, wait_until_quiet

from pysolate import RunResult
from pysolate._guest import start_subprocess_guest
from pysolate._guest_api import CallHandler, Guest, GuestFactory, GuestLimits, GuestOutcome
from pysolate.testing import in_process_guest

from .harness import (
    QUIET,
    Tools,
    assert_no_early_effects,
    assert_same,
    build_host,
    children,
    reference,
    streamed,
    with_latency,
)

pytestmark = pytest.mark.anyio

EFFECTS = "workspace.write_text('a.txt', 'changed')\nn = clock.now()\nu = shell.run('rm -rf')\n"
"""Statements with every effect that must not run early (write, live read, unknown)."""

READS = "r = docs.search('alpha')\nf = docs.fetch('beta')\n"
"""Early-eligible reads (pure, immutable read)."""


def assert_nothing_ran(result: RunResult, tools: Tools) -> None:
    """A run that never sealed: no receipt, no unsafe call, the root untouched."""
    assert result.calls == ()
    assert_no_early_effects(tools, result, None)
    assert not result.workspaces.get("workspace") or not result.workspaces["workspace"].changes()


async def test_syntax_error_at_seal_is_rejected_and_runs_nothing() -> None:
    source = READS + EFFECTS + "x = (1,\n"
    result, tools, _ = await streamed(source)
    assert result.status == "rejected"
    assert result.error is not None and result.error.type == "SyntaxError"
    assert result.error.line == 6
    assert_nothing_ran(result, tools)
    assert result.report.physical >= 1  # the early reads did run, and are accounted
    assert_same(result, await reference(source))


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param("r = docs.search('alp", id="mid_token_string"),
        pytest.param("n = clock.now() +", id="mid_expression"),
        pytest.param("workspace.write_text('a.txt', ", id="mid_statement"),
        pytest.param(
            "for x in r:\n    workspace.write_text(x, 'y')\n    n = clock.", id="mid_block"
        ),
    ],
)
async def test_cut_stream_is_rejected_and_runs_nothing(cut: str) -> None:
    """A cut that leaves a syntax error is rejected (one that happens to parse, like
    ``r = docs.sea``, is a different program and runs as such in both runs)."""
    source = READS + EFFECTS + cut
    result, tools, _ = await streamed(source)
    assert result.status == "rejected"
    assert_nothing_ran(result, tools)
    assert_same(result, await reference(source))


async def test_iterator_raising_aborts_and_runs_nothing() -> None:
    host, tools = build_host(QUIET)

    async def chunks() -> AsyncIterator[str]:
        yield READS
        yield EFFECTS
        # The early reads end and their results reach the lane: the fetch's thread has
        # handed its result back to the loop (its early slot is free), then every task waits.
        await wait_until(
            lambda: (
                sum(c.ended is not None for c in tools.docs.calls) == 2
                and not host.thread_statistics().early_busy
            ),
            what="the early reads ended",
        )
        await wait_until_quiet()
        raise ConnectionResetError("model API went away")

    result = await host.run_stream(chunks(), policy=QUIET.policy)
    assert result.status == "aborted"
    assert result.error is not None and result.error.type == "ConnectionResetError"
    assert "model API went away" in result.error.message
    assert_nothing_ran(result, tools)
    reads = [o for o in result.observations if o.layer is None]
    assert len(reads) == 2 and {o.disposition for o in reads} == {"orphaned"}
    # The workspace write may have run on a layer of the branch: dropped with it.
    assert {o.disposition for o in result.observations if o.layer is not None} <= {"discarded"}


@pytest.mark.parametrize(
    ("text", "status"),
    [
        pytest.param("\udcff = 1\n", "rejected", id="lone_surrogate"),
        pytest.param("x = 'a\x00b'\n", "rejected", id="nul_in_literal"),
        pytest.param("x = 1\x00\n", "rejected", id="nul"),
        pytest.param("\ufeffx = 1\n", "rejected", id="bom_first"),
        pytest.param("x = '\ufeff'\n", "ok", id="bom_in_string"),
        pytest.param("x = '\udcff'\n", "rejected", id="surrogate_in_string"),
    ],
)
async def test_odd_characters_behave_as_the_sequential_run(text: str, status: str) -> None:
    """Invalid UTF-8 (as lone surrogates), NUL and BOM: same outcome as the reference;
    where it is rejected nothing ran."""
    source = READS + text + EFFECTS + "x\n"
    result, tools, _ = await streamed(source)
    ref = await reference(source)
    assert (result.status, ref.status) == (status, status), (result.error, ref.error)
    assert_same(result, ref)
    if status == "rejected":
        assert_nothing_ran(result, tools)


async def test_bytes_chunk_aborts_and_runs_nothing() -> None:
    """A stream yielding undecoded bytes (say invalid UTF-8) is not a text stream."""
    host, tools = build_host(QUIET)

    async def chunks() -> AsyncIterator[object]:
        yield READS + EFFECTS
        yield b"x = '\xff'\n"

    result = await host.run_stream(chunks(), policy=QUIET.policy)
    assert result.status == "aborted"
    assert_nothing_ran(result, tools)


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param("s = '''never closed\n", id="string"),
        pytest.param("if n > 0:\n", id="block_header"),
        pytest.param("def f():\n    '''doc\n", id="block_docstring"),
        pytest.param("x = [1,\n 2,\n", id="bracket"),
    ],
)
async def test_unterminated_string_or_block_at_the_end(tail: str) -> None:
    source = READS + EFFECTS + tail
    result, tools, _ = await streamed(source)
    assert result.status == "rejected"
    assert_nothing_ran(result, tools)


async def test_try_whose_except_arrives_late() -> None:
    """Nothing in the ``try`` is accepted before its ``except`` arrives (the statement is
    not complete); then the early read fails, the failure is held, and the program's
    handler catches it at the call; the write in the ``try`` runs only after the seal."""
    head = "try:\n    r = docs.search('bad')\n    workspace.write_text('a.txt', 'in try')\n"
    tail = "except LookupError as e:\n    print('caught', e)\n    n = clock.now()\nn\n"
    host, tools = build_host(QUIET)
    ended: list[float] = []

    async def chunks() -> AsyncIterator[str]:
        yield head
        await anyio.sleep(0.05)
        yield tail
        ended.append(anyio.current_time())

    result = await host.run_stream(chunks(), policy=QUIET.policy)
    ref = await reference(head + tail)
    assert result.status == "ok" and result.value == 1
    assert result.stdout == "caught no results for 'bad'\n"
    assert_same(result, ref)
    assert result.calls[0].lane == "claimed"
    assert_no_early_effects(tools, result, ended[0])


# -- caller cancellation at every phase -------------------------------------------------


def _factories() -> list[object]:
    return [
        pytest.param(in_process_guest, id="in_process"),
        pytest.param(start_subprocess_guest, id="subprocess"),
    ]


class _CancellingGuest:
    """Wraps a Guest; cancels ``scope`` when the program has finished (finalizing phase)."""

    def __init__(self, inner: Guest, scope: anyio.CancelScope) -> None:
        self.inner, self.scope = inner, scope

    async def run(self, source: str, handler: CallHandler) -> GuestOutcome:
        outcome = await self.inner.run(source, handler)
        self.scope.cancel()
        return outcome

    async def aclose(self) -> None:
        await self.inner.aclose()


def _cancelling(factory: GuestFactory, scope: anyio.CancelScope) -> GuestFactory:
    async def start(capabilities: object, limits: GuestLimits) -> Guest:
        return _CancellingGuest(await factory(capabilities, limits), scope)  # type: ignore[arg-type]

    return start


async def _settle_threads() -> None:
    """Let abandoned tool threads and killed children finish before counting them."""
    for _ in range(100):
        if not children():
            return
        await anyio.sleep(0.02)


async def _assert_nothing_left(before: set[asyncio.Task[object]]) -> None:
    await _settle_threads()
    assert children() == []
    left = {t for t in asyncio.all_tasks() if not t.done()} - before
    assert left == set(), left


@pytest.mark.parametrize("factory", _factories())
@pytest.mark.parametrize("phase", ["streaming", "sealing", "running", "finalizing"])
async def test_caller_cancellation_at_every_phase(factory: GuestFactory, phase: str) -> None:
    """Cancelling the caller's scope stops the run at that phase, propagates, leaves no task
    or process, never runs an effect early, and never replays one that ran."""
    before = {t for t in asyncio.all_tasks() if not t.done()}
    conditions = with_latency(QUIET, docs_search=0.3, shell_run=5.0 if phase == "running" else 0.0)
    outer = anyio.CancelScope()
    guest_factory = _cancelling(factory, outer) if phase == "finalizing" else factory
    host, tools = build_host(conditions, guest_factory)
    ended: list[float] = []
    # In "finalizing", this discardable read is still running when the program ends.
    source = READS + "if clock.now() > 99:\n    docs.search('gamma')\n" + EFFECTS + "r\n"

    async def chunks() -> AsyncIterator[str]:
        yield source[:40]
        if phase == "streaming":
            await wait_until(lambda: tools.docs.calls, what="the first early read started")
            outer.cancel()
        yield source[40:]
        await wait_until(lambda: len(tools.docs.calls) >= 2, what="both early reads started")
        ended.append(anyio.current_time())
        if phase == "sealing":
            outer.cancel()

    async def cancel_when_shell_runs() -> None:
        await wait_until(lambda: tools.shell.calls, what="shell.run started")
        outer.cancel()

    result: RunResult | None = None
    with outer:
        async with anyio.create_task_group() as tg:
            if phase == "running":
                tg.start_soon(cancel_when_shell_runs)
            result = await host.run_stream(chunks(), policy=conditions.policy)
            tg.cancel_scope.cancel()
    await _assert_nothing_left(before)
    if phase == "finalizing":
        # The program had finished: the run may complete (then it equals the reference).
        if result is not None:
            assert_same(result, await reference(source, conditions))
    else:
        assert outer.cancelled_caught
        assert result is None
    for cap, method in (("clock", "now"), ("shell", "run")):
        made = getattr(tools, cap).calls_to(method)
        assert all(ended and c.started >= ended[0] for c in made), f"{cap}.{method} ran early"
    shell = tools.shell.calls_to("run")
    if phase in ("streaming", "sealing"):
        assert tools.clock.calls == [] and shell == []
    elif phase == "running":
        assert len(shell) == 1 and shell[0].outcome == "cancelled"  # stopped, not replayed
    else:
        assert len(shell) == 1 and shell[0].outcome == "ok"
    # A sync read's thread the run abandoned still runs its 0.3 s; it ends on its own (an
    # async read that was still "running" now would have outlived its run).
    await wait_until(
        lambda: all(c.outcome != "running" for c in tools.docs.calls), what="the reads ended"
    )
    for call in tools.docs.calls:
        assert call.outcome in ("ok", "cancelled", "error")


# -- stream endings: stalled, cut, no code, misuse (issue 13 item 5) ----------------------


def _chat(content: str | None = None, finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}


CUT_ENDINGS = {
    "openai_length": _chat(None, "length"),
    "openai_content_filter": _chat(None, "content_filter"),
    "responses_incomplete": {
        "type": "response.incomplete",
        "response": {"incomplete_details": {"reason": "max_output_tokens"}},
    },
    "responses_failed": {
        "type": "response.failed",
        "response": {"error": {"message": "server error"}},
    },
    "anthropic_max_tokens": {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}},
    "anthropic_refusal": {"type": "message_delta", "delta": {"stop_reason": "refusal"}},
}
"""An end-of-reply event, in each SDK's shape, that says the reply is incomplete."""

CUT_PROGRAM = "for p in ['a.txt', 'b.txt']:\n    workspace.write_text(p, 'gone')\n"
"""What arrived of ``...    if not clock.now(): break``: it parses, and would write twice."""


@pytest.mark.parametrize("ending", sorted(CUT_ENDINGS))
async def test_reply_cut_by_the_sdk_is_aborted_even_when_it_parses(ending: str) -> None:
    host, tools = build_host(QUIET)
    events = [_chat(CUT_PROGRAM[:20]), _chat(CUT_PROGRAM[20:]), CUT_ENDINGS[ending]]
    result = await host.run_stream(events, policy=QUIET.policy)
    assert result.status == "aborted"
    assert result.error is not None and result.error.type == "StreamCut"
    assert "incomplete" in result.error.message
    assert_nothing_ran(result, tools)
    # The same text ending normally runs: the cut, not the text, is what aborted.
    host, tools = build_host(QUIET)
    normal = await host.run_stream([_chat(CUT_PROGRAM), _chat(None, "stop")], policy=QUIET.policy)
    assert normal.status == "ok"
    assert_same(normal, await reference(CUT_PROGRAM))


@pytest.mark.parametrize("code", ["markdown", "raw"])
async def test_markdown_fence_open_at_the_end_is_a_cut_stream(code: str) -> None:
    host, tools = build_host(QUIET)
    reply = "Plan:\n```python\n" + READS + CUT_PROGRAM
    result = await host.run_stream([reply], code=code, policy=QUIET.policy)
    if code == "markdown":
        assert result.status == "aborted"
        assert result.error is not None and result.error.type == "StreamCut"
        assert "never closed" in result.error.message
        assert_nothing_ran(result, tools)
    else:  # raw: the fence line is a syntax error, rejected like the reference
        assert result.status == "rejected"
        assert_same(result, await reference(reply))


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("Just prose, no code.\n", id="prose"),
        pytest.param("```\nx = 1\n```\n", id="bare_fence"),
        pytest.param("```js\nlet x = 1\n```\n", id="other_language"),
        pytest.param("", id="empty"),
    ],
)
async def test_markdown_without_a_python_block_is_rejected_as_no_code_block(reply: str) -> None:
    host, tools = build_host(QUIET)
    result = await host.run_stream([reply], code="markdown", policy=QUIET.policy)
    assert result.status == "rejected"
    assert result.error is not None and result.error.type == "NoCodeBlock"
    assert_nothing_ran(result, tools)


async def test_a_stalled_stream_ends_at_the_idle_timeout_and_runs_nothing() -> None:
    host, tools = build_host(QUIET)
    closed: list[bool] = []

    async def stalls() -> AsyncIterator[str]:
        try:
            yield READS + EFFECTS
            await anyio.sleep_forever()
            yield "never"
        finally:
            closed.append(True)

    result = await host.run_stream(stalls(), policy=QUIET.policy, idle_timeout=0.05)
    assert result.status == "aborted"
    assert result.error is not None and result.error.type == "StreamTimeout"
    assert "idle_timeout" in result.error.message
    assert_nothing_ran(result, tools)
    assert closed == [True]  # the stream was closed, not left suspended


async def test_a_trickling_stream_ends_at_the_deadline() -> None:
    host, tools = build_host(QUIET)

    async def trickles() -> AsyncIterator[str]:
        yield READS + EFFECTS
        while True:
            await anyio.sleep(0.01)
            yield "#"  # events keep coming: never idle, never complete

    result = await host.run_stream(trickles(), policy=QUIET.policy, idle_timeout=1.0, deadline=0.1)
    assert result.status == "aborted"
    assert result.error is not None and result.error.type == "StreamTimeout"
    assert "deadline" in result.error.message
    assert_nothing_ran(result, tools)


@pytest.mark.parametrize("bad", ["md", "Markdown", "python", "", 1, ("markdown",)])
async def test_unknown_code_format_is_a_value_error_at_the_call(bad: object) -> None:
    host, tools = build_host(QUIET)
    with pytest.raises(ValueError, match="unknown code format"):
        await host.run_stream(["x = 1\n"], code=bad)  # type: ignore[arg-type]
    assert tools.docs.calls == []


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), "5"])
async def test_bad_timeouts_are_value_errors_at_the_call(value: object) -> None:
    host, _ = build_host(QUIET)
    with pytest.raises(ValueError, match="idle_timeout"):
        await host.run_stream(["x = 1\n"], idle_timeout=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="deadline"):
        await host.run_stream(["x = 1\n"], deadline=value)  # type: ignore[arg-type]


class _Manager:
    """The shape of an un-entered SDK stream manager (``client.messages.stream(...)``)."""

    async def __aenter__(self) -> _Manager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize(
    ("stream", "hint"),
    [
        pytest.param("x = 1\n", "single str", id="str"),
        pytest.param(b"x = 1\n", "single bytes", id="bytes"),
        pytest.param(None, "not NoneType", id="none"),
        pytest.param(42, "not int", id="int"),
        pytest.param(_Manager(), "async with", id="stream_manager"),
    ],
)
async def test_not_a_stream_is_a_type_error_at_the_call(stream: object, hint: str) -> None:
    host, _ = build_host(QUIET)
    with pytest.raises(TypeError, match=hint):
        await host.run_stream(stream)  # type: ignore[arg-type]


async def test_an_unawaited_coroutine_is_a_type_error_naming_await() -> None:
    async def create() -> list[str]:
        return ["x = 1\n"]

    host, _ = build_host(QUIET)
    coroutine = create()
    with pytest.raises(TypeError, match="await it"):
        await host.run_stream(coroutine)  # type: ignore[arg-type]
    assert await coroutine == ["x = 1\n"]  # left to its owner, still usable


@pytest.mark.parametrize("make", [list, tuple, iter], ids=["list", "tuple", "generator"])
async def test_sync_iterables_of_str_are_streams(make: object) -> None:
    source = READS + "r\n"
    pieces = [source[i : i + 5] for i in range(0, len(source), 5)]
    host, _ = build_host(QUIET)
    result = await host.run_stream(make(pieces), policy=QUIET.policy)  # type: ignore[operator]
    assert result.status == "ok"
    assert_same(result, await reference(source))
    speculating_source, _ = build_host(QUIET)
    assert_same(await speculating_source.run_source(source, policy=QUIET.policy), result)
