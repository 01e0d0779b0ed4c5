"""``pysolate demo --git`` (issue 38): the demo on a git repository it creates; the
Pysolate run's changes become a commit on ``pysolate/demo``, the work tree untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from git_repos import git, snapshot


def test_the_demo_runs_on_a_git_repository_and_commits_its_changes(tmp_path: Path) -> None:
    repo = tmp_path / "demo-repo"
    done = subprocess.run(
        [sys.executable, "-m", "pysolate", "demo", "--speed", "50", "--json", "--git", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["equal"] is True
    assert out["pysolate"]["result"]["report"]["claimed"] > 0
    commit = out["git"]["commit"]
    assert git(repo, "rev-parse", "pysolate/demo").stdout.strip() == commit
    assert git(repo, "diff", "--name-status", "main", commit).stdout.split() == ["A", "standup.md"]
    assert git(repo, "show", f"{commit}:standup.md").stdout.startswith("# Standup ")
    assert "standup.md" not in snapshot(repo) and git(repo, "status", "--porcelain").stdout == ""
    assert git(repo, "fsck", "--strict", check=False).returncode == 0
