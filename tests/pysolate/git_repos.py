"""Real git repositories for the workspace tests, made with the git command line.

``make_repo`` writes files, symlinks and executables into a new work tree and commits
them; a gitlink (submodule entry) can be added without a submodule checkout.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

IDENTITY = ("-c", "user.name=tester", "-c", "user.email=tester@example.com")


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *IDENTITY, *args], capture_output=True, text=True, check=check
    )


def make_repo(
    repo: Path,
    files: Mapping[str, str | bytes],
    *,
    links: Mapping[str, str] = {},
    executable: tuple[str, ...] = (),
    gitlinks: Mapping[str, str] = {},
    message: str = "initial",
) -> str:
    """A repository at ``repo`` whose HEAD commit holds these entries; returns its id."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for path, content in files.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
    for path in executable:
        os.chmod(repo / path, 0o755)
    for path, to in links.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(to, repo / path)
    git(repo, "add", "-A")
    for path, commit in gitlinks.items():
        git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},{path}")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return head(repo)


def head(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "rev-parse", rev).stdout.strip()


def snapshot(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under ``root`` but ``.git``: path -> (kind, content or link target)."""
    out: dict[str, tuple[str, bytes]] = {}
    for here, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" or Path(here) != root]
        for name in [*dirs, *names]:
            path = Path(here) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", os.fsencode(os.readlink(path)))
                if name in dirs:
                    dirs.remove(name)
            elif path.is_dir():
                out[rel] = ("dir", b"")
            else:
                out[rel] = ("file", path.read_bytes())
    return out
