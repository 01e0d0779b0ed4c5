"""Workspace roots over real projects (issue 38): a git commit read lazily, and a lazily
read directory. Each reads what its source held at the freeze, as an eager frozen root of
the same tree does, with memory bounded by what was read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from git_repos import git, head, make_repo

import pysolate._workspace._git_tree as git_tree
import pysolate._workspace._tree as tree_module
from pysolate import Host, Workspace, WorkspaceChanged, WorkspaceError
from pysolate.testing import in_process_guest

pytestmark = pytest.mark.anyio

FILES = {"a.txt": "alpha", "docs/b.md": "beta", "docs/deep/c.md": "gamma", "bin.dat": b"\x00\xff"}
LINKS = {
    "alias": "a.txt",
    "docs_alias": "docs",
    "docs/up": "../a.txt",
    "docs/loop": "..",
    "leak": "/etc/passwd",
    "escape": "../outside",
    "dangling": "nope.txt",
}
LFS = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 + "\nsize 12345\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    make_repo(
        path,
        {**FILES, "run.sh": "#!/bin/sh\n", "big.bin": LFS},
        links=LINKS,
        executable=("run.sh",),
    )
    return path


async def _view(ws: Workspace, skip: str = "") -> dict[str, object]:
    """Everything a program can observe of a root: every directory's listing, every file's
    content, every refused name (``skip``: a top-level name left out)."""
    seen: dict[str, object] = {}
    todo = [""]
    while todo:
        here = todo.pop()
        names = [n for n in await ws.list_dir(here or ".") if n != skip or here]
        seen[f"list {here}"] = names
        for name in names:
            path = f"{here}/{name}" if here else name
            try:
                seen[path] = await ws.read_bytes(path)
            except IsADirectoryError:
                todo.append(path)
            except PermissionError as exc:
                seen[path] = f"refused: {exc.strerror}"
    return seen


async def test_a_git_root_reads_what_the_commit_holds_as_a_frozen_checkout_does(repo: Path) -> None:
    """Symlinks followed inside, refused out (absolute, ``..`` past the root, loops),
    dangling ones absent: the same view as an eager freeze of the checkout."""
    ws = Workspace.git(repo)
    assert ws.root_id == f"git-{head(repo)}"
    assert ws.source == repo.resolve()
    assert await _view(ws) == await _view(Workspace.frozen(repo), skip=".git")
    assert await ws.read_text("docs_alias/deep/c.md") == "gamma"
    assert await ws.read_text("docs/up") == "alpha"
    for path in ("leak", "escape", "docs/loop/a.txt"):
        with pytest.raises(PermissionError, match="refused"):
            await ws.read_text(path)
    assert "dangling" not in await ws.list_dir()
    with pytest.raises(FileNotFoundError):
        await ws.read_text("dangling")
    assert ws.state_files() == {
        k: v for k, v in Workspace.frozen(repo).state_files().items() if not k.startswith(".git/")
    }


async def test_the_work_tree_and_index_do_not_matter_to_a_git_root(repo: Path) -> None:
    ws = Workspace.git(repo)
    (repo / "a.txt").write_text("edited")
    (repo / "untracked.txt").write_text("u")
    git(repo, "add", "a.txt")
    assert await ws.read_text("a.txt") == "alpha"
    assert not await ws.exists("untracked.txt")
    git(repo, "commit", "-qm", "second")
    assert await Workspace.git(repo).read_text("a.txt") == "edited"
    assert await Workspace.git(repo, "HEAD~1").read_text("a.txt") == "alpha"
    assert Workspace.git(repo, "HEAD~1").root_id == ws.root_id  # the id is the commit's


async def test_submodules_lfs_pointers_and_executables_as_the_repository_holds_them(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "r"
    make_repo(
        repo,
        {"a.txt": "a", "model.bin": LFS, "x.sh": "#!/bin/sh\n"},
        executable=("x.sh",),
        gitlinks={"vendor/lib": "1" * 40},
    )
    ws = Workspace.git(repo)
    assert await ws.list_dir() == ["a.txt", "model.bin", "vendor", "x.sh"]
    assert await ws.list_dir("vendor") == ["lib"]  # listed, like a refused name
    for attempt in (
        ws.read_text("vendor/lib"),
        ws.list_dir("vendor/lib"),
        ws.exists("vendor/lib/x"),
    ):
        with pytest.raises(PermissionError, match="submodule"):
            await attempt
    assert await ws.read_text("model.bin") == LFS  # the pointer, not the object
    assert await ws.read_text("x.sh") == "#!/bin/sh\n"
    branch = ws.for_run()
    with pytest.raises(PermissionError, match="submodule"):
        await branch.write_text("vendor/lib/new.txt", "x")


async def test_names_that_are_not_utf8_are_skipped_and_listed(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "ok.txt").write_text("ok")
    (Path(os.fsdecode(bytes(repo) + b"/bad\xff.txt"))).write_text("x")
    make_repo(repo, {})
    ws = Workspace.git(repo)
    assert await ws.list_dir() == ["ok.txt"]
    assert ws.skipped == (b"bad\xff.txt",)


async def test_a_git_root_reads_lazily_within_bounded_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Freezing reads no tree; the blob cache never holds more than its bound."""
    repo = tmp_path / "r"
    make_repo(repo, {f"f{i}.txt": str(i) * 1000 for i in range(40)})
    monkeypatch.setattr(git_tree, "GIT_BLOB_CACHE_BYTES", 5_000)
    ws = Workspace.git(repo)
    root = ws._tree
    assert isinstance(root, git_tree.GitTree)
    assert root.statistics() == {"blob_bytes": 0, "tree_entries": 0, "paths": 0}
    for i in range(40):
        assert await ws.read_text(f"f{i}.txt") == str(i) * 1000
        assert root.statistics()["blob_bytes"] <= 5_000
    assert root.statistics()["blob_bytes"] > 0


def test_a_missing_pygit2_names_the_extra(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pygit2", None)
    with pytest.raises(ImportError, match=r"pysolate\[git\]"):
        Workspace.git(repo)


def test_what_is_not_a_repository_or_a_commit_is_refused(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not a git repository"):
        Workspace.git(tmp_path / "nowhere")
    with pytest.raises(WorkspaceError, match="names no commit"):
        Workspace.git(repo, "no-such-branch")


# -- lazy directories -------------------------------------------------------------------


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    for path, content in FILES.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_bytes(content.encode() if isinstance(content, str) else content)
    os.symlink("a.txt", src / "alias")
    os.symlink(tmp_path, src / "leak")
    return src


async def test_a_lazy_root_shows_what_an_eager_one_does(source: Path) -> None:
    lazy, eager = Workspace.frozen(source, lazy=True), Workspace.frozen(source)
    assert await _view(lazy) == await _view(eager)
    assert lazy.state_files() == eager.state_files()
    assert (
        lazy.root_id.startswith("lazy-")
        and lazy.root_id == Workspace.frozen(source, lazy=True).root_id
    )


async def test_a_lazy_read_of_a_changed_file_fails(source: Path) -> None:
    ws = Workspace.frozen(source, lazy=True)
    assert await ws.read_text("a.txt") == "alpha"
    (source / "a.txt").write_text("omega")  # after the first read
    (source / "docs" / "b.md").write_text("BETA")  # before any read
    for path in ("a.txt", "docs/b.md", "alias"):
        with pytest.raises(WorkspaceChanged) as info:
            await ws.read_text(path)
        assert info.value.path == path
    os.utime(source / "docs" / "deep" / "c.md", ns=(1, 1))  # only touched
    with pytest.raises(WorkspaceChanged):
        await ws.read_text("docs/deep/c.md")  # never read: what it held is unknown
    assert Workspace.frozen(source, lazy=True).root_id != ws.root_id


async def test_a_lazy_file_touched_after_its_first_read_is_still_served(source: Path) -> None:
    ws = Workspace.frozen(source, lazy=True)
    assert await ws.read_text("a.txt") == "alpha"
    os.utime(source / "a.txt", ns=(5, 5))
    assert await ws.read_text("a.txt") == "alpha"  # the same content (its hash)


async def test_a_changed_file_ends_the_run_with_an_error(source: Path) -> None:
    host = Host(guest_factory=in_process_guest)
    host.register("workspace", Workspace.frozen(source, lazy=True))
    (source / "a.txt").write_text("changed")
    result = await host.run_source(
        "workspace.read_text('docs/b.md')\nworkspace.read_text('a.txt')\n"
    )
    assert result.status == "error"
    assert result.error is not None and result.error.type == "ToolError"
    assert "WorkspaceChanged" in result.error.message and "a.txt" in result.error.message


def test_the_size_limit_is_the_eager_modes_only(
    source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tree_module, "MAX_FROZEN_BYTES", 4)
    with pytest.raises(WorkspaceError, match="lazy=True"):
        Workspace.frozen(source)
    assert Workspace.frozen(source, lazy=True).root_id
