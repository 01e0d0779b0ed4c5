"""Both APIs behind one interface, so each contract case runs through both.

``api="async"`` is ``Host``/``Session`` as they are. ``api="sync"`` is the blocking
``SyncHost``/``SyncSession`` over the same Host, called from a worker thread (the case's
own event loop stays free, as a sync caller's would be) with the stream as a blocking
iterator (``TimedChunks.blocking``), as sync code hands one over: it is read in worker
threads of the SyncHost's loop. The results must be the same, by the same checks.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio.to_thread

from pysolate import Host, RunResult, SyncHost

if TYPE_CHECKING:
    from .harness import TimedChunks

Api = Literal["async", "sync"]
APIS: tuple[Api, ...] = ("async", "sync")


def _chunks(api: Api, chunks: object) -> object:
    blocking = getattr(chunks, "blocking", None)
    return blocking() if api == "sync" and callable(blocking) else chunks


async def _blocking(call: Callable[[], RunResult]) -> RunResult:
    return await anyio.to_thread.run_sync(call)


async def run_stream(
    api: Api, host: Host, chunks: TimedChunks | object, **options: Any
) -> RunResult:
    """``host.run_stream(chunks, **options)`` through ``api``."""
    if api == "async":
        return await host.run_stream(chunks, **options)  # type: ignore[arg-type]
    sync = SyncHost(host)
    try:
        return await _blocking(functools.partial(sync.run_stream, _chunks(api, chunks), **options))  # type: ignore[arg-type]
    finally:
        await anyio.to_thread.run_sync(sync.close)


async def run_source(api: Api, host: Host, source: str, **options: Any) -> RunResult:
    """``host.run_source(source, **options)`` through ``api``."""
    if api == "async":
        return await host.run_source(source, **options)
    sync = SyncHost(host)
    try:
        return await _blocking(functools.partial(sync.run_source, source, **options))
    finally:
        await anyio.to_thread.run_sync(sync.close)


class Turns(Protocol):
    """A session's turns, awaitable whichever API runs them."""

    def run_stream(self, chunks: object, **options: Any) -> Awaitable[RunResult]: ...

    def run_source(self, source: str, **options: Any) -> Awaitable[RunResult]: ...


class _SyncTurns:
    def __init__(self, session: Any) -> None:
        self._session = session

    async def run_stream(self, chunks: object, **options: Any) -> RunResult:
        return await _blocking(
            functools.partial(self._session.run_stream, _chunks("sync", chunks), **options)
        )

    async def run_source(self, source: str, **options: Any) -> RunResult:
        return await _blocking(functools.partial(self._session.run_source, source, **options))


@contextlib.asynccontextmanager
async def session(api: Api, host: Host, **options: Any) -> AsyncIterator[Turns]:
    """``async with host.session(**options)`` through ``api``."""
    if api == "async":
        async with host.session(**options) as turns:
            yield turns
        return
    sync = SyncHost(host)
    opened = sync.session(**options)
    try:
        await anyio.to_thread.run_sync(opened.__enter__)
        try:
            yield _SyncTurns(opened)
        finally:
            await anyio.to_thread.run_sync(opened.__exit__, None, None, None)
    finally:
        await anyio.to_thread.run_sync(sync.close)
