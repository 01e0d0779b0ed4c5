"""Declared scopes end to end, through the isolated subprocess Guest.

A write moves only the workspace paths it names to a new view, so a read of another path
after it is still speculated and claimed, while a read the write may affect runs directly
and sees the write. Every streamed result equals ``run_source(sealed, speculate=False)``
on an identical fresh Host. Also: how ``@capability(scope=...)`` is checked and carried
into ``Host.method_specs()``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import pytest

from occurrences.plain import loads
from pysolate import Effect, Host, RegistrationError, RunResult, capability
from pysolate.testing import Script, memory_workspace, scripted_tool

FILES = {
    "a.txt": "alpha\n",
    "b.txt": "beta\n",
    "notes/x.md": "x-ray\n",
    "notes/y.md": "yankee\n",
    "other/z.md": "zulu\n",
}


@dataclass
class Stream:
    """A source streamed in fixed chunks."""

    source: str
    size: int = 8
    delay: float = 0.005

    async def __aiter__(self) -> AsyncIterator[str]:
        for i in range(0, len(self.source), self.size):
            await anyio.sleep(self.delay)
            yield self.source[i : i + self.size]


def make_host() -> Host:
    docs = scripted_tool(
        search=Script(
            lambda query: [f"notes/{query}.md", "other/z.md"],
            effect=Effect.PURE,
            version="1",
            latency=0.05,
        ),
    )
    host = Host()
    host.register("docs", docs)
    host.register("workspace", memory_workspace(FILES))
    return host


def call_log(result: RunResult) -> list[tuple[object, ...]]:
    return [
        (
            c.capability,
            c.method,
            c.args,
            c.kwargs,
            c.outcome,
            c.result,
            c.error and (c.error.type, c.error.message),
        )
        for c in result.calls
    ]


def assert_equivalent(streamed: RunResult, reference: RunResult) -> None:
    assert streamed.status == reference.status
    assert streamed.value == reference.value
    assert streamed.stdout == reference.stdout
    assert streamed.error == reference.error
    assert call_log(streamed) == call_log(reference)
    assert (
        streamed.workspaces["workspace"].state_files()
        == reference.workspaces["workspace"].state_files()
    )


async def run_both(source: str) -> tuple[RunResult, RunResult]:
    """Stream ``source`` through Pysolate, then run it sequentially on a fresh twin Host."""
    streamed = await make_host().run_stream(Stream(source))
    reference = await make_host().run_source(source, speculate=False)
    return streamed, reference


def early(result: RunResult) -> set[tuple[str, object]]:
    """(method, first argument) of every call the speculative lane made."""
    out = set()
    for o in result.observations:
        if o.lane == "speculative" and o.key is not None:
            arguments = loads(o.key.arguments)
            assert isinstance(arguments, dict)
            out.add((o.method, arguments.get("path", arguments.get("query"))))
    return out


def lanes(result: RunResult, method: str) -> list[tuple[object, str]]:
    """(first argument, lane) per call; a claim of work started on the view the last write
    before it left is ``after write``: once the Guest's write returned (re-speculation), or
    on the speculative branch layer that write made early (``scheduler._branches``)."""
    observations = {o.id: o for o in result.observations}
    out: list[tuple[object, str]] = []
    for c in result.calls:
        if c.method != method:
            continue
        lane = c.lane
        writes = [
            w.ended for w in result.calls[: c.index] if w.effect is not None and w.effect.may_write
        ]
        obs = observations.get(c.observation_id) if c.observation_id is not None else None
        after = obs is not None and obs.started is not None and writes and obs.started >= writes[-1]
        if lane == "claimed" and obs is not None and (after or obs.layer):
            lane = "after write"
        out.append((c.args[0] if c.args else c.kwargs, lane))
    return out


@pytest.mark.anyio
async def test_a_read_of_another_path_after_a_write_is_claimed_and_the_written_one_is_direct() -> (
    None
):
    src = (
        "workspace.write_text('a.txt', 'rewritten')\n"
        "other = workspace.read_text('b.txt')\n"
        "again = workspace.read_text('a.txt')\n"
        "deep = workspace.read_text('./notes//x.md')\n"
        "other, again, deep\n"
    )
    streamed, reference = await run_both(src)
    assert_equivalent(streamed, reference)
    assert streamed.value == ("beta\n", "rewritten", "x-ray\n")
    assert lanes(streamed, "read_text") == [
        ("b.txt", "claimed"),
        ("a.txt", "after write"),
        ("./notes//x.md", "claimed"),
    ]


@pytest.mark.anyio
async def test_listing_the_written_directory_is_direct_and_another_is_claimed() -> None:
    src = (
        "workspace.write_text('notes/new.md', 'fresh')\n"
        "mine = workspace.list_dir('notes')\n"
        "theirs = workspace.list_dir('other')\n"
        "everything = workspace.list_dir()\n"
        "there = workspace.exists('notes/new.md')\n"
        "mine, theirs, everything, there\n"
    )
    streamed, reference = await run_both(src)
    assert_equivalent(streamed, reference)
    assert streamed.value == (
        ["new.md", "x.md", "y.md"],
        ["z.md"],
        ["a.txt", "b.txt", "notes", "other"],
        True,
    )
    assert lanes(streamed, "list_dir") == [
        ("notes", "after write"),
        ("other", "claimed"),
        (".", "after write"),
    ]
    assert lanes(streamed, "exists") == [("notes/new.md", "after write")]


@pytest.mark.anyio
async def test_a_read_whose_path_comes_from_a_result_is_decided_when_the_result_arrives() -> None:
    src = (
        "workspace.delete('notes/x.md')\n"
        "found = docs.search('x')\n"  # ['notes/x.md', 'other/z.md']
        "texts = []\n"
        "for path in found:\n"
        "    texts.append(workspace.exists(path))\n"
        "first = workspace.exists(found[0])\n"
        "second = workspace.read_text(found[1])\n"
        "texts, first, second\n"
    )
    streamed, reference = await run_both(src)
    assert_equivalent(streamed, reference)
    assert streamed.value == ([False, True], False, "zulu\n")
    # The read of the deleted path is started again on the layer the early delete made.
    assert early(streamed) == {
        ("delete", "notes/x.md"),
        ("search", "x"),
        ("exists", "other/z.md"),
        ("read_text", "other/z.md"),
        ("exists", "notes/x.md"),
    }
    assert lanes(streamed, "exists")[:2] == [
        ("notes/x.md", "after write"),
        ("other/z.md", "claimed"),
    ]
    assert lanes(streamed, "read_text") == [("other/z.md", "claimed")]


@pytest.mark.anyio
async def test_a_write_whose_path_comes_from_a_result_keeps_every_later_read_direct() -> None:
    src = (
        "found = docs.search('q')\n"
        "workspace.write_text(found[1], 'overwritten')\n"
        "workspace.read_text('b.txt'), workspace.read_text('other/z.md')\n"
    )
    streamed, reference = await run_both(src)
    assert_equivalent(streamed, reference)
    assert streamed.value == ("beta\n", "overwritten")
    assert lanes(streamed, "read_text") == [("b.txt", "after write"), ("other/z.md", "after write")]


# -- declaring a scope ------------------------------------------------------------------------------


def test_the_workspace_declares_every_method_scoped_by_path() -> None:
    host = make_host()
    specs = host.method_specs()["workspace"]
    assert {name: (spec.scope, spec.scope_position) for name, spec in specs.items()} == {
        name: ("path", 0)
        for name in (
            "delete",
            "exists",
            "list_dir",
            "read_bytes",
            "read_text",
            "write_bytes",
            "write_text",
        )
    }
    assert all(spec.scope is None for spec in host.method_specs()["docs"].values())


def test_the_scope_position_counts_positional_parameters_only() -> None:
    class Store:
        @capability(effect=Effect.WRITE, version="1", scope="key")
        def put(self, bucket: str, /, key: str, value: str) -> None: ...

        @capability(effect=Effect.IMMUTABLE_READ, version="1", scope="key")
        def get(self, *, key: str) -> str:
            return key

    host = Host()
    host.register("store", Store())
    specs = host.method_specs()["store"]
    assert (specs["put"].scope, specs["put"].scope_position) == ("key", 1)
    assert (specs["get"].scope, specs["get"].scope_position) == ("key", None)


def test_a_scope_must_name_a_parameter_passable_by_name() -> None:
    class NoSuch:
        @capability(effect=Effect.WRITE, version="1", scope="path")
        def put(self, key: str) -> None: ...

    class PositionalOnly:
        @capability(effect=Effect.WRITE, version="1", scope="key")
        def put(self, key: str, /) -> None: ...

    class Star:
        @capability(effect=Effect.WRITE, version="1", scope="keys")
        def put(self, *keys: str) -> None: ...

    for obj in (NoSuch(), PositionalOnly(), Star()):
        with pytest.raises(RegistrationError, match="scope"):
            Host().register("store", obj)


@pytest.mark.parametrize("scope", ["", "not a name", 3])
def test_a_scope_must_be_an_identifier(scope: object) -> None:
    with pytest.raises(RegistrationError, match="scope"):
        capability(effect=Effect.WRITE, version="1", scope=scope)  # type: ignore[call-overload]


def test_a_method_of_unknown_effect_cannot_declare_a_scope() -> None:
    with pytest.raises(RegistrationError, match="declared effect"):
        capability(scope="path")


def test_scope_is_a_keyword_of_the_decorator() -> None:
    assert inspect.signature(capability).parameters["scope"].default is None
