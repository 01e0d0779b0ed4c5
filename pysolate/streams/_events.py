"""Any stream a caller may pass, as one async iterator of events; misuse refused at once.

Shared by the reader and the SDK adapters (``text_chunks``, ``tool_arguments``): each
accepts the same shapes and refuses the same mistakes with the same hint.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator, Iterable

import anyio.lowlevel


def events_of(stream: object) -> AsyncIterator[object]:
    """An async iterator over the events of ``stream``; ``TypeError`` (with a hint) if it is none.

    Async iterables are iterated as they are. The Anthropic SDK's ``MessageStream`` is
    iterated itself (its events carry the stop reason; its ``text_stream`` does not). Any
    other object with ``text_stream`` gives that. A sync iterable is read in the event
    loop with a checkpoint between items: right for in-memory chunks, not for a blocking
    source (use the SDK's async client; ``idle_timeout`` cannot interrupt a blocking read).
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
    if not isinstance(stream, AsyncIterable):
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
        raise TypeError(f"expected a stream, got the context manager {name}: enter it first (with ... as stream)")
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
