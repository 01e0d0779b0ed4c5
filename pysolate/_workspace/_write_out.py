"""``Workspace.commit``'s writing: a whole tree into a new directory, all or nothing.

The tree is written into a temporary sibling of the target (``.pysolate-commit-<random>``,
a fixed-length name, so a target whose own name is ``NAME_MAX`` long still has one), every
file relative to that directory's descriptor (so only the workspace's relative paths meet
``PATH_MAX``, which the branch checked when the program wrote them), and renamed onto the
target when it is complete: ``rename`` replaces an empty directory atomically. Whatever
fails on the way, the sibling is removed and the target is as it was (issue 35: a failed
commit lost the run's writes and left the branch neither committable nor discardable).

Prior art: the write-to-temp-then-rename idiom of every careful file writer (git's
lockfiles, ``rsync``'s temporary files).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from .._exceptions import CommitError

FILE_MODE = 0o666
"""Mode of a committed file before the umask (as ``open(path, "w")`` creates one)."""


def write_new_directory(out: Path, dirs: Iterable[str], files: Mapping[str, bytes]) -> None:
    """Write ``dirs`` and ``files`` (relative paths) as the new or empty directory ``out``.

    Raises ``CommitError`` when ``out`` exists and is not an empty directory (checked again
    by the final ``rename``, so a target filled meanwhile is not overwritten) or when the
    writing fails (the ``OSError`` is its cause); ``out`` is then as it was.
    """
    if out.exists() and (not out.is_dir() or out.is_symlink() or any(out.iterdir())):
        raise CommitError(f"commit target {out} exists and is not an empty directory")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommitError(f"cannot create the parent of the commit target {out}: {exc}") from exc
    staging = out.parent / f".pysolate-commit-{secrets.token_hex(8)}"
    try:
        os.mkdir(staging, 0o777)
        top = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for d in sorted(dirs):
                _mkdirs(top, d)
            for path, data in files.items():
                _write_file(top, path, data)
        finally:
            os.close(top)
        os.rename(staging, out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR) and out.exists():
            raise CommitError(f"commit target {out} exists and is not an empty directory") from exc
        raise CommitError(f"commit into {out} failed, nothing was written there: {exc}") from exc


def _mkdirs(top: int, path: str) -> None:
    """Create directory ``path`` and its parents under the directory ``top``."""
    done = ""
    for part in path.split("/"):
        done = f"{done}/{part}" if done else part
        with contextlib.suppress(FileExistsError):
            os.mkdir(done, 0o777, dir_fd=top)


def _write_file(top: int, path: str, data: bytes) -> None:
    fd = os.open(
        path,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        FILE_MODE,
        dir_fd=top,
    )
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
