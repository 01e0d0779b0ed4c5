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


def make_host(
    *,
    docs_latency: float = 0.5,
    people_latency: float = 0.3,
    guest_factory: GuestFactory | None = None,
    workspace: Workspace | None = None,
    share: bool = True,
) -> Host:
    """A Host with the demo's tools and ``workspace`` (default: a frozen copy of the demo
    workspace; Guests from ``guest_factory``, default local); ``share``: ``Host(share=...)``."""
    host = Host(guest_factory=guest_factory, share=share)
    host.register("workspace", workspace if workspace is not None else Workspace.frozen(WORKSPACE))
    host.register("docs", Docs(docs_latency))
    host.register("people", People(people_latency))
    host.register("clock", Clock())
    return host


def make_demo_repo(path: Path) -> Path:
    """A git repository at ``path`` (new or empty) whose one commit holds the demo
    workspace, for ``pysolate demo --git``: the run freezes its ``HEAD`` and the Pysolate
    run's changes become a commit there. Needs ``pysolate[git]``."""
    from .._workspace._git_tree import load_pygit2

    pygit2 = load_pygit2()
    repo = pygit2.init_repository(str(path), initial_head="main")
    for source in sorted(WORKSPACE.rglob("*")):
        if source.is_file():
            target = path / source.relative_to(WORKSPACE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    repo.index.add_all()
    repo.index.write()
    author = pygit2.Signature("pysolate demo", "demo@pysolate.invalid")
    repo.create_commit(
        "HEAD", author, author, "the team's notes and TODO list", repo.index.write_tree(), []
    )
    return path
