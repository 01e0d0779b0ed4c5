"""``HostPool``: whole runs on several Host processes, each key pinned to one.

A Host is one Python thread: past about one core of parsing, discovery and broker work, more
Guest nodes do not help, more Hosts do. A pool starts ``workers`` Ray actors, each holding a
Host built by the caller's ``setup()`` (so the tools must be constructible there), and sends
each run to the worker its key hashes to — a session's runs always meet the same Host.

``run_stream`` forwards the stream to the worker as it arrives: chunks that arrive while a
forwarding call is in flight are sent together in the next one (an actor call costs about a
millisecond; a model sends a token every 20 ms), so the worker's speculation sees the text as
early as the pool does.

Results come back without ``workspaces``: a run's branches live in the worker's process and
are discarded there. A pool is for Hosts whose effects go to services, not to local files.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import secrets
import zlib
from collections.abc import AsyncIterable, Callable
from types import TracebackType
from typing import Any

import anyio
import ray

from .._report._result import RunResult
from .._run._host import Host
from ._cluster import ensure_connected


class HostWorker:
    """One Host process (wrapped with ``ray.remote`` by the pool)."""

    def __init__(self, setup: Callable[[], Host]) -> None:
        self._host = setup()
        self._streams: dict[
            str, tuple[asyncio.Queue[list[str] | BaseException | None], asyncio.Task[RunResult]]
        ] = {}

    async def run_source(self, source: str, options: dict[str, Any]) -> RunResult:
        return _portable(await self._host.run_source(source, **options))

    async def open_stream(self, stream_id: str, options: dict[str, Any]) -> None:
        queue: asyncio.Queue[list[str] | BaseException | None] = asyncio.Queue()

        async def chunks() -> Any:
            while (batch := await queue.get()) is not None:
                if isinstance(batch, BaseException):
                    raise batch
                for text in batch:
                    yield text

        # A task outlives this call on purpose: the stream spans several actor calls.
        task = asyncio.get_running_loop().create_task(self._host.run_stream(chunks(), **options))
        self._streams[stream_id] = (queue, task)

    async def feed(self, stream_id: str, batch: list[str]) -> None:
        self._streams[stream_id][0].put_nowait(batch)

    async def fail(self, stream_id: str, type_name: str, message: str) -> RunResult:
        """The caller's stream raised: the run sees the same failure (builtin types kept)."""
        queue, task = self._streams.pop(stream_id)
        kind = getattr(builtins, type_name, None)
        error = (
            kind(message)
            if isinstance(kind, type) and issubclass(kind, Exception)
            else RuntimeError(f"{type_name}: {message}")
        )
        queue.put_nowait(error)
        return _portable(await task)

    async def finish(self, stream_id: str) -> RunResult:
        queue, task = self._streams.pop(stream_id)
        queue.put_nowait(None)
        return _portable(await task)

    async def abandon(self, stream_id: str) -> None:
        """The caller went away: stop that run (its early work and Guest go with it)."""
        entry = self._streams.pop(stream_id, None)
        if entry is not None:
            entry[1].cancel()

    async def identity(self) -> dict[str, object]:
        import os

        return {"pid": os.getpid(), "node_id": str(ray.get_runtime_context().get_node_id())}


def _portable(result: RunResult) -> RunResult:
    for workspace in result.workspaces.values():
        workspace.discard()
    return dataclasses.replace(result, workspaces={})


class HostPool:
    """Runs on ``workers`` Host actors built by ``setup()``; enter with ``async with``."""

    def __init__(
        self,
        setup: Callable[[], Host],
        *,
        workers: int = 2,
        address: str | None = None,
        init: dict[str, Any] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("a pool needs at least one worker")
        self._setup = setup
        self._count = workers
        self._address = address
        self._init = dict(init or {})
        self._workers: list[Any] = []

    async def __aenter__(self) -> HostPool:
        await anyio.to_thread.run_sync(self._start)
        return self

    def _start(self) -> None:
        ensure_connected(self._address, self._init)
        remote = ray.remote(HostWorker).options(num_cpus=0, max_concurrency=10_000, max_restarts=0)
        self._workers = [remote.remote(self._setup) for _ in range(self._count)]
        ray.get([w.identity.remote() for w in self._workers])

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for worker in self._workers:
            ray.kill(worker, no_restart=True)
        self._workers = []

    def worker_index(self, key: str | None) -> int:
        """Which worker runs ``key``'s runs (stable for a pool); a random one for ``None``."""
        if key is None:
            return secrets.randbelow(self._count)
        return zlib.crc32(key.encode("utf-8", "surrogatepass")) % self._count

    async def identity(self, key: str | None) -> dict[str, object]:
        """The process (pid, node) that runs ``key``'s runs."""
        return dict(await self._worker(key).identity.remote())

    def _worker(self, key: str | None) -> Any:
        if not self._workers:
            raise RuntimeError("enter the pool first: `async with HostPool(...) as pool`")
        return self._workers[self.worker_index(key)]

    async def run_source(self, source: str, *, key: str | None = None, **options: Any) -> RunResult:
        """``Host.run_source`` on ``key``'s worker."""
        return await self._worker(key).run_source.remote(source, options)

    async def run_stream(
        self, chunks: AsyncIterable[str], *, key: str | None = None, **options: Any
    ) -> RunResult:
        """``Host.run_stream`` on ``key``'s worker, the stream forwarded as it arrives.

        Cancellation stops the worker's run, then re-raises.
        """
        worker = self._worker(key)
        stream_id = secrets.token_hex(8)
        await worker.open_stream.remote(stream_id, options)
        pending: list[str] = []
        arrived = anyio.Event()
        ended = False

        failure: list[Exception] = []

        async def read() -> None:
            nonlocal arrived, ended
            try:
                async for text in chunks:
                    pending.append(text)
                    arrived.set()
            except Exception as exc:  # the run reports it as a failed stream, as locally
                failure.append(exc)
            ended = True
            arrived.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                while True:
                    await arrived.wait()
                    arrived = anyio.Event()
                    batch, pending[:] = list(pending), []
                    if batch:
                        await worker.feed.remote(stream_id, batch)
                    if ended and not pending:
                        break
            if failure:
                return await worker.fail.remote(
                    stream_id, type(failure[0]).__name__, str(failure[0])
                )
            return await worker.finish.remote(stream_id)
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await worker.abandon.remote(stream_id)
            raise
