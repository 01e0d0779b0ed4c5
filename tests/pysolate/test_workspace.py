"""Workspace: frozen content-addressed root, copy-on-write branches, views, escapes, commit."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pysolate import CommitError, Workspace, WorkspaceError
from pysolate._workspace._workspace import BranchState

pytestmark = pytest.mark.anyio


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "docs").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "a.txt").write_text("alpha")
    (src / "docs" / "b.md").write_text("beta")
    (src / "bin.dat").write_bytes(b"\x00\xff")
    return src


async def test_reads_see_the_frozen_directory(source: Path) -> None:
    ws = Workspace.frozen(source)
    assert await ws.read_text("a.txt") == "alpha"
    assert await ws.read_text("./docs//b.md") == "beta"
    assert await ws.read_bytes("bin.dat") == b"\x00\xff"
    assert await ws.list_dir() == ["a.txt", "bin.dat", "docs", "empty"]
    assert await ws.list_dir("empty") == []
    assert await ws.exists("docs") and await ws.exists("docs/b.md")
    assert not await ws.exists("nope")


async def test_the_root_is_frozen_against_later_changes_on_disk(source: Path) -> None:
    ws = Workspace.frozen(source)
    (source / "a.txt").write_text("changed")
    assert await ws.read_text("a.txt") == "alpha"


async def test_the_root_id_is_the_content_address(source: Path, tmp_path: Path) -> None:
    first = Workspace.frozen(source).root_id
    assert Workspace.frozen(source).root_id == first
    copy = tmp_path / "copy"
    copy.mkdir()
    for rel, data in _tree(source).items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes(data)
    (copy / "empty").mkdir()
    assert Workspace.frozen(copy).root_id == first
    (source / "a.txt").write_text("alpha!")
    assert Workspace.frozen(source).root_id != first


@pytest.mark.parametrize(
    ("path", "error", "code"),
    [
        ("nope.txt", FileNotFoundError, errno.ENOENT),
        ("docs", IsADirectoryError, errno.EISDIR),
    ],
)
async def test_failed_reads_raise_what_a_file_system_would(
    source: Path, path: str, error: type[OSError], code: int
) -> None:
    ws = Workspace.frozen(source)
    with pytest.raises(error) as info:
        await ws.read_text(path)
    assert info.value.errno == code
    assert info.value.filename == path
    with pytest.raises(NotADirectoryError):
        await ws.list_dir("a.txt")


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "docs/../../x", "..", "a/.."])
async def test_escaping_paths_are_refused(source: Path, path: str) -> None:
    ws = Workspace.frozen(source).for_run()
    for attempt in (
        ws.read_text(path),
        ws.exists(path),
        ws.write_text(path, "x"),
        ws.list_dir(path),
    ):
        with pytest.raises(PermissionError, match="refused"):
            await attempt


async def test_symlinks_out_are_refused_and_symlinks_in_are_followed(
    source: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key").write_text("hunter2")
    os.symlink(outside / "key", source / "leak")
    os.symlink(outside, source / "leakdir")
    os.symlink(source / "a.txt", source / "alias")
    os.symlink(source / "docs", source / "docs_alias")
    os.symlink(source, source / "docs" / "loop")
    ws = Workspace.frozen(source)
    assert await ws.read_text("alias") == "alpha"
    assert await ws.read_text("docs_alias/b.md") == "beta"
    for path in ("leak", "leakdir/key", "leakdir", "docs/loop/a.txt"):
        with pytest.raises(PermissionError, match="refused"):
            await ws.read_text(path)
    assert "hunter2" not in repr(ws.state_files())
    assert {"leak", "leakdir"} <= set(await ws.list_dir())  # listed as names, never opened


async def test_the_root_refuses_writes(source: Path) -> None:
    ws = Workspace.frozen(source)
    with pytest.raises(PermissionError, match="frozen"):
        await ws.write_text("new.txt", "x")
    with pytest.raises(PermissionError):
        await ws.delete("a.txt")


async def test_a_branch_reads_its_own_writes_and_deletes(source: Path) -> None:
    root = Workspace.frozen(source)
    ws = root.for_run()
    await ws.write_text("a.txt", "new alpha")
    await ws.write_bytes("out/deep/c.bin", b"\x01")
    await ws.delete("docs/b.md")
    assert await ws.read_text("a.txt") == "new alpha"
    assert await ws.read_bytes("out/deep/c.bin") == b"\x01"
    assert await ws.list_dir() == ["a.txt", "bin.dat", "docs", "empty", "out"]
    assert await ws.list_dir("docs") == []  # the directory stays, like on disk
    assert not await ws.exists("docs/b.md")
    with pytest.raises(FileNotFoundError):
        await ws.read_text("docs/b.md")
    with pytest.raises(FileNotFoundError):
        await ws.delete("docs/b.md")
    await ws.write_text("docs/b.md", "again")
    assert await ws.read_text("docs/b.md") == "again"
    assert await root.read_text("a.txt") == "alpha"  # the root never changes
    assert ws.changes() == {"a.txt": b"new alpha", "docs/b.md": b"again", "out/deep/c.bin": b"\x01"}


async def test_writes_that_a_file_system_would_refuse(source: Path) -> None:
    ws = Workspace.frozen(source).for_run()
    with pytest.raises(IsADirectoryError):
        await ws.write_text("docs", "x")
    with pytest.raises(NotADirectoryError):
        await ws.write_text("a.txt/inner", "x")
    with pytest.raises(IsADirectoryError):
        await ws.delete("docs")
    with pytest.raises(TypeError):
        await ws.write_bytes("x", "not bytes")  # type: ignore[arg-type]
    assert ws.changes() == {}


async def test_branches_are_private_to_their_run(source: Path) -> None:
    root = Workspace.frozen(source)
    one, two = root.for_run(), root.for_run()
    await one.write_text("a.txt", "one")
    assert await two.read_text("a.txt") == "alpha"


async def test_views_change_exactly_when_a_write_may_affect_the_read(source: Path) -> None:
    ws = Workspace.frozen(source).for_run()
    root_id = ws.root_id

    def view(method: str, path: str) -> str:
        return ws.view_of(method, {"path": path})

    assert view("read_text", "a.txt") == root_id
    await ws.write_text("docs/new.md", "n")
    assert view("read_text", "a.txt") == root_id  # untouched: still claims root results
    after_one = view("list_dir", "docs")
    assert after_one != root_id
    assert view("list_dir", ".") == after_one  # anything under the directory counts
    assert view("exists", "docs/new.md") == after_one
    await ws.write_text("docs/new.md", "m")
    assert view("read_text", "docs/new.md") not in (root_id, after_one)  # every write changes it
    await ws.delete("a.txt")
    assert view("read_text", "a.txt") != root_id
    assert view("read_text", "../x") == root_id  # refused either way


async def test_commit_writes_the_whole_tree_and_leaves_the_source_alone(
    source: Path, tmp_path: Path
) -> None:
    before = _tree(source)
    ws = Workspace.frozen(source).for_run()
    await ws.write_text("a.txt", "committed")
    await ws.write_text("new/n.txt", "n")
    await ws.delete("bin.dat")
    out = ws.commit(tmp_path / "out")
    assert _tree(out) == {"a.txt": b"committed", "docs/b.md": b"beta", "new/n.txt": b"n"}
    assert (out / "empty").is_dir()
    assert _tree(source) == before
    assert ws.state is BranchState.COMMITTED
    with pytest.raises(WorkspaceError):
        ws.discard()


async def test_discard_drops_the_writes(source: Path, tmp_path: Path) -> None:
    before = _tree(source)
    ws = Workspace.frozen(source).for_run()
    await ws.write_text("a.txt", "gone")
    ws.discard()
    assert ws.changes() == {}
    assert _tree(source) == before
    with pytest.raises(WorkspaceError):
        ws.commit(tmp_path / "late")
    with pytest.raises(PermissionError):
        await ws.write_text("a.txt", "after the end")


async def test_commit_refuses_the_source_and_non_empty_targets(
    source: Path, tmp_path: Path
) -> None:
    ws = Workspace.frozen(source).for_run()
    with pytest.raises(CommitError, match="source"):
        ws.commit(source)
    with pytest.raises(CommitError, match="source"):
        ws.commit(source / "docs")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(CommitError, match="not an empty"):
        ws.commit(tmp_path / "busy")
    assert ws.state is BranchState.OPEN
    with pytest.raises(WorkspaceError):
        Workspace.frozen(source).commit(tmp_path / "root")  # a root has nothing to commit


async def test_a_memory_workspace_behaves_like_a_frozen_directory() -> None:
    ws = Workspace.from_files({"a.txt": "alpha", "d/b.bin": b"\x02"}, dirs=["e"])
    assert await ws.list_dir() == ["a.txt", "d", "e"]
    assert await ws.read_bytes("d/b.bin") == b"\x02"
    assert ws.source is None
    assert (
        Workspace.from_files({"a.txt": "alpha", "d/b.bin": b"\x02"}, dirs=["e"]).root_id
        == ws.root_id
    )


def test_freezing_something_that_is_not_a_directory_fails(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError):
        Workspace.frozen(tmp_path / "missing")


async def test_a_layer_is_a_copy_of_the_branch_whose_views_continue_it() -> None:
    """A session turn writes on a layer: the branch is untouched until the layer is adopted,
    and a path the layer wrote gets a view id the branch never had (no stale claim)."""
    branch = Workspace.from_files({"a": "1"}).for_run()
    await branch.write_text("a", "2")
    before = branch.view_of("read_text", {"path": "a"})
    layer = branch.layer()
    assert layer.view_of("read_text", {"path": "a"}) == before
    await layer.write_text("a", "3")
    await layer.write_text("b", "4")
    assert await branch.read_text("a") == "2" and not await branch.exists("b")
    assert layer.changes() == {"a": b"3", "b": b"4"}
    assert layer.view_of("read_text", {"path": "a"}) not in (before, branch.root_id)
    branch.discard()
    with pytest.raises(WorkspaceError):
        branch.layer()
