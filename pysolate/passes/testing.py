"""A test double for the passes: a read-only file store that declares both laws exactly.

``LawfulFiles(files)``: ``read_text(path)`` (immutable read) declares a batch law
(``read_many(paths)``) and a projection law (``read_lines(path, limit=n)``); both hold
exactly, per element errors included (a missing path raises ``FileNotFoundError`` in every
form). ``physical`` records each real call as ``(method, argument)`` in the order made.
``batch_fails=True`` makes every ``read_many`` raise as a whole (the fallback path).
"""

from __future__ import annotations

import anyio

from occurrences import Effect

from .._tools._capability import BatchLaw, ProjectionLaw, capability

__all__ = ["LawfulFiles"]


class LawfulFiles:
    """Files by path; ``latency`` seconds per physical call (``anyio.sleep``)."""

    def __init__(
        self, files: dict[str, str], latency: float = 0.0, *, batch_fails: bool = False
    ) -> None:
        self._files = dict(files)
        self._latency = latency
        self._batch_fails = batch_fails
        self.physical: list[tuple[str, object]] = []

    def _text(self, path: str) -> str:
        if path not in self._files:
            raise FileNotFoundError(2, "No such file or directory", path)
        return self._files[path]

    @capability(
        effect=Effect.IMMUTABLE_READ,
        version="1",
        batch=BatchLaw("read_many", "path", "1"),
        projection=ProjectionLaw("read_lines", "limit", "1"),
    )
    async def read_text(self, path: str) -> str:
        self.physical.append(("read_text", path))
        await anyio.sleep(self._latency)
        return self._text(path)

    @capability(effect=Effect.IMMUTABLE_READ, version="1")
    async def read_many(self, paths: list[str]) -> list[object]:
        self.physical.append(("read_many", tuple(paths)))
        await anyio.sleep(self._latency)
        if self._batch_fails:
            raise RuntimeError("batch backend unavailable")
        out: list[object] = []
        for path in paths:
            try:
                out.append(self._text(path))
            except FileNotFoundError as exc:
                out.append(exc)
        return out

    @capability(effect=Effect.IMMUTABLE_READ, version="1")
    async def read_lines(self, path: str, limit: int | None = None) -> list[str]:
        self.physical.append(("read_lines", path))
        await anyio.sleep(self._latency)
        return self._text(path).splitlines()[:limit]
