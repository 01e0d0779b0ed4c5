"""Example tools for the demo, with the latencies of real remote services.

``docs.search`` stands for a documentation search API (pure: same query, same answer
during a run), ``people.lookup_owner`` for a directory snapshot (an immutable read),
``clock.today`` for a live read, which Pysolate never runs early.
"""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path

import anyio

from pysolate import Effect, Host, Workspace, capability
from pysolate._guest_api import GuestFactory

WORKSPACE = Path(__file__).parent / "workspace"

_DOCS = {
    "retry": ["docs/resilience/retries.md", "docs/uploads.md"],
    "cache": ["docs/caching/invalidation.md"],
    "rate": ["docs/limits/tenants.md", "docs/limits/buckets.md"],
    "logging": ["docs/observability/logging.md"],
}
_OWNERS = ["alice", "bob", "carol"]


class Docs:
    def __init__(self, latency: float = 0.5) -> None:
        self.latency = latency

    @capability(effect=Effect.PURE, version="1")
    async def search(self, query: str) -> list[str]:
        """Documentation pages for a query, best first."""
        await anyio.sleep(self.latency)
        return [page for word, pages in _DOCS.items() if word in query.lower() for page in pages]


class People:
    def __init__(self, latency: float = 0.3) -> None:
        self.latency = latency

    @capability(effect=Effect.IMMUTABLE_READ, version="1")
    async def lookup_owner(self, topic: str) -> str:
        """The owner of a topic in today's directory snapshot."""
        await anyio.sleep(self.latency)
        return _OWNERS[hashlib.sha256(topic.encode()).digest()[0] % len(_OWNERS)]


class Clock:
    @capability(effect=Effect.LIVE_READ, version="1")
    def today(self) -> str:
        return datetime.date.today().isoformat()


def make_host(*, docs_latency: float = 0.5, people_latency: float = 0.3, guest_factory: GuestFactory | None = None) -> Host:
    """A Host with the demo's tools and a frozen copy of the demo workspace (Guests from
    ``guest_factory``, default local)."""
    host = Host(guest_factory=guest_factory)
    host.register("workspace", Workspace.frozen(WORKSPACE))
    host.register("docs", Docs(docs_latency))
    host.register("people", People(people_latency))
    host.register("clock", Clock())
    return host
