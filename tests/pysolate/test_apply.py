"""``branch.apply(path)`` (issue 38): a run's changes written back only where the directory
(or the work tree, and its index) still holds what the root held; otherwise nothing is
written and every changed path is named. Interrupted applies are finished or rolled back
by the next one."""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from git_repos import git, make_repo, snapshot

import pysolate._workspace._apply as apply_module
from pysolate import ApplyConflict, CommitError, Host, Workspace, WorkspaceError
from pysolate._workspace._journal import journal_path, recover
from pysolate._workspace._workspace import BranchState
from pysolate.testing import in_process_guest

pytestmark = pytest.mark.anyio

FILES = {"a.txt": "alpha", "docs/b.md": "beta", "keep.txt": "keep", "run.sh": "#!/bin/sh\n"}
KINDS = ("git", "eager", "lazy")


def _source(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "project"
    if kind == "git":
        make_repo(path, FILES, executable=("run.sh",))
    else:
        for rel, content in FILES.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(content)
        os.chmod(path / "run.sh", 0o755)
    return path


def _root(path: Path, kind: str) -> Workspace:
    if kind == "git":
        return Workspace.git(path)
    return Workspace.frozen(path, lazy=kind == "lazy")


async def _edit(branch: Workspace) -> Workspace:
    await branch.write_text("a.txt", "ALPHA")
    await branch.write_text("run.sh", "#!/bin/sh\necho new\n")
    await branch.write_text("new/deep/n.txt", "n")
    await branch.delete("docs/b.md")
    return branch


def _no_leftovers(path: Path) -> None:
    names = [
        str(p.relative_to(path))
        for p in path.rglob("*")
        if ".pysolate" in p.name or p.name.startswith("pysolate-apply")
    ]
    assert names == []


@pytest.mark.parametrize("kind", KINDS)
async def test_apply_writes_the_changes_and_nothing_else(tmp_path: Path, kind: str) -> None:
    path = _source(tmp_path, kind)
    branch = await _edit(_root(path, kind).for_run())
    status = git(path, "status", "--porcelain").stdout if kind == "git" else ""
    index = (path / ".git" / "index").read_bytes() if kind == "git" else b""
    before = snapshot(path)
    branch.apply(path)
    after = snapshot(path)
    assert after["a.txt"] == ("file", b"ALPHA") and after["new/deep/n.txt"] == ("file", b"n")
    assert "docs/b.md" not in after and after["docs"] == ("dir", b"")
    assert after["keep.txt"] == before["keep.txt"]
    assert os.stat(path / "run.sh").st_mode & 0o111  # a replaced file keeps its mode
    assert {k for k in after if k not in before} == {"new", "new/deep", "new/deep/n.txt"}
    assert branch.state is BranchState.APPLIED
    _no_leftovers(path)
    if kind == "git":
        assert (path / ".git" / "index").read_bytes() == index  # the index is not updated
        assert git(path, "status", "--porcelain").stdout != status
        assert set(git(path, "status", "--porcelain").stdout.split()) == {
            "M",
            "D",
            "??",
            "a.txt",
            "run.sh",
            "docs/b.md",
            "new/",
        }
    with pytest.raises(WorkspaceError):
        branch.apply(path)


async def _modify(path: Path) -> None:
    (path / "a.txt").write_text("edited by a person")


async def _delete(path: Path) -> None:
    (path / "a.txt").unlink()


async def _create(path: Path) -> None:
    (path / "new").mkdir()
    (path / "new" / "deep").mkdir()
    (path / "new" / "deep" / "n.txt").write_text("mine")


async def _to_dir(path: Path) -> None:
    (path / "a.txt").unlink()
    (path / "a.txt").mkdir()


async def _to_link(path: Path) -> None:
    (path / "a.txt").unlink()
    os.symlink("keep.txt", path / "a.txt")


async def _file_for_dir(path: Path) -> None:
    (path / "new").write_text("a file where the run makes a directory")


async def _deleted_modified(path: Path) -> None:
    (path / "docs" / "b.md").write_text("edited, and the run deletes it")


async def _dir_gone(path: Path) -> None:
    shutil.rmtree(path / "docs")


CHANGES: dict[str, tuple[Callable[[Path], Awaitable[None]], dict[str, str]]] = {
    "modified": (_modify, {"a.txt": "modified"}),
    "deleted": (_delete, {"a.txt": "deleted"}),
    "created": (_create, {"new/deep/n.txt": "created"}),
    "type changed to a directory": (_to_dir, {"a.txt": "a directory now"}),
    "type changed to a symlink": (_to_link, {"a.txt": "a symlink now"}),
    "a file where a directory is made": (_file_for_dir, {"new": "created"}),
    "a deleted file modified": (_deleted_modified, {"docs/b.md": "modified"}),
    "a directory deleted": (_dir_gone, {"docs": "deleted"}),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("change", list(CHANGES))
async def test_a_path_that_changed_since_the_freeze_refuses_the_apply_with_nothing_written(
    tmp_path: Path, kind: str, change: str
) -> None:
    path = _source(tmp_path, kind)
    branch = await _edit(_root(path, kind).for_run())
    make_change, expected = CHANGES[change]
    await make_change(path)
    before = snapshot(path)
    with pytest.raises(ApplyConflict) as info:
        branch.apply(path)
    assert info.value.conflicts == expected
    assert all(p in str(info.value) for p in expected)
    assert snapshot(path) == before
    _no_leftovers(path)
    assert branch.state is BranchState.OPEN
    branch.discard()


async def test_every_changed_path_is_named_at_once(tmp_path: Path) -> None:
    path = _source(tmp_path, "eager")
    branch = await _edit(_root(path, "eager").for_run())
    await _modify(path)
    await _create(path)
    with pytest.raises(ApplyConflict) as info:
        branch.apply(path)
    assert info.value.conflicts == {"a.txt": "modified", "new/deep/n.txt": "created"}


async def test_the_index_must_hold_the_root_commits_entries(tmp_path: Path) -> None:
    """Work tree as the root held it, the index not: refused, nothing written."""
    path = _source(tmp_path, "git")
    branch = await _edit(_root(path, "git").for_run())
    blob = git(path, "rev-parse", "HEAD:keep.txt").stdout.strip()
    git(path, "update-index", "--cacheinfo", f"100644,{blob},a.txt")  # staged other content
    git(
        path, "update-index", "--add", "--cacheinfo", f"100644,{blob},new/deep/n.txt"
    )  # staged, not on disk
    git(path, "update-index", "--chmod=-x", "run.sh")  # staged mode change
    before, index = snapshot(path), (path / ".git" / "index").read_bytes()
    with pytest.raises(ApplyConflict) as info:
        branch.apply(path)
    assert info.value.conflicts == {
        "a.txt": "staged otherwise in the index",
        "new/deep/n.txt": "added to the index",
        "run.sh": "staged otherwise in the index",
    }
    assert snapshot(path) == before and (path / ".git" / "index").read_bytes() == index


async def test_only_an_ok_run_applies_and_only_to_a_directory(tmp_path: Path) -> None:
    path = _source(tmp_path, "eager")
    host = Host(guest_factory=in_process_guest)
    host.register("workspace", Workspace.frozen(path))
    result = await host.run_source("workspace.write_text('a.txt', 'x')\nraise ValueError('no')\n")
    with pytest.raises(CommitError, match="partial"):
        result.workspaces["workspace"].apply(path)
    ok = await host.run_source("workspace.write_text('a.txt', 'x')\n")
    with pytest.raises(CommitError, match="not a directory"):
        ok.workspaces["workspace"].apply(path / "a.txt")
    assert (path / "a.txt").read_text() == "alpha"
    ok.workspaces["workspace"].apply(path)
    assert (path / "a.txt").read_text() == "x"


async def test_a_directory_where_the_run_deleted_a_file_is_refused_before_writing(
    tmp_path: Path,
) -> None:
    path = _source(tmp_path, "eager")
    branch = _root(path, "eager").for_run()
    await branch.delete("a.txt")
    await branch.write_text("a.txt/inside", "x")
    before = snapshot(path)
    with pytest.raises(WorkspaceError, match="replaces a file"):
        branch.apply(path)
    assert snapshot(path) == before


class Crash(BaseException):
    """Stands for the process dying at that instant (nothing below catches it)."""


OLD_OR_NEW = {
    "a.txt": {("file", b"alpha"), ("file", b"ALPHA")},
    "run.sh": {("file", b"#!/bin/sh\n"), ("file", b"#!/bin/sh\necho new\n")},
    "docs/b.md": {("file", b"beta"), None},
    "new/deep/n.txt": {None, ("file", b"n")},
    "keep.txt": {("file", b"keep")},
}
"""What each path ``_edit`` touches may hold at any instant of an apply: wholly old or new."""


def assert_old_or_new(seen: dict[str, tuple[str, bytes]]) -> None:
    for rel, allowed in OLD_OR_NEW.items():
        assert seen.get(rel) in allowed, (rel, seen.get(rel))


@pytest.mark.parametrize("kind", ["eager", "git"])
@pytest.mark.parametrize(("phase", "nth"), [("link", 2), ("write", 2), ("rename", 4)])
async def test_the_next_apply_finishes_or_rolls_back_an_interrupted_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, phase: str, nth: int
) -> None:
    """A crash while preparing (the ``nth`` ``link`` or ``write``: a backup link, a new
    content) leaves every file old and is rolled back; one while replacing (the 4th
    ``rename``: the journal's two, then the first file's) leaves each file old or new and
    is finished."""
    path = _source(tmp_path, kind)
    root = _root(path, kind)
    old = snapshot(path)
    calls = {"n": 0}
    real = getattr(os, phase)

    def crash_on_second(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == nth:
            raise Crash
        return real(*args, **kwargs)

    monkeypatch.setattr(apply_module.os, phase, crash_on_second)
    with pytest.raises(Crash):
        (await _edit(root.for_run())).apply(path)
    monkeypatch.setattr(apply_module.os, phase, real)
    assert journal_path(path).exists()
    assert journal_path(path).parent == (path / ".git" if kind == "git" else path)
    middle = snapshot(path)
    assert_old_or_new(middle)
    if phase == "rename":
        assert (
            middle["a.txt"] == ("file", b"ALPHA") and middle["run.sh"] == old["run.sh"]
        )  # half done
    else:
        assert {k: v for k, v in middle.items() if ".pysolate" not in k and k in old} == old
        assert recover(path) is not None  # rolled back
        assert snapshot(path) == old
    branch = await _edit(root.for_run())
    branch.apply(path)  # finishes (rename) or starts over
    final = snapshot(path)
    assert (
        final["a.txt"] == ("file", b"ALPHA")
        and "docs/b.md" not in final
        and final["new/deep/n.txt"] == ("file", b"n")
    )
    assert not journal_path(path).exists()
    _no_leftovers(path)
