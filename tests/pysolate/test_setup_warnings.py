"""A Host none of whose tools may start early, because they were left at ``Effect.UNKNOWN``,
says so once (an ``UnqualifiedToolsWarning`` naming the tools and the fix, at the caller's
line), and every speculating run it applies to carries the text in
``RunReport.setup_warnings``; a Host with something early, or whose tools were all
qualified as never-early effects on purpose, says nothing."""

from __future__ import annotations

import warnings

import pytest

from pysolate import Effect, Host, PysolateWarning, UnqualifiedToolsWarning, capability
from pysolate._run._setup_warnings import named, unqualified_agent_tools
from pysolate.testing import in_process_guest, in_process_session

pytestmark = pytest.mark.anyio


class Notes:
    @capability()
    def save(self, text: str) -> str:
        return text

    @capability()
    def load(self, key: str) -> str:
        return key


class Clock:
    @capability(effect=Effect.LIVE_READ)
    def now(self) -> float:
        return 1.0


class Docs:
    @capability(effect=Effect.PURE, version="1")
    def search(self, query: str) -> list[str]:
        return [query]


def host(**capabilities: object) -> Host:
    h = Host(guest_factory=in_process_guest, session_factory=in_process_session)
    for name, obj in capabilities.items():
        h.register(name, obj)
    return h


def pysolate_warnings(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in caught if issubclass(w.category, PysolateWarning)]


async def test_all_unknown_tools_are_said_once_per_host_and_noted_on_every_run() -> None:
    h = host(notes=Notes())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = await h.run_source('notes.save("a")')
        second = await h.run_stream(['notes.load("b")\n'])
        async with h.session() as session:
            turn = await session.run_stream(['notes.save("c")\n'])
        sequential = await h.run_source('notes.save("d")', speculate=False)
    (warned,) = pysolate_warnings(caught)
    assert warned.category is UnqualifiedToolsWarning
    assert warned.filename == __file__  # the caller's line, not the package's
    text = str(warned.message)
    assert text.startswith(
        "no tool on this Host may start early: notes.load, notes.save are left at Effect.UNKNOWN"
    )
    assert "@capability(effect=Effect.PURE)" in text and "effects={'search': Effect.PURE}" in text
    assert [r.report.setup_warnings for r in (first, second, turn)] == [(text,)] * 3
    assert sequential.report.setup_warnings == ()  # speculate=False: nothing could be early anyway
    assert first.status == second.status == turn.status == "ok"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await host(notes=Notes()).run_source('notes.save("a")')
    assert len(pysolate_warnings(caught)) == 1  # another Host: said again


@pytest.mark.parametrize(
    "capabilities",
    [{"notes": Notes(), "docs": Docs()}, {"clock": Clock()}, {}],
    ids=["one-pure-method", "qualified-never-early", "no-tools"],
)
async def test_nothing_is_said_when_something_may_start_early_or_nothing_was_left_unknown(
    capabilities: dict[str, object],
) -> None:
    h = host(**capabilities)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = await h.run_source("1 + 1")
    assert pysolate_warnings(caught) == []
    assert result.report.setup_warnings == ()


def test_an_agents_tools_are_unqualified_only_when_effects_names_none_of_them() -> None:
    message = unqualified_agent_tools("Setup", ["search", "save"], {})
    assert message is not None
    assert message.startswith("Setup: none of the agent's tools (search, save) may start early")
    assert "Setup(effects={'search': Effect.PURE})" in message
    assert unqualified_agent_tools("Setup", ["search", "save"], {"save": Effect.WRITE}) is None
    assert unqualified_agent_tools("Setup", [], {}) is None
    assert named([f"t{i}" for i in range(9)]) == "t0, t1, t2, t3, t4, t5 and 3 more"
