"""The frozen content of a workspace (its *root*), and the path rules every root shares.

Split from ``_workspace`` (which keeps the branch and its capability methods): a root is
immutable once built and shared by every branch, layer and run of it. Three kinds serve
the ``Root`` protocol below:

- ``Tree`` (here): the content in memory, from ``Workspace.from_files`` or an eager
  ``Workspace.frozen`` (at most ``MAX_FROZEN_BYTES``); its id is a hash of the content;
- ``LazyTree`` (``_lazy_tree``): a directory's listing and each file's identity, read on
  demand, a changed file failing its read;
- ``GitTree`` (``_git_tree``): a git commit, read lazily from the object store.

Whatever the kind, a root's paths are relative and ``/``-separated; a symlink is followed
when it stays inside (its target's content, a copy as far as the branch is concerned), and
refused (the name is listed, its use is not) when it leads out, loops or is something a
workspace cannot hold. Writes go to a branch, and a write is checked there against
``writable``'s rules, so that whatever the branch holds can be committed or applied.
"""

from __future__ import annotations

import errno
import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, Protocol, TypeVar

from .._exceptions import WorkspaceError

MAX_FROZEN_BYTES = 256 * 1024 * 1024
"""Largest total file content an eager ``Workspace.frozen`` will hold in memory (a lazy or
git root holds only what runs read, within its cache)."""

NAME_MAX = 255
"""Longest path component in bytes (UTF-8), as Linux file systems allow: a longer one fails
the write with the ``OSError`` (``ENAMETOOLONG``) that CPython's ``open`` would raise."""

PATH_MAX = 4096
"""Longest path in bytes, its terminating NUL included (Linux ``PATH_MAX``): a relative path
of ``PATH_MAX`` bytes or more fails the write with ``ENAMETOOLONG``. Commits and applies
work relative to directory descriptors, so the target's own prefix does not count."""

Kind = Literal["file", "link", "dir", "missing"]


@dataclass(frozen=True, slots=True)
class Held:
    """What a root held at one path, as ``apply`` compares it with the disk: the kind of
    entry (a followed symlink is ``link``, with its target text) and, for a file, what
    identifies its content: a SHA-256, a git blob id, or a lazy root's file identity
    (``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)``) with the SHA-256 once read.
    ``mode`` is the git file mode where the root is a commit (the index check)."""

    kind: Kind
    sha256: bytes | None = None
    git_oid: bytes | None = None
    identity: tuple[int, ...] | None = None
    link: bytes | None = None
    mode: int | None = None


class Root(Protocol):
    """The frozen content a ``Workspace`` reads (the module docstring). Paths are normalized
    (``normalize``); a path refused by ``refused`` is never asked of the other methods."""

    @property
    def root_id(self) -> str:
        """The identity of the content: equal ids, equal content (docs/glossary.md, "Root")."""
        ...

    @property
    def source(self) -> Path | None:
        """The directory the root came from (a git work tree), if any; never written."""
        ...

    @property
    def skipped(self) -> tuple[bytes, ...]:
        """Paths left out because their names are not valid UTF-8 (as bytes)."""
        ...

    def refused(self, path: str) -> str | None:
        """Why ``path`` (or an entry it goes through) cannot be used, else None."""
        ...

    def kind(self, path: str) -> Kind:
        """``file`` or ``dir`` (symlinks followed), else ``missing``."""
        ...

    def file(self, path: str) -> bytes | None:
        """The content of the file at ``path``, None when there is none."""
        ...

    def differs(self, path: str, data: bytes) -> bool:
        """Whether ``data`` is not what the file at ``path`` holds (True when there is none,
        and when that cannot be known without reading a file that changed on disk)."""
        ...

    def names(self, path: str) -> Iterable[str]:
        """The names in directory ``path``: files and directories (symlinks followed) and
        refused entries, not dangling symlinks."""
        ...

    def through_link(self, path: str) -> bool:
        """Whether ``path`` goes through a symlinked directory of the root (a write there
        would land elsewhere on disk than in the branch, so it is refused)."""
        ...

    def files(self) -> Iterator[str]:
        """Every file path (symlinks followed, in no particular order)."""
        ...

    def dirs(self) -> Iterator[str]:
        """Every directory path but the root's own ``""``."""
        ...

    def held(self, path: str) -> Held:
        """What the root holds at ``path`` (``Held``)."""
        ...


_Entry = TypeVar("_Entry")
"""What a listed root keeps per file: the content (``Tree``), or where and what it was (``LazyTree``)."""


class Listed(ABC, Generic[_Entry]):
    """The part of ``Root`` that a root built from a directory listing answers from the
    listing alone (``Tree``, ``LazyTree``): all but what a file holds (``file``, ``differs``
    and ``_held_file``, the subclass's). A subclass's ``__init__`` sets every slot."""

    __slots__ = (
        "_children",
        "_dirs",
        "_files",
        "_links",
        "_refused",
        "_skipped",
        "_source",
        "root_id",
    )

    _files: dict[str, _Entry]  # path -> entry; never mutated
    _dirs: frozenset[str]  # "" is the root
    _refused: dict[str, str]  # path -> why (symlink out, loop, special file)
    _links: dict[str, bytes]  # path -> target text of each followed symlink
    _children: dict[str, set[str]]
    _source: Path | None
    _skipped: tuple[bytes, ...]  # os.fsencode'd relative paths of names that are not text
    root_id: str

    @property
    def source(self) -> Path | None:
        return self._source

    @property
    def skipped(self) -> tuple[bytes, ...]:
        return self._skipped

    def refused(self, path: str) -> str | None:
        return refused_under(self._refused, path)

    def kind(self, path: str) -> Kind:
        if path in self._files:
            return "file"
        return "dir" if path in self._dirs else "missing"

    def names(self, path: str) -> Iterable[str]:
        return self._children.get(path, ())

    def through_link(self, path: str) -> bool:
        return bool(self._links) and any(p in self._links for p in ancestors(path))

    def files(self) -> Iterator[str]:
        return iter(self._files)

    def dirs(self) -> Iterator[str]:
        return (d for d in self._dirs if d)

    def held(self, path: str) -> Held:
        link = self._links.get(path)
        if link is not None:
            return Held("link", link=link)
        entry = self._files.get(path)
        if entry is not None:
            return self._held_file(entry)
        return Held("dir") if path in self._dirs else Held("missing")

    @abstractmethod
    def _held_file(self, entry: _Entry) -> Held:
        """What the root holds at a file's path, from its entry."""


class Tree(Listed[bytes]):
    """The frozen content in memory: immutable after construction, shared by every branch."""

    __slots__ = ()

    def __init__(
        self,
        files: dict[str, bytes],
        dirs: set[str],
        refused: dict[str, str],
        source: Path | None,
        skipped: tuple[bytes, ...] = (),
        links: dict[str, bytes] | None = None,
    ) -> None:
        dirs.add("")
        for path in (*files, *refused, *dirs):
            parts = path.split("/")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
        self._files = files
        self._dirs = frozenset(dirs)
        self._refused = refused
        self._source = source
        self._skipped = skipped
        self._links = links or {}
        self._children = children_of((*files, *refused, *self._dirs))
        self.root_id = content_id(files, self._dirs, refused)

    def file(self, path: str) -> bytes | None:
        return self._files.get(path)

    def differs(self, path: str, data: bytes) -> bool:
        return self._files.get(path) != data

    def _held_file(self, entry: bytes) -> Held:
        return Held("file", sha256=hashlib.sha256(entry).digest())


def refused_under(refused: dict[str, str], path: str) -> str | None:
    """Why ``path`` cannot be read: the reason recorded for it or for the nearest of its
    ancestors that the freeze refused (a symlink out of the tree, a special file), else None."""
    if not refused:
        return None
    parts = path.split("/") if path else []
    for i in range(1, len(parts) + 1):
        why = refused.get("/".join(parts[:i]))
        if why is not None:
            return why
    return None


def content_id(files: dict[str, bytes], dirs: Iterable[str], refused: Iterable[str]) -> str:
    """The id of an in-memory root: a hash of every path and content (equal roots, equal ids)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(b"f\0" + path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    for path in sorted(dirs):
        digest.update(b"d\0" + path.encode() + b"\0")
    for path in sorted(refused):
        digest.update(b"x\0" + path.encode() + b"\0")
    return "ws-" + digest.hexdigest()[:32]


def children_of(paths: Iterable[str]) -> dict[str, set[str]]:
    children: dict[str, set[str]] = {}
    for path in paths:
        if path:
            parent, _, name = path.rpartition("/")
            children.setdefault(parent, set()).add(name)
    return children


def ancestors(path: str) -> Iterator[str]:
    """The proper ancestors of ``path`` but the root, outermost first."""
    at = path.find("/")
    while at != -1:
        yield path[:at]
        at = path.find("/", at + 1)


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
        raise PermissionError(
            errno.EACCES, "refused: absolute paths are outside the workspace", path
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PermissionError(errno.EACCES, "refused: '..' leaves the workspace", path)
    return "/".join(parts)


def check_writable(path: str, normalized: str) -> None:
    """Refuse, as the write's own error, what no commit or apply could write (issue 35):
    a too long name (``check_length``), and a ``.git`` component (``PermissionError``: a
    git directory is never a workspace's to write, and git refuses such a tree entry)."""
    check_length(path, normalized)
    if any(part.lower() == ".git" for part in normalized.split("/")):
        raise PermissionError(
            errno.EACCES, "refused: a .git directory is not part of the workspace", path
        )


def check_length(path: str, normalized: str) -> None:
    """``OSError(ENAMETOOLONG)``, as CPython's ``open`` raises it, for a component over
    ``NAME_MAX`` bytes or a path of ``PATH_MAX`` bytes or more."""
    if len(os.fsencode(path)) >= PATH_MAX or any(
        len(os.fsencode(part)) > NAME_MAX for part in normalized.split("/")
    ):
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), path)


def freeze_directory(source: Path) -> Tree:
    """An eager root: every file of ``source`` read into memory (``MAX_FROZEN_BYTES``)."""
    scan = scan_directory(source)
    files: dict[str, bytes] = {}
    total = 0
    for path, (real, _) in scan.files.items():
        data = Path(real).read_bytes()
        total += len(data)
        if total > MAX_FROZEN_BYTES:
            raise WorkspaceError(
                f"{source} holds more than {MAX_FROZEN_BYTES} bytes (Workspace.frozen(path, lazy=True) reads on demand)"
            )
        files[path] = data
    return Tree(files, scan.dirs, scan.refused, scan.root, scan.skipped, scan.links)


@dataclass(slots=True)
class Scan:
    """A directory walked without reading any file (``scan_directory``)."""

    root: Path
    files: dict[str, tuple[str, os.stat_result]]  # path -> (real path, its stat)
    dirs: set[str]
    refused: dict[str, str]
    links: dict[str, bytes]  # path -> target text of each symlink followed
    skipped: tuple[bytes, ...]


def scan_directory(source: Path) -> Scan:
    """Walk ``source``: symlinks that resolve inside are followed; ones that lead out, loops
    and special files are refused; names that are not UTF-8 are skipped (with what is
    under them); a dangling symlink inside is like a missing file."""
    root = Path(os.path.realpath(source))
    if not root.is_dir():
        raise WorkspaceError(f"not a directory: {source}")
    out = Scan(root, {}, set(), {}, {}, ())
    skipped: list[bytes] = []
    prefix = str(root) + os.sep

    def walk(real_dir: str, rel: str, chain: tuple[str, ...]) -> None:
        with os.scandir(real_dir) as entries:
            for entry in entries:
                path = f"{rel}/{entry.name}" if rel else entry.name
                if not is_text(entry.name):
                    # Not valid UTF-8 (os.fsdecode made lone surrogates): such a name
                    # cannot cross to the program, so the entry (and what is under it)
                    # is left out and listed in ``skipped``.
                    skipped.append(os.fsencode(path))
                    continue
                link = entry.is_symlink()
                real = os.path.realpath(entry.path)
                if link and not (real == str(root) or real.startswith(prefix)):
                    out.refused[path] = "a symlink that leads out of the workspace"
                    continue
                if link:
                    out.links[path] = os.fsencode(os.readlink(entry.path))
                if os.path.isdir(real):
                    if real in chain:
                        out.refused[path] = "a symlink loop"
                        continue
                    out.dirs.add(path)
                    walk(real, path, (*chain, real))
                elif os.path.isfile(real):
                    out.files[path] = (real, os.stat(real))
                elif link:
                    out.links.pop(path)  # a dangling link inside the root: like a missing file
                else:
                    out.refused[path] = "not a regular file or directory"

    walk(str(root), "", (str(root),))
    out.skipped = tuple(sorted(skipped))
    return out
