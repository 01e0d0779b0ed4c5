"""``branch.commit_to_git`` (issue 38): a run's changes as a real commit on its root commit,
the work tree and the index untouched, passing ``git fsck``."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_repos import git, head, make_repo, snapshot

from pysolate import CommitError, Host, Workspace, WorkspaceError
from pysolate._workspace._workspace import BranchState
from pysolate.testing import in_process_guest

pytestmark = pytest.mark.anyio

FILES = {
    "a.txt": "alpha",
    "docs/b.md": "beta",
    "only/c.md": "gamma",
    "run.sh": "#!/bin/sh\n",
    "old.lnk.txt": "target",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    make_repo(
        path,
        FILES,
        links={"alias": "a.txt", "re": "old.lnk.txt"},
        executable=("run.sh",),
        gitlinks={"vendor": "2" * 40},
    )
    return path


def _modes(repo: Path, rev: str) -> dict[str, str]:
    out = git(repo, "ls-tree", "-r", rev).stdout
    return {line.split("\t")[1]: line.split()[0] for line in out.splitlines()}


async def test_the_commit_holds_the_branch_and_nothing_else_moves(repo: Path) -> None:
    root_commit = head(repo)
    before, status = snapshot(repo), git(repo, "status", "--porcelain").stdout
    index = (repo / ".git" / "index").read_bytes()
    ws = Workspace.git(repo)
    branch = ws.for_run()
    await branch.write_text("a.txt", "changed")
    await branch.write_text("run.sh", "#!/bin/sh\necho hi\n")
    await branch.write_text("re", "a file now")
    await branch.write_text("new/deep/n.txt", "n")
    await branch.delete("only/c.md")
    commit = branch.commit_to_git("pysolate/run-1", "agent: edits")
    assert git(repo, "rev-parse", "pysolate/run-1").stdout.strip() == commit
    assert git(repo, "rev-parse", f"{commit}^").stdout.strip() == root_commit
    assert git(repo, "log", "-1", "--format=%s", commit).stdout.strip() == "agent: edits"
    committed = Workspace.git(repo, commit).state_files()
    # An unchanged symlink stays a link, so it shows its target's new content, as on a file
    # system; the branch reads it as a copy of what the target held in the root.
    assert committed == branch.state_files() | {"alias": b"changed"}
    assert git(repo, "show", f"{commit}:a.txt").stdout == "changed"
    modes = _modes(repo, commit)
    assert modes["run.sh"] == "100755"  # a rewritten executable stays executable
    assert (
        modes["alias"] == "120000" and modes["vendor"] == "160000"
    )  # untouched entries as they were
    assert modes["re"] == "100644" and modes["new/deep/n.txt"] == "100644"
    assert "only/c.md" not in modes and not any(
        p.startswith("only") for p in modes
    )  # an emptied directory goes
    assert snapshot(repo) == before
    assert git(repo, "status", "--porcelain").stdout == status
    assert (repo / ".git" / "index").read_bytes() == index
    assert head(repo) == root_commit
    fsck = git(repo, "fsck", "--strict", "--no-dangling", check=False)
    assert fsck.returncode == 0, fsck.stderr
    assert branch.state is BranchState.OPEN  # a commit of git objects ends nothing


async def test_a_run_commits_through_the_host_with_a_default_ref_and_author(repo: Path) -> None:
    host = Host(guest_factory=in_process_guest)
    host.register("workspace", Workspace.git(repo))
    result = await host.run_source(
        "workspace.write_text('docs/b.md', workspace.read_text('docs/b.md').upper())\n"
    )
    assert result.status == "ok", result.error
    commit = result.workspaces["workspace"].commit_to_git(
        message="upper", author=("Agent", "agent@example.com")
    )
    assert git(repo, "rev-parse", f"pysolate/run-{commit[:12]}").stdout.strip() == commit
    assert (
        git(repo, "log", "-1", "--format=%an <%ae>", commit).stdout.strip()
        == "Agent <agent@example.com>"
    )
    assert git(repo, "diff", "--name-only", "HEAD", commit).stdout.split() == ["docs/b.md"]


async def test_refs_that_exist_or_are_invalid_are_refused(repo: Path) -> None:
    branch = Workspace.git(repo).for_run()
    await branch.write_text("a.txt", "x")
    with pytest.raises(CommitError, match="refs/heads/main"):
        branch.commit_to_git("main")
    with pytest.raises(CommitError, match="not a valid"):
        branch.commit_to_git("bad..name")
    assert branch.commit_to_git("refs/pysolate/ok")


async def test_only_an_ok_run_of_a_git_root_commits(repo: Path) -> None:
    host = Host(guest_factory=in_process_guest)
    host.register("workspace", Workspace.git(repo))
    result = await host.run_source("workspace.write_text('a.txt', 'x')\n1 / 0\n")
    assert result.status == "error"
    with pytest.raises(CommitError, match="partial"):
        result.workspaces["workspace"].commit_to_git("pysolate/partial")
    assert git(repo, "rev-parse", "--verify", "-q", "pysolate/partial", check=False).returncode != 0
    with pytest.raises(CommitError, match=r"Workspace\.git"):
        Workspace.from_files({"a": "1"}).for_run().commit_to_git("x")
    with pytest.raises(WorkspaceError):
        Workspace.git(repo).commit_to_git("root")  # a root has nothing to commit
