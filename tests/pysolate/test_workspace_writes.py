"""Writes a branch can always commit (issue 35, item 5; issue 38): names checked when the
program writes, and a commit that is all or nothing."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import pysolate._workspace._write_out as write_out
from pysolate import CommitError, Host, Workspace, WorkspaceError
from pysolate._guest import start_subprocess_guest
from pysolate._guest_api import GuestFactory
from pysolate._workspace._tree import NAME_MAX, PATH_MAX
from pysolate._workspace._workspace import BranchState
from pysolate.testing import in_process_guest

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "factory", [in_process_guest, start_subprocess_guest], ids=["in-process", "subprocess"]
)
async def test_a_name_too_long_fails_the_write_in_the_program_and_the_rest_commits(
    factory: GuestFactory, tmp_path: Path
) -> None:
    """The program sees the ``OSError`` CPython's ``open`` raises; the commit then writes
    everything else (it used to raise after moving the branch to COMMITTED)."""
    host = Host(guest_factory=factory)
    host.register("workspace", Workspace.from_files({"a.txt": "alpha"}))
    program = (
        "try:\n"
        f"    workspace.write_text('d/' + 'x' * {NAME_MAX + 1}, 'long')\n"
        "except OSError as e:\n"
        "    caught = (type(e).__name__, e.errno, e.strerror)\n"
        "workspace.write_text('b.txt', 'beta')\n"
        "caught\n"
    )
    result = await host.run_source(program)
    assert result.status == "ok", result.error
    assert result.value == ("OSError", errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))
    out = result.workspaces["workspace"].commit(tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == ["a.txt", "b.txt"]


async def test_path_max_counts_the_relative_path_only(tmp_path: Path) -> None:
    """A path just under ``PATH_MAX`` is written and commits (relative to the target's
    descriptor, whatever the target's own length); one at ``PATH_MAX`` fails the write."""
    branch = Workspace.from_files({}).for_run()
    part = "p" * 200
    deep = "/".join([part] * 21)[: PATH_MAX - 1 - 2] + "/f"
    assert len(deep.encode()) == PATH_MAX - 1
    await branch.write_text(deep, "deep")
    with pytest.raises(OSError) as info:
        await branch.write_text(deep + "x", "x")
    assert info.value.errno == errno.ENAMETOOLONG
    target = tmp_path / ("t" * NAME_MAX)
    out = branch.commit(target)
    fd = os.open(out, os.O_RDONLY)
    try:
        with open(os.open(deep, os.O_RDONLY, dir_fd=fd), "rb") as f:
            assert f.read() == b"deep"
    finally:
        os.close(fd)


async def test_git_directories_and_paths_through_symlinked_directories_are_refused(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    (src / "docs").mkdir(parents=True)
    (src / "docs" / "b.md").write_text("beta")
    (src / "a.txt").write_text("alpha")
    os.symlink("docs", src / "docs_alias")
    os.symlink("a.txt", src / "alias")
    for ws in (Workspace.frozen(src), Workspace.frozen(src, lazy=True)):
        branch = ws.for_run()
        for path in (".git/hooks/post-commit", "sub/.GIT/config"):
            with pytest.raises(PermissionError, match=r"\.git"):
                await branch.write_text(path, "x")
        with pytest.raises(PermissionError, match="symlinked directory"):
            await branch.write_text("docs_alias/new.md", "x")
        with pytest.raises(PermissionError, match="symlinked directory"):
            await branch.delete("docs_alias/b.md")
        await branch.write_text("alias", "replaces the link itself")
        await branch.delete("docs/b.md")
        assert branch.changes() == {"alias": b"replaces the link itself", "docs/b.md": None}


def test_a_memory_root_refuses_names_no_file_system_holds() -> None:
    with pytest.raises(WorkspaceError, match="too long"):
        Workspace.from_files({"x" * (NAME_MAX + 1): "x"})


async def test_a_failed_commit_writes_nothing_and_leaves_the_branch_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    branch = Workspace.from_files({"a.txt": "alpha", "d/b.txt": "beta"}).for_run()
    await branch.write_text("c.txt", "gamma")
    real, written = write_out._write_file, []

    def failing(top: int, path: str, data: bytes) -> None:
        if len(written) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        written.append(path)
        real(top, path, data)

    monkeypatch.setattr(write_out, "_write_file", failing)
    target = tmp_path / "out"
    with pytest.raises(CommitError, match="nothing was written") as info:
        branch.commit(target)
    assert isinstance(info.value.__cause__, OSError)
    assert not target.exists()
    assert os.listdir(tmp_path) == []  # the temporary sibling is gone too
    assert branch.state is BranchState.OPEN
    monkeypatch.setattr(write_out, "_write_file", real)
    target.mkdir()  # an empty directory is a valid target
    out = branch.commit(target)
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "a.txt",
        "c.txt",
        "d",
        "d/b.txt",
    ]
    assert branch.state is BranchState.COMMITTED


async def test_a_failed_commit_can_be_discarded(tmp_path: Path) -> None:
    branch = Workspace.from_files({"a.txt": "alpha"}).for_run()
    (tmp_path / "file").write_text("x")
    with pytest.raises(CommitError):
        branch.commit(tmp_path / "file" / "out")  # its parent is a file
    assert branch.state is BranchState.OPEN
    branch.discard()
    assert branch.state is BranchState.DISCARDED
