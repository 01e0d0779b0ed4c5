"""Fault catalogue, workspace dispositions (issue 13, item 4).

A run that did not end ``ok`` returns its branch ``UNCOMMITTABLE``: the partial writes can
be inspected and discarded, and ``commit`` raises ``CommitError`` saying how the run ended.
``Workspace.for_run`` keeps the subclass, so an override and an added method serve the
program's own calls exactly as they serve early ones. Both Guests, both ways.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from occurrences import Effect
from pysolate import CommitError, GuestLimits, Host, Workspace, capability
from pysolate._guest_api import GuestFactory
from pysolate._workspace._workspace import BranchState

from .faulty import both_ways, guests, odd_host
from .harness import TimedChunks, assert_same

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("factory", guests())
async def test_a_run_that_raised_returns_an_uncommittable_branch(
    factory: GuestFactory, tmp_path: Path
) -> None:
    both = await both_ways("workspace.write_text('new.txt', 'half')\n1 / 0\n", factory)
    for result in (both.reference, both.streamed):
        assert result.status == "error"
        branch = result.workspaces["workspace"]
        assert branch.state is BranchState.UNCOMMITTABLE
        assert branch.changes() == {"new.txt": b"half"}  # still inspectable
        with pytest.raises(
            CommitError, match=r"the run ended error \(ZeroDivisionError: division by zero\)"
        ):
            branch.commit(tmp_path / "out")
        assert not (tmp_path / "out").exists()
        branch.discard()
        assert branch.state is BranchState.DISCARDED


@pytest.mark.parametrize("factory", guests())
@pytest.mark.parametrize("mode", ["source", "stream"])
async def test_an_aborted_run_cannot_commit_its_partial_writes(
    factory: GuestFactory, mode: str, tmp_path: Path
) -> None:
    """The wall-time limit ends the run mid-way (a stalled read); its write stays out."""
    host, odd = odd_host(factory, limits=GuestLimits(wall_time=0.3))
    source = "workspace.write_text('a.txt', 'partial')\nodd.stall('x')\nworkspace.write_text('b.txt', 'never')\n"
    try:
        if mode == "source":
            result = await host.run_source(source, speculate=False)
        else:
            result = await host.run_stream(_chunks(source))
    finally:
        odd.release.set()
    assert (result.status, result.error.type if result.error else None) == (
        "aborted",
        "WallTimeLimit",
    )
    branch = result.workspaces["workspace"]
    assert branch.state is BranchState.UNCOMMITTABLE
    assert "WallTimeLimit" in (branch.uncommittable_reason or "")
    with pytest.raises(
        CommitError, match="refusing to commit a partial branch: the run ended aborted"
    ):
        branch.commit(tmp_path / "out")


@pytest.mark.parametrize("factory", guests())
async def test_an_ok_run_still_commits(factory: GuestFactory, tmp_path: Path) -> None:
    both = await both_ways("workspace.write_text('new.txt', 'whole')\n'done'\n", factory)
    branch = both.streamed.workspaces["workspace"]
    assert branch.state is BranchState.OPEN and branch.uncommittable_reason is None
    out = branch.commit(tmp_path / "out")
    assert (out / "new.txt").read_text() == "whole"


class Shouting(Workspace):
    """A workspace subclass: an override of a capability method and an added one."""

    @capability(effect=Effect.IMMUTABLE_READ, version="s1", scope="path")
    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read_bytes(path)).decode(encoding).upper()

    @capability(effect=Effect.IMMUTABLE_READ, version="s1", scope="path")
    async def shout(self, path: str) -> str:
        return (await self.read_text(path)) + "!"


def test_for_run_keeps_the_subclass_and_its_attributes() -> None:
    root = Shouting.from_files({"a.txt": "alpha"})
    root.note = "kept"  # type: ignore[attr-defined]
    branch = root.for_run()
    assert type(branch) is Shouting and branch.state is BranchState.OPEN
    assert branch.note == "kept"  # type: ignore[attr-defined]
    layer = branch.layer()
    assert type(layer) is Shouting


@pytest.mark.parametrize("factory", guests())
async def test_a_subclass_serves_the_programs_own_calls(factory: GuestFactory) -> None:
    """The early read (root) and the formal ones (branch) both use the override; the
    added method works; a read after a write sees the write through the override."""
    source = (
        "a = workspace.read_text('a.txt')\n"
        "workspace.write_text('b.txt', 'new')\n"
        "b = workspace.read_text('b.txt')\n"
        "(a, b, workspace.shout('a.txt'))\n"
    )
    results = []
    for mode in ("source", "stream"):
        host = Host(guest_factory=factory)
        host.register("workspace", Shouting.from_files({"a.txt": "alpha"}))
        if mode == "source":
            results.append(await host.run_source(source, speculate=False))
        else:
            results.append(await host.run_stream(TimedChunks(source, (5,), (0.0,))))
    reference, streamed = results
    assert (reference.status, reference.value) == ("ok", ("ALPHA", "NEW", "ALPHA!"))
    assert_same(streamed, reference)
    assert streamed.calls[0].lane == "claimed"  # the early read went through the override too
    assert type(streamed.workspaces["workspace"]) is Shouting


async def _chunks(source: str) -> AsyncIterator[str]:
    yield source
