"""The frozen content of a workspace: a content-addressed tree, and path rules.

Split from ``_workspace`` (which keeps the branch and its capability methods): everything
here is immutable once built and shared by every branch, layer and run of a root.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

from ._exceptions import WorkspaceError

MAX_FROZEN_BYTES = 256 * 1024 * 1024
"""Largest total file content ``Workspace.frozen`` will hold in memory."""


class Tree:
    """The frozen content: immutable after construction, shared by every branch."""

    __slots__ = ("children", "dirs", "files", "refused", "root_id", "skipped", "source")

    def __init__(
        self,
        files: dict[str, bytes],
        dirs: set[str],
        refused: dict[str, str],
        source: Path | None,
        skipped: tuple[bytes, ...] = (),
    ) -> None:
        dirs.add("")
        for path in (*files, *refused, *dirs):
            parts = path.split("/")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
        self.files = files  # path -> content; never mutated
        self.dirs = frozenset(dirs)  # "" is the root
        self.refused = refused  # path -> why (symlink out, loop, special file)
        self.source = source
        self.skipped = skipped  # os.fsencode'd relative paths of names that are not text
        children: dict[str, set[str]] = {}
        for path in (*files, *refused, *self.dirs):
            if path:
                parent, _, name = path.rpartition("/")
                children.setdefault(parent, set()).add(name)
        self.children = children
        digest = hashlib.sha256()
        for path in sorted(files):
            digest.update(b"f\0" + path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
        for path in sorted(self.dirs):
            digest.update(b"d\0" + path.encode() + b"\0")
        for path in sorted(refused):
            digest.update(b"x\0" + path.encode() + b"\0")
        self.root_id = "ws-" + digest.hexdigest()[:32]


def freeze_directory(source: Path) -> Tree:
    root = Path(os.path.realpath(source))
    if not root.is_dir():
        raise WorkspaceError(f"not a directory: {source}")
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    refused: dict[str, str] = {}
    skipped: list[bytes] = []
    total = 0

    def inside(real: str) -> bool:
        return real == str(root) or real.startswith(str(root) + os.sep)

    def walk(real_dir: str, rel: str, chain: tuple[str, ...]) -> None:
        nonlocal total
        with os.scandir(real_dir) as entries:
            for entry in entries:
                path = f"{rel}/{entry.name}" if rel else entry.name
                if not is_text(entry.name):
                    # Not valid UTF-8 (os.fsdecode made lone surrogates): such a name
                    # cannot cross to the program, so the entry (and what is under it)
                    # is left out and listed in ``skipped``.
                    skipped.append(os.fsencode(path))
                    continue
                real = os.path.realpath(entry.path)
                if entry.is_symlink() and not inside(real):
                    refused[path] = "a symlink that leads out of the workspace"
                elif os.path.isdir(real):
                    if real in chain:
                        refused[path] = "a symlink loop"
                        continue
                    dirs.add(path)
                    walk(real, path, (*chain, real))
                elif os.path.isfile(real):
                    data = Path(real).read_bytes()
                    total += len(data)
                    if total > MAX_FROZEN_BYTES:
                        raise WorkspaceError(f"{source} holds more than {MAX_FROZEN_BYTES} bytes")
                    files[path] = data
                elif entry.is_symlink():
                    continue  # a dangling link inside the root: like a missing file
                else:
                    refused[path] = "not a regular file or directory"

    walk(str(root), "", (str(root),))
    return Tree(files, dirs, refused, root, tuple(sorted(skipped)))


def is_text(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def not_found(path: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def is_a_directory(path: str) -> IsADirectoryError:
    return IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)


def not_a_directory(path: str) -> NotADirectoryError:
    return NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)


def related(a: str, b: str) -> bool:
    """True when one path is the other or an ancestor of it ("" is everyone's ancestor)."""
    return a == b or not a or not b or a.startswith(b + "/") or b.startswith(a + "/")


def text_path(path: str) -> str:
    """``normalize(path)`` for a path that must also be valid text (``UnicodeEncodeError``)."""
    path.encode("utf-8")
    return normalize(path)


def normalize(path: str) -> str:
    """The canonical relative form of ``path``; ``PermissionError`` when it would escape."""
    if "\0" in path:
        raise ValueError("embedded null byte")
    if path.startswith("/"):
        raise PermissionError(errno.EACCES, "refused: absolute paths are outside the workspace", path)
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PermissionError(errno.EACCES, "refused: '..' leaves the workspace", path)
    return "/".join(parts)
