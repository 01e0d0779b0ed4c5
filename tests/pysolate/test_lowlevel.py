"""``pysolate.lowlevel``: the extension points in one namespace (issue 39, item 4). A Guest
factory written against it alone runs a Host's programs, sessions included."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

import pysolate
import pysolate.lowlevel as lowlevel
from pysolate import Effect, Host, capability
from pysolate.testing import in_process_guest, in_process_session

pytestmark = pytest.mark.anyio


class Docs:
    @capability(effect=Effect.PURE, version="1")
    def search(self, query: str) -> list[str]:
        return [query.upper()]


class CountingFactory:
    """A user's factory: it keeps a count and delegates to the in-process Guest."""

    def __init__(self) -> None:
        self.started: list[tuple[str, ...]] = []

    async def __call__(
        self, capabilities: Mapping[str, Sequence[str]], limits: lowlevel.GuestLimits
    ) -> lowlevel.Guest:
        self.started.append(tuple(capabilities))
        return await in_process_guest(capabilities, limits)


class CountingSessions:
    def __init__(self) -> None:
        self.started = 0

    async def __call__(
        self, capabilities: Mapping[str, Sequence[str]], limits: lowlevel.GuestLimits
    ) -> lowlevel.SessionGuest:
        self.started += 1
        return await in_process_session(capabilities, limits)


async def test_a_factory_written_against_lowlevel_runs_the_hosts_programs() -> None:
    runs, sessions = CountingFactory(), CountingSessions()
    host = Host(guest_factory=runs, session_factory=sessions)
    host.register("docs", Docs())
    result = await host.run_source("docs.search('a')")
    assert (result.status, result.value) == ("ok", ["A"])
    assert runs.started == [("docs",)]
    async with host.session() as session:
        first = await session.run_source("x = docs.search('b')")
        second = await session.run_source("x")
    assert (first.status, second.value) == ("ok", ["B"])
    assert sessions.started == 1


def test_every_name_is_exported_and_documented() -> None:
    for name in lowlevel.__all__:
        value = getattr(lowlevel, name)
        assert (getattr(value, "__doc__", None) or "").strip() or name in {
            "CallHandler",
            "GuestStatus",
        }, name
    assert lowlevel.GuestStartError is pysolate.GuestStartError
    assert lowlevel.start_subprocess_guest.__name__ == "start_subprocess_guest"
