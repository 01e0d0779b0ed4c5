"""Any stream a caller may pass, as one async iterator of events; misuse refused at once.

Shared by the reader and the SDK adapters (``text_chunks``, ``tool_arguments``): each
accepts the same shapes and refuses the same mistakes with the same hint. The mistakes
are the ones a first try makes, each named with what to do instead: a whole reply where
its stream was meant (``create(...)`` without ``stream=True``), an un-awaited coroutine,
an un-entered stream manager, a single ``str``.

``blocking_events`` is the sync API's (``pysolate.SyncHost``) way in: a sync stream whose
``next()`` blocks on the network (``openai.Stream``, the sync ``MessageStream``) is read
in worker threads, never in the event loop.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from typing import Final

import anyio.lowlevel
import anyio.to_thread

_COMPLETE_REPLIES: Final = {
    ("object", "chat.completion"): (
        "ChatCompletion",
        "pass stream=True to client.chat.completions.create(...), or use client.chat.completions.stream(...)",
    ),
    ("object", "response"): (
        "Response",
        "pass stream=True to client.responses.create(...), or use client.responses.stream(...)",
    ),
    ("type", "message"): (
        "Message",
        "pass stream=True to client.messages.create(...), or use client.messages.stream(...)",
    ),
}
"""The whole replies of the SDKs (attribute or dict form), by the field that names them."""


def _field(obj: object, name: str) -> object:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _whole_reply(stream: object) -> str | None:
    """Why ``stream`` is an SDK's complete reply (or another pydantic model) rather than
    its stream, or None."""
    if isinstance(stream, AsyncIterable | Iterator):
        return None
    for (name, value), (what, fix) in _COMPLETE_REPLIES.items():
        if _field(stream, name) == value:
            return (
                f"expected a stream, got a complete {what} (the whole reply, not its stream): {fix}"
            )
    if hasattr(type(stream), "__pydantic_fields__"):
        return (
            f"expected a stream, got the pydantic model {type(stream).__name__} (iterating it gives "
            "its fields): pass the stream of events"
        )
    return None


def events_of(stream: object) -> AsyncIterator[object]:
    """An async iterator over the events of ``stream``; ``TypeError`` (with a hint) if it is none.

    Async iterables are iterated as they are, and so are sync ones that are the SDK
    streams themselves: the Anthropic SDK's ``MessageStream`` (async or sync) is iterated,
    since its events carry the stop reason and the tool calls while its ``text_stream``
    does not. An object that is not iterable but has ``text_stream`` gives that. A sync
    iterable is read in the event loop with a checkpoint between items: right for
    in-memory chunks, not for a blocking source (use the SDK's async client, or
    ``pysolate.SyncHost``, which reads sync streams in worker threads; ``idle_timeout``
    cannot interrupt a blocking read in the loop).
    """
    if isinstance(stream, str | bytes | bytearray):
        raise TypeError(
            f"expected a stream of chunks, not a single {type(stream).__name__}: pass "
            "[text] for one chunk, or use run_source for a whole program"
        )
    if inspect.isawaitable(stream) and not isinstance(stream, AsyncIterable):
        raise TypeError(
            f"expected a stream, got an un-awaited {type(stream).__name__}: await it first "
            "(stream = await client....create(..., stream=True))"
        )
    whole = _whole_reply(stream)
    if whole is not None:
        raise TypeError(whole)
    if not isinstance(stream, AsyncIterable | Iterable):
        stream = getattr(stream, "text_stream", None) or stream
    if isinstance(stream, AsyncIterable):
        return aiter(stream)
    if isinstance(stream, Iterable):
        return _from_sync(stream)
    name = type(stream).__name__
    if hasattr(stream, "__aenter__"):
        raise TypeError(
            f"expected a stream, got the stream manager {name}: enter it first "
            "(async with client....stream(...) as stream: pass stream)"
        )
    if hasattr(stream, "__enter__"):
        raise TypeError(
            f"expected a stream, got the context manager {name}: enter it first (with ... as stream)"
        )
    raise TypeError(f"expected an async or sync iterable of chunks or SDK events, not {name}")


async def _from_sync(items: Iterable[object]) -> AsyncIterator[object]:
    iterator = iter(items)
    try:
        for item in iterator:
            await anyio.lowlevel.checkpoint()
            yield item
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def blocking_events(stream: object) -> object:
    """``stream`` as the sync API hands it to a run: a sync iterable that may block (an SDK
    stream, a generator) wrapped to be read in worker threads; anything else unchanged
    (in-memory sequences, async streams, and every object ``events_of`` refuses, so the
    misuse errors are the same in both APIs)."""
    if isinstance(stream, AsyncIterable | Sequence) or not isinstance(stream, Iterable):
        return stream
    whole = _whole_reply(stream)
    if whole is not None:
        raise TypeError(whole)
    return ThreadedEvents(stream)


class _End:
    """The iterator is exhausted (a sentinel: ``None`` may be an event)."""


_END: Final = _End()


def _next(iterator: Iterator[object]) -> object:
    return next(iterator, _END)


class ThreadedEvents(AsyncIterator[object]):
    """The events of a blocking sync iterable, each ``next()`` run in a worker thread.

    Cancelling a read (the run's end, ``idle_timeout``, Ctrl-C) abandons the thread
    rather than waiting for its ``next()`` to return: ``aclose`` then closes the stream
    (``close()``), which for an SDK stream closes its HTTP response and so ends the
    abandoned read too. Reads never overlap: one ``next()`` at a time, in order.
    """

    __slots__ = ("_iterator", "_reading", "stream")

    def __init__(self, stream: Iterable[object]) -> None:
        self.stream = stream
        self._iterator = iter(stream)
        self._reading = False  # a worker thread is inside next(): the iterator is busy

    def __aiter__(self) -> ThreadedEvents:
        return self

    async def __anext__(self) -> object:
        self._reading = True
        item = await anyio.to_thread.run_sync(_next, self._iterator, abandon_on_cancel=True)
        self._reading = False  # (left True when the read was abandoned)
        if item is _END:
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        """Close the stream: its own ``close()`` (an SDK stream's releases the response,
        and may be called while a read is under way), else the iterator's, unless a read
        is still running in it (a generator cannot be closed while it runs)."""
        close = getattr(self.stream, "close", None)
        if not callable(close) and not self._reading:
            close = getattr(self._iterator, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):  # closing must not change the run's result
                close()
