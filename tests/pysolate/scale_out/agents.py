"""Stand-ins for Ray actor handles, so the Host side of ``pysolate.ray`` is tested without a
Ray cluster: ``handle.method.remote(...)`` starts the real ``GuestNode`` coroutine at once
(as a Ray call starts remotely) and returns something awaitable, as an ``ObjectRef`` is —
and, as with an ``ObjectRef``, cancelling the awaiting task does not cancel the remote call."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable
from typing import Any

from pysolate.ray import GuestNode

CREATED: list[GuestNode] = []
"""Every in-process agent made by a test (``conftest`` shuts them down after it)."""


class LocalHandle:
    """A ``GuestNode`` in this process, called as a Ray actor handle is."""

    def __init__(self, node: Any | None = None) -> None:
        self.node = node or GuestNode()
        CREATED.append(self.node)

    def __getattr__(self, name: str) -> types.SimpleNamespace:
        method: Callable[..., Any] = getattr(self.node, name)
        return types.SimpleNamespace(
            remote=lambda *args, **kwargs: asyncio.shield(
                asyncio.ensure_future(method(*args, **kwargs))
            )
        )
