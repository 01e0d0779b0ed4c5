"""A git commit as a workspace root: ``Workspace.git(repo, rev="HEAD")``.

A commit is the frozen root the contract asks for, ready made: immutable and
content-addressed, so its id can be the root's (``git-<commit id>``) and every run of every
Host that freezes the same commit shares its early reads (docs/glossary.md, "Root"). Freezing
resolves ``rev`` to a commit and nothing more; a path is resolved when a run first uses it,
through the tree objects it crosses (each read once, then cached), and a file's content is
its blob, read from the object store. Nothing is checked out, so neither the work tree nor
the index matters to a run (``apply`` looks at them, at the end).

What the repository holds is served as it holds it: a symlink (mode 120000) is followed
when its target stays inside the commit, as a frozen directory follows one, and refused
when it is absolute, leaves the tree, or loops; a submodule (a gitlink, 160000) is listed
and refused, its files being in another repository; an executable file reads like any
other (``commit_to_git`` keeps its mode); a Git LFS pointer is the small text file the
commit holds, not the object it points at. A name that is not UTF-8 is left out and listed
in ``skipped``.

Memory is bounded by what runs read, not by the repository: ``GIT_BLOB_CACHE_BYTES`` of
blobs, ``GIT_TREE_CACHE_ENTRIES`` tree entries and ``GIT_PATH_CACHE`` resolved paths, each
least recently used first out. Reads go through libgit2 (``pygit2``, the optional extra
``pysolate[git]``): measured against dulwich and ``git cat-file --batch``
(``benchmarks/git_libraries.py``, docs/benchmarks.md), it was the fastest at what runs do
most (small blobs, directory listings) and writes objects for ``commit_to_git`` in process.

Prior art: git's own lazy trees (``git cat-file``, partial clones); overlayfs' lower layer.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .._exceptions import WorkspaceError
from ._tree import Held, Kind

GIT_BLOB_CACHE_BYTES = 64 * 1024 * 1024
"""Most blob content a git root keeps in memory (least recently read out first)."""

GIT_BLOB_CACHED_MAX = 8 * 1024 * 1024
"""Largest blob the cache keeps (a bigger one is read from the object store each time)."""

GIT_TREE_CACHE_ENTRIES = 256 * 1024
"""Most tree entries (over all cached tree objects) a git root keeps parsed."""

GIT_PATH_CACHE = 64 * 1024
"""Most resolved paths a git root remembers."""

MAX_LINK_HOPS = 40
"""Symlinks followed while resolving one path before it is refused as a loop (Linux's
``MAXSYMLINKS``)."""

TREE, BLOB, EXECUTABLE, LINK, GITLINK = 0o040000, 0o100644, 0o100755, 0o120000, 0o160000
"""The git file modes a tree entry can have."""

OUT = "a symlink that leads out of the workspace"
LOOP = "a symlink loop"
SUBMODULE = "a submodule (its files are in another repository)"


def load_pygit2() -> ModuleType:
    """``pygit2``, or an ``ImportError`` naming the extra that installs it."""
    try:
        import pygit2
    except ImportError as exc:
        raise ImportError(
            "Workspace.git and commit_to_git need pygit2: pip install 'pysolate[git]'"
        ) from exc
    return pygit2


@dataclass(frozen=True, slots=True)
class Found:
    """One resolved path: what it is, and how it was reached."""

    kind: Kind | None  # None: refused (``why``)
    oid: bytes = b""  # the blob or tree (raw id)
    mode: int = 0  # the entry's git mode (of the target, for a followed link)
    canon: tuple[str, ...] = ()  # the path with every symlink resolved
    why: str | None = None
    through_link: bool = False  # a proper ancestor was a symlink
    link: bytes | None = None  # the final component is a symlink with this target text
    link_oid: bytes = b""


MISSING = Found("missing")


class GitTree:
    """The ``Root`` of one commit (the module docstring). Safe to share between threads."""

    def __init__(self, repo: str | os.PathLike[str], rev: str) -> None:
        pygit2 = load_pygit2()
        try:
            repository = pygit2.Repository(str(repo))
        except pygit2.GitError as exc:
            raise WorkspaceError(f"not a git repository: {repo} ({exc})") from None
        try:
            commit = repository.revparse_single(rev).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError) as exc:
            raise WorkspaceError(f"{rev!r} names no commit in {repo} ({exc})") from None
        self._pygit2 = pygit2
        self.repository: Any = repository
        self.commit = commit.id  # pygit2.Oid
        self.tree = commit.tree_id.raw
        self.root_id = f"git-{commit.id}"
        workdir = repository.workdir
        self._source = Path(workdir).resolve() if workdir else None
        self._lock = threading.RLock()  # guards the caches and the repository handle
        self._blobs: OrderedDict[bytes, bytes] = OrderedDict()
        self._blob_bytes = 0
        self._trees: OrderedDict[bytes, dict[str, tuple[int, bytes]]] = OrderedDict()
        self._tree_entries = 0  # entries held in _trees and _objects together
        self._objects: OrderedDict[bytes, Any] = OrderedDict()  # raw id -> pygit2.Tree
        self._paths: OrderedDict[str, Found] = OrderedDict()
        self._skipped: tuple[bytes, ...] | None = None

    # -- Root ---------------------------------------------------------------------------

    @property
    def source(self) -> Path | None:
        return self._source

    @property
    def skipped(self) -> tuple[bytes, ...]:
        """Computed on first use: it takes a walk of the whole commit."""
        if self._skipped is None:
            found: list[bytes] = []
            self._undecodable(self.tree, b"", found)
            self._skipped = tuple(sorted(found))
        return self._skipped

    def refused(self, path: str) -> str | None:
        return self.resolve(path).why

    def kind(self, path: str) -> Kind:
        return self.resolve(path).kind or "missing"

    def file(self, path: str) -> bytes | None:
        found = self.resolve(path)
        return self.blob(found.oid) if found.kind == "file" else None

    def differs(self, path: str, data: bytes) -> bool:
        found = self.resolve(path)
        if found.kind != "file":
            return True
        width = len(found.oid)
        header = b"blob %d\0" % len(data)
        digest = (
            hashlib.sha1(header + data) if width == 20 else hashlib.sha256(header + data)
        ).digest()
        return digest != found.oid  # the blob id says it without reading the blob

    def names(self, path: str) -> Iterable[str]:
        found = self.resolve(path)
        if found.kind != "dir":
            return ()
        prefix = f"{path}/" if path else ""
        return [
            name
            for name, (mode, _) in self.entries(found.oid).items()
            if mode != LINK
            or self.resolve(prefix + name).kind != "missing"  # a dangling link is not there
        ]

    def through_link(self, path: str) -> bool:
        return self.resolve(path).through_link

    def files(self) -> Iterator[str]:
        return (path for path, kind in self._walk() if kind == "file")

    def dirs(self) -> Iterator[str]:
        return (path for path, kind in self._walk() if kind == "dir")

    def held(self, path: str) -> Held:
        found = self.resolve(path)
        if found.link is not None:
            return Held("link", link=found.link, git_oid=found.link_oid, mode=LINK)
        if found.kind == "file":
            return Held("file", git_oid=found.oid, mode=found.mode)
        return Held(found.kind or "missing")

    # -- the object store ---------------------------------------------------------------

    def entries(self, oid: bytes) -> dict[str, tuple[int, bytes]]:
        """A tree object's entries: name -> (mode, raw id); names that are not UTF-8 left out."""
        with self._lock:
            cached = self._trees.get(oid)
            if cached is not None:
                self._trees.move_to_end(oid)
                return cached
            data = self.repository.odb.read(self._pygit2.Oid(raw=oid))[1]
            width = len(oid)
            parsed: dict[str, tuple[int, bytes]] = {}
            at, end = 0, len(data)
            while at < end:
                space = data.index(b" ", at)
                nul = data.index(b"\0", space)
                with contextlib.suppress(
                    UnicodeDecodeError
                ):  # such a name is listed in ``skipped``
                    parsed[data[space + 1 : nul].decode("utf-8")] = (
                        int(data[at:space], 8),
                        data[nul + 1 : nul + 1 + width],
                    )
                at = nul + 1 + width
            self._trees[oid] = parsed
            self._tree_entries += len(parsed) + 1
            self._trim()
            return parsed

    def entry(self, oid: bytes, name: str) -> tuple[int, bytes] | None:
        """The entry ``name`` of tree ``oid``: libgit2 looks it up in the tree object (a
        binary search, no parse in Python); a name it does not find there (missing, or a
        submodule, whose commit libgit2 cannot load) is looked up in ``entries``."""
        with self._lock:
            tree = self._objects.get(oid)
            if tree is None:
                tree = self.repository[self._pygit2.Oid(raw=oid)]
                self._objects[oid] = tree
                self._tree_entries += len(tree) + 1
                self._trim()
            else:
                self._objects.move_to_end(oid)
            try:
                found = tree[name]
            except KeyError:
                return self.entries(oid).get(name)
            return (found.filemode, found.id.raw)

    def _trim(self) -> None:
        while (
            self._tree_entries > GIT_TREE_CACHE_ENTRIES
            and len(self._trees) + len(self._objects) > 1
        ):
            if self._trees:
                _, dropped = self._trees.popitem(last=False)
                self._tree_entries -= len(dropped) + 1
            else:
                _, tree = self._objects.popitem(last=False)
                self._tree_entries -= len(tree) + 1

    def blob(self, oid: bytes) -> bytes:
        with self._lock:
            cached = self._blobs.get(oid)
            if cached is not None:
                self._blobs.move_to_end(oid)
                return cached
            data: bytes = self.repository.odb.read(self._pygit2.Oid(raw=oid))[1]
            if len(data) <= GIT_BLOB_CACHED_MAX:
                self._blobs[oid] = data
                self._blob_bytes += len(data)
                while self._blob_bytes > GIT_BLOB_CACHE_BYTES:
                    _, dropped = self._blobs.popitem(last=False)
                    self._blob_bytes -= len(dropped)
            return data

    def statistics(self) -> dict[str, int]:
        """What the caches hold now (bytes of blobs, tree entries, paths)."""
        with self._lock:
            return {
                "blob_bytes": self._blob_bytes,
                "tree_entries": self._tree_entries,
                "paths": len(self._paths),
            }

    # -- resolution ---------------------------------------------------------------------

    def resolve(self, path: str) -> Found:
        with self._lock:
            found = self._paths.get(path)
            if found is not None:
                self._paths.move_to_end(path)
                return found
            found = self._resolve(path.split("/") if path else [], [0])
            self._paths[path] = found
            if len(self._paths) > GIT_PATH_CACHE:
                self._paths.popitem(last=False)
            return found

    def _resolve(self, parts: list[str], hops: list[int]) -> Found:
        tree, canon, linked = self.tree, [], False
        for i, name in enumerate(parts):
            entry = self.entry(tree, name)
            if entry is None:
                return Found("missing", through_link=linked) if linked else MISSING
            mode, oid = entry
            last = i == len(parts) - 1
            if mode == TREE:
                tree = oid
                canon.append(name)
                continue
            if mode == GITLINK:
                return Found(None, why=SUBMODULE)
            if mode == LINK:
                hops[0] += 1
                if hops[0] > MAX_LINK_HOPS:
                    return Found(None, why=LOOP)
                text = self.blob(oid)
                target = _relative(canon, text)
                if target is None:
                    return Found(None, why=OUT)
                found = self._resolve(target, hops)
                if found.kind is None:
                    return found
                if found.kind == "missing":
                    return Found("missing", through_link=linked) if linked else MISSING
                if found.kind == "file":
                    if not last:
                        return MISSING
                    return Found(
                        "file",
                        found.oid,
                        found.mode,
                        found.canon,
                        through_link=linked,
                        link=text,
                        link_oid=oid,
                    )
                if found.canon == tuple(canon[: len(found.canon)]):
                    return Found(None, why=LOOP)  # a directory that contains the link itself
                if last:
                    return Found(
                        "dir",
                        found.oid,
                        TREE,
                        found.canon,
                        through_link=linked,
                        link=text,
                        link_oid=oid,
                    )
                tree, canon, linked = found.oid, list(found.canon), True
                continue
            if not last:
                return (
                    Found("missing", through_link=linked) if linked else MISSING
                )  # a file used as a directory
            return Found("file", oid, mode, (*canon, name), through_link=linked)
        return Found("dir", tree, TREE, tuple(canon), through_link=linked)

    def _walk(self) -> Iterator[tuple[str, Kind]]:
        stack = [""]
        while stack:
            here = stack.pop()
            prefix = f"{here}/" if here else ""
            for name in self.names(here):
                path = prefix + name
                found = self.resolve(path)
                if found.kind == "dir":
                    stack.append(path)
                if found.kind in ("file", "dir"):
                    yield path, found.kind

    def _undecodable(self, oid: bytes, prefix: bytes, found: list[bytes]) -> None:
        data = self.repository.odb.read(self._pygit2.Oid(raw=oid))[1]
        at, width = 0, len(oid)
        while at < len(data):
            space = data.index(b" ", at)
            nul = data.index(b"\0", space)
            name, mode = data[space + 1 : nul], int(data[at:space], 8)
            path = prefix + name
            try:
                name.decode("utf-8")
            except UnicodeDecodeError:
                found.append(path)
            else:
                if mode == TREE:
                    self._undecodable(data[nul + 1 : nul + 1 + width], path + b"/", found)
            at = nul + 1 + width


def _relative(canon: list[str], target: bytes) -> list[str] | None:
    """A symlink's target, resolved against the directory ``canon`` holding it, as path
    components from the root; None when it is absolute or leaves the tree."""
    try:
        text = target.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.startswith("/") or "\0" in text:
        return None
    parts = list(canon)
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return parts
