"""A workspace whose every method first waits ``latency`` seconds (issue 17).

With the memory workspace's instant calls an early branch write has always ended before
the program claims it; with a latency, claims wait for writes still running on a layer,
and the discard of a layer cancels work in flight. The twin (mock clock) makes the waits
free. ``for_run``/``layer`` copy the instance, so the latency follows every branch.
"""

from __future__ import annotations

from collections.abc import Mapping

import anyio

from occurrences import Effect
from pysolate import Workspace, capability
from pysolate._workspace._workspace import VERSION


class SlowWorkspace(Workspace):
    latency: float = 0.0

    @classmethod
    def of(
        cls, files: Mapping[str, str], latency: float, root: Workspace | None = None
    ) -> SlowWorkspace:
        """``files`` in memory, or ``root``'s root (a git or lazy one) made slow."""
        workspace = cls.from_files(files) if root is None else cls(root._tree)
        workspace.latency = latency
        return workspace

    async def _wait(self) -> None:
        if self.latency:
            await anyio.sleep(self.latency)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def read_bytes(self, path: str) -> bytes:
        await self._wait()
        return await super().read_bytes(path)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        await self._wait()
        return await super().read_text(path, encoding)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def list_dir(self, path: str = ".") -> list[str]:
        await self._wait()
        return await super().list_dir(path)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def exists(self, path: str) -> bool:
        await self._wait()
        return await super().exists(path)

    @capability(effect=Effect.WRITE, version=VERSION, scope="path")
    async def write_bytes(self, path: str, data: bytes) -> None:
        await self._wait()
        await super().write_bytes(path, data)

    @capability(effect=Effect.WRITE, version=VERSION, scope="path")
    async def write_text(self, path: str, text: str, encoding: str = "utf-8") -> None:
        await self._wait()
        await super().write_text(path, text, encoding)

    @capability(effect=Effect.WRITE, version=VERSION, scope="path")
    async def delete(self, path: str) -> None:
        await self._wait()
        await super().delete(path)
