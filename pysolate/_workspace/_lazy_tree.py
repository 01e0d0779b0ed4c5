"""A lazily read directory as a workspace root: ``Workspace.frozen(path, lazy=True)``.

Freezing walks the directory once and records its listing and each file's *identity*
(``st_dev``, ``st_ino``, ``st_size``, ``st_mtime_ns``, ``st_ctime_ns``) without reading a
byte; a file's content is read when a run first asks for it, and its SHA-256 recorded
then. The root is the directory as it was at the freeze: a read whose file no longer has
its identity (and whose content, if it was read before, is not the same either) fails with
``WorkspaceChanged``, so nothing is ever served that the root did not hold. The ctime is
part of the identity because no one can set it: a change that put the old mtime back is
still seen. The root id hashes the listing and the identities, so it changes whenever the
directory did before the freeze, and two freezes of an untouched directory share early
reads (docs/glossary.md, "Root").

No size limit applies (``MAX_FROZEN_BYTES`` is the eager mode's): memory grows only with
the hashes of the files read and the listing.

Prior art: make's and git's index "stat information" as the cheap proof that a file did
not change; git's racy-git problem is why the ctime and the content hash are kept too.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
from pathlib import Path

from .._exceptions import WorkspaceChanged
from ._tree import Held, Listed, children_of, scan_directory

Identity = tuple[int, int, int, int, int]


def identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class LazyTree(Listed[tuple[str, Identity]]):
    """The ``Root`` of a directory read on demand (the module docstring)."""

    __slots__ = ("_hashes", "_lock")

    def __init__(self, source: Path) -> None:
        scan = scan_directory(source)
        self._source = scan.root
        self._files = {path: (real, identity(st)) for path, (real, st) in scan.files.items()}
        dirs = scan.dirs | {""}
        self._dirs = frozenset(dirs)
        self._refused = scan.refused
        self._links = scan.links
        self._skipped = scan.skipped
        self._children = children_of((*self._files, *self._refused, *self._dirs))
        self._hashes: dict[str, bytes] = {}  # real path -> SHA-256 of the content first read
        self._lock = threading.Lock()  # guards _hashes (a root is shared by every Host thread)
        digest = hashlib.sha256(os.fsencode(str(scan.root)))
        for path in sorted(self._files):
            digest.update(b"f\0" + path.encode() + b"\0" + repr(self._files[path][1]).encode())
        for path in sorted(dirs):
            digest.update(b"d\0" + path.encode() + b"\0")
        for path in sorted(self._refused):
            digest.update(b"x\0" + path.encode() + b"\0")
        self.root_id = "lazy-" + digest.hexdigest()[:32]

    def file(self, path: str) -> bytes | None:
        entry = self._files.get(path)
        if entry is None:
            return None
        real, frozen = entry
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise WorkspaceChanged(
                path, f"it can no longer be opened: {os.strerror(exc.errno or errno.EIO)}"
            ) from None
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise WorkspaceChanged(path, "it is no longer a regular file")
            data = _read_all(fd, before.st_size)
            after = os.fstat(fd)
        except OSError as exc:
            raise WorkspaceChanged(
                path, f"it can no longer be read: {os.strerror(exc.errno or errno.EIO)}"
            ) from None
        finally:
            os.close(fd)
        digest = hashlib.sha256(data).digest()
        stable = identity(before) == identity(after)  # else it was written while being read
        with self._lock:
            known = self._hashes.get(real)
            if stable and identity(before) == frozen and known in (None, digest):
                self._hashes[real] = digest
                return data
        if stable and known == digest:
            return data  # touched, or its inode's ctime moved, but the content is the same
        raise WorkspaceChanged(
            path, "its content is not what the workspace root held" if known else "it was modified"
        )

    def differs(self, path: str, data: bytes) -> bool:
        entry = self._files.get(path)
        if entry is None or entry[1][2] != len(data):
            return True
        with self._lock:
            known = self._hashes.get(entry[0])
        if known is None:
            try:
                return self.file(path) != data
            except WorkspaceChanged:
                return True  # what the root held is unknown: count it as a change
        return known != hashlib.sha256(data).digest()

    def _held_file(self, entry: tuple[str, Identity]) -> Held:
        with self._lock:
            known = self._hashes.get(entry[0])
        return Held("file", sha256=known, identity=entry[1])


def _read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, max(size, 1 << 16))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size = 1 << 16
