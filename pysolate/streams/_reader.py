"""``CodeReader``: the program in a model's stream, as it arrives, and when it is complete.

The one place that decides what of a stream is the program (the code format), when the
program is complete, and when a stream gives no program to run:

* **complete**: ``"raw"`` at the end of the stream; markdown at the selected block's closing
  fence; a tool call when the SDK says the call's arguments are complete. The run seals
  there, so prose or other calls after the code do not delay the result;
* **cut** (``StreamCut``, the run is ``aborted``): the SDK says the reply is incomplete
  (``cut_reason``) before the program is complete, or the markdown block never closed;
* **stalled** (``StreamTimeout``, ``aborted``): no event for ``idle_timeout`` seconds of
  waiting for one (the model's silence: time the Host spends between reads, parsing and
  discovering what arrived, is not the model's), or the program not complete ``deadline``
  seconds after reading started;
* **no program** (``NoCodeBlock``, ``ToolArgumentsError``; ``rejected``).

What is left of the stream after the program is complete is read and dropped by ``drain``
while the program runs (so the SDK's response is consumed normally and a ``record``
wrapper keeps it). An error or a cut in that rest changes nothing: the program was already
complete. When the run ends the rest is closed if it has not ended by then, except after a
tool call: a tool call is answered with the whole reply in hand (every SDK wants the
assistant's turn back, with the id of each call, before the result), so the rest of that
reply is read to its end (each event within ``idle_timeout``, all by the ``deadline``)
and the SDK's own accumulated message (``get_final_completion()``,
``get_final_message()``) is complete when the run returns. After the call the rest is the
reply's end events, sent at once.

Misuse is refused when the reader is made, before any run starts: a ``str`` or ``bytes``
passed as the stream, an un-awaited coroutine, an un-entered SDK stream manager, an object
that is not iterable (``TypeError``), and an unknown code format or bad timeout
(``ValueError``).
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Final

import anyio
import anyio.abc
import anyio.lowlevel

from occurrences import FenceExtractor

from .._backend import loop_clock
from ._adapters import cut_reason, event_text
from ._errors import NoCodeBlock, StreamCut, StreamError, StreamTimeout, ToolArgumentsError
from ._events import events_of
from ._formats import Code, Format, MarkdownCode, ToolCallCode, code_format
from ._json_argument import ArgumentDecoder
from ._tool_calls import ToolCallSelector

DEFAULT_IDLE_TIMEOUT: Final = 120.0
"""Seconds ``run_stream`` waits for the next event before the stream counts as stalled. Any
event counts (a keep-alive ping too); models pause for a few seconds, not minutes, between
events, while a dead connection without a read timeout would wait forever. Only waiting
counts: the Host's own work between two reads never does."""

DEFAULT_DEADLINE: Final = 1800.0
"""Seconds from the start of reading by which the program must be complete: bounds a stream
that trickles forever. Half an hour is far beyond any model's time for one reply."""


class CodedStream(AsyncIterator[str]):
    """An async iterator of chunks that knows its code format (``code``).

    ``run_stream`` uses ``code`` when it is not given ``code=``; ``replay``, ``record`` and
    the pytest plugin's ``pysolate_replay`` return one, so a recording runs the way the
    live stream did.
    """

    __slots__ = ("_chunks", "code")

    def __init__(self, chunks: AsyncIterator[str], code: Code) -> None:
        self._chunks = chunks
        self.code: Format = code_format(code)

    def __aiter__(self) -> CodedStream:
        return self

    async def __anext__(self) -> str:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        """Close the underlying iterator (if it can be closed)."""
        closer = getattr(self._chunks, "aclose", None)
        if closer is not None:
            await closer()


def _timeout(value: object, name: str) -> float:
    if value is None:
        return math.inf
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not value > 0
        or math.isnan(value)
    ):
        raise ValueError(f"{name} must be a positive number of seconds or None, not {value!r}")
    return float(value)


class CodeReader:
    """Reads the program of one stream in one code format; see the module docstring.

    Made at the call (it raises ``TypeError``/``ValueError`` for misuse then); ``read``
    hands out program text until the program is complete; ``drain`` reads the rest;
    ``aclose`` ends everything. One reader, one stream, one run.
    """

    __slots__ = (
        "_clock",
        "_closed",
        "_deadline",
        "_decoder",
        "_drain_scope",
        "_draining",
        "_events",
        "_expired",
        "_extractor",
        "_idle",
        "_index",
        "_last",
        "_selector",
        "_source",
        "_started",
        "_waiting",
        "_watched",
        "code",
        "complete",
    )

    def __init__(
        self,
        stream: object,
        code: Code | None = None,
        *,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        deadline: float | None = DEFAULT_DEADLINE,
    ) -> None:
        if code is None:
            code = stream.code if isinstance(stream, CodedStream) else "raw"
        self.code: Format = code_format(code)
        self._idle = _timeout(idle_timeout, "idle_timeout")
        self._deadline = _timeout(deadline, "deadline")
        self._source = stream
        self._events = events_of(stream)
        self._index = 0
        self._started: float | None = None
        # the running loop's, once reading starts (``_backend.loop_clock``)
        self._clock: Callable[[], float] = anyio.current_time
        self._last = 0.0  # when the current wait for an event began (meaningful while ``_waiting``)
        self._waiting = False  # a read is waiting for the stream's next event
        self._watched = False  # inside ``watched``: the timeouts are being enforced
        self._expired: str | None = None  # why the watchdog ended the reads
        self._extractor: FenceExtractor | None = None
        self._selector: ToolCallSelector | None = None
        self._decoder: ArgumentDecoder | None = None
        if isinstance(self.code, MarkdownCode):
            self._extractor = FenceExtractor("markdown", bare=self.code.bare, block=self.code.block)
        elif isinstance(self.code, ToolCallCode):
            self._selector = ToolCallSelector(self.code.tool)
            self._decoder = ArgumentDecoder(self.code.argument)
        self.complete = False  # the program is whole: read() returns None from now on
        self._drain_scope = anyio.CancelScope()
        self._draining = False
        self._closed = False

    async def read(self) -> str | None:
        """The next piece of program text (maybe ''), or None once the program is complete.

        Raises ``StreamCut``, ``StreamTimeout``, ``NoCodeBlock`` or ``ToolArgumentsError``
        as the module docstring says, and whatever the stream itself raises. Cancellation
        propagates (the stream is then left to ``aclose``).
        """
        if self.complete:
            return None
        if self._started is None:
            self._clock = loop_clock()
            self._started = self._last = self._clock()
        event = await self._next()
        if event is _END:
            return self._finish()
        reason = cut_reason(event)
        if reason is not None:
            raise StreamCut(reason)
        index, self._index = self._index, self._index + 1
        if self._selector is not None:
            code = self._tool_text(event, index)
            if self._selector.ended:
                self.complete = True
                assert self._decoder is not None
                try:
                    self._decoder.close()
                except ToolArgumentsError as exc:
                    raise await self._cut_instead(exc) from None
            return code
        text = event_text(event, index) or ""
        if self._extractor is None:
            return text
        code = self._extractor.feed(text)
        if self._extractor.complete:
            self.complete = True
        return code

    async def _next(self) -> object:
        if not self._watched:
            return await self._next_timed()
        # The model is silent only while a read waits: the watchdog counts from here, and
        # not at all between reads, whatever the Host does with what it read meanwhile.
        self._last = self._clock()
        self._waiting = True
        try:
            return await self._events.__anext__()
        except StopAsyncIteration:
            return _END
        finally:
            self._waiting = False

    async def _next_timed(self) -> object:
        """The next event under a timeout of its own (a read outside ``watched``)."""
        assert self._started is not None
        wait = min(self._idle, self._started + self._deadline - self._clock())
        with anyio.move_on_after(wait):
            try:
                return await self._events.__anext__()
            except StopAsyncIteration:
                return _END
        raise StreamTimeout(self._expiry(idle=wait == self._idle))

    def _expiry(self, *, idle: bool) -> str:
        if idle:
            return f"the stream sent nothing for {self._idle:g} s (idle_timeout); nothing was run"
        return f"the program was not complete within the deadline of {self._deadline:g} s; nothing was run"

    @contextlib.asynccontextmanager
    async def watched(self, task_group: anyio.abc.TaskGroup | None = None) -> AsyncIterator[None]:
        """Enforce ``idle_timeout`` and ``deadline`` on the reads inside: a read that waits
        past either raises ``StreamTimeout`` out of this block. (A read outside it has a
        timeout of its own.)

        One watchdog per stream instead of a timeout per read: a read only notes when it
        began waiting and that it is waiting (a cancel scope per chunk cost about 5 µs of
        the reader's 7.5 µs per chunk, measured), and the watchdog, waking when the first
        bound could be due, looks again and sleeps on if the wait it timed is over. The
        idle bound counts only a read's own wait, as a timeout per read did: time the Host
        spends between reads (discovering a long chunk) is never the model's silence. The
        stream is cancelled when a bound passes, as a timeout per read cancelled it.

        ``task_group``: where the watchdog runs; the block then ends without waiting for
        it (it returns on its next turn), so the end of the stream costs the caller no
        trip round the event loop. Without one it runs in a task group of its own that
        the block's end waits for.
        """
        if self._watched:
            raise RuntimeError("CodeReader.watched() is already active")
        self._watched = True
        if self._started is None:
            self._clock = loop_clock()
            self._started = self._last = self._clock()
        try:
            if self._idle == math.inf and self._deadline == math.inf:
                yield
                return
            # The watchdog is told to return, not cancelled: anyio keeps a cancelled
            # task's ``CancelledError`` in a reference cycle with its traceback, and with
            # it the stream, which then waits for a full collection.
            done = anyio.Event()
            reads = anyio.CancelScope()
            error: BaseException | None = None
            async with contextlib.AsyncExitStack() as own:
                group = (
                    task_group
                    if task_group is not None
                    else await own.enter_async_context(anyio.create_task_group())
                )
                group.start_soon(self._watch, reads, done)
                try:
                    with reads:
                        yield
                except BaseException as exc:  # re-raised below, not wrapped in an ExceptionGroup
                    error = exc
                done.set()
            if error is not None:
                raise error
            if self._expired is not None:
                raise StreamTimeout(self._expired)
        finally:
            self._watched = False

    async def _watch(self, reads: anyio.CancelScope, done: anyio.Event) -> None:
        assert self._started is not None
        end = self._started + self._deadline
        while (now := self._clock()) < (
            due := min(end, (self._last if self._waiting else now) + self._idle)
        ):
            with anyio.move_on_after(
                due - now
            ):  # a wait begun since the last look moves ``due`` on
                await done.wait()
            if done.is_set():
                return
        self._expired = self._expiry(idle=now < end)
        reads.cancel()

    def _tool_text(self, event: object, index: int) -> str:
        selector, decoder = self._selector, self._decoder
        assert selector is not None and decoder is not None
        return decoder.feed(selector.feed(event, index))

    async def _cut_instead(self, error: ToolArgumentsError) -> StreamError:
        """The call ended with arguments that do not decode: a cut reason later in the
        stream (Anthropic ends the block before saying ``max_tokens``) explains them."""
        while (event := await self._next()) is not _END:
            reason = cut_reason(event)
            if reason is not None:
                return StreamCut(reason)
        return error

    def _finish(self) -> str:
        """The end of the stream before the program was complete: the rest, or why there is none."""
        self.complete = True
        if self._selector is not None:
            assert self._decoder is not None
            if not self._selector.found:
                raise NoCodeBlock(
                    f"the stream contained no call of tool {self._selector.tool!r}; nothing was run"
                )
            return self._decoder.close()
        if self._extractor is None:
            return ""
        rest = self._extractor.close()
        if not self._extractor.found:
            block = self.code.block if isinstance(self.code, MarkdownCode) else 0
            which = (
                "no ```python block"
                if block in (0, "last")
                else f"no ```python block number {block} (from 0)"
            )
            raise NoCodeBlock(f"the stream contained {which}; nothing was run")
        if self._extractor.cut:
            raise StreamCut("the ```python block was never closed")
        return rest

    async def drain(self) -> None:
        """Read and drop the rest of the stream until it ends, stalls (``idle_timeout``,
        ``deadline``) or ``aclose`` stops it; then close it.

        Errors in the rest are ignored: the program was complete before them.
        """
        self._draining = True
        assert self._started is not None
        end = self._started + self._deadline
        try:
            with self._drain_scope:
                while True:
                    with anyio.move_on_after(min(self._idle, end - self._clock())):
                        try:
                            await self._events.__anext__()
                        except StopAsyncIteration:
                            return
                        continue
                    return  # the rest stalled: closed, as a stalled program would be
        except Exception:
            pass
        finally:
            await self._close()

    async def aclose(self) -> None:
        """Close the stream (the SDK's response too), now or, when the rest of a tool
        call's reply is being read, once it has ended (``drain`` closes it; the module
        docstring says why). Safe to call twice."""
        if self._draining and isinstance(self.code, ToolCallCode):
            return
        self._drain_scope.cancel()
        if not self._draining:
            await self._close()

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await _close(self._events)
            if self._source is not self._events and isinstance(self._source, AsyncIterable):
                await _close(self._source)  # an SDK stream: release its HTTP response


async def _close(target: object) -> None:
    """``target.aclose()`` or ``target.close()`` (awaited if it is a coroutine), if it has one.

    An error while closing is dropped: the stream is finished with either way, and closing
    it must not change the run's result.
    """
    closer = getattr(target, "aclose", None) or getattr(target, "close", None)
    if not callable(closer):
        return
    try:
        result = closer()
        if inspect.isawaitable(result):
            await result
    except Exception:
        pass


class _End:
    """The stream ended (a sentinel: ``None`` may be an event)."""


_END: Final = _End()


async def decode_program(chunks: AsyncIterable[object] | Iterable[object], code: Code) -> str:
    """The whole program of a stream in format ``code``, read to the point it is complete.

    For callers that wait for the whole program instead of streaming it (a baseline, a
    log); raises what ``CodeReader.read`` raises.
    """
    reader = CodeReader(chunks, code, idle_timeout=None, deadline=None)
    parts: list[str] = []
    try:
        while (text := await reader.read()) is not None:
            parts.append(text)
    finally:
        await reader.aclose()
    return "".join(parts)
