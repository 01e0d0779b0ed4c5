"""The workspace capability: a frozen, content-addressed root and per-run branches.

``Workspace.frozen(path)`` reads a directory once into memory. Reads of that root are
``immutable_read`` (DESIGN.md): nothing can change them during a run, so the speculative
lane may run them early and a claim keyed by the root id is exact. The root id is a hash
of the content, so it changes exactly when the content does.

Writes never reach the root, nor the source directory. Each run gets a *branch*
(``for_run()``): a copy-on-write overlay of the root where ``write_text``,
``write_bytes`` and ``delete`` land and where later reads see them. ``view_of`` gives
each read the id of what it would see: the root id while nothing the read depends on has
been written in this branch, else an id that changes with every affecting write (so a
read after a write never claims a pre-write result, contract 3). Every method declares
``scope="path"``: it touches only the state at ``path`` (a directory for ``list_dir``,
so anything under it), exactly the relation ``view_of`` uses, so discovery may still try
early a read that no earlier write can affect. At the end of the run the caller commits
the branch to a *new* directory, or discards it.

Paths are relative, ``/``-separated. Absolute paths, any ``..`` component and paths
through a symlink that led out of the root when it was frozen are refused with
``PermissionError`` inside the program; other failures are the builtin ``OSError``
subclasses a real file system would raise, with the same ``errno``.

Prior art: git's content-addressed trees; overlayfs' upper/lower layers.
"""

from __future__ import annotations

import copy
import enum
import errno
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self

from occurrences import Effect

from ._capability import capability
from ._exceptions import CommitError, WorkspaceError
from ._guest_api import ErrorInfo
from ._tree import (
    MAX_FROZEN_BYTES,
    Tree,
    freeze_directory,
    is_a_directory,
    normalize,
    not_a_directory,
    not_found,
    related,
    text_path,
)

__all__ = ["MAX_FROZEN_BYTES", "BranchState", "Workspace", "run_workspaces"]

VERSION = "1"
"""Capability version of the workspace methods (bump when their results change)."""

MAX_EARLY_BYTES = 16 * 1024 * 1024
"""Most content a branch may hold in its own writes for one more write to run early on a
speculative layer of it (``admits_early``); a write past it waits for the program."""


class BranchState(enum.Enum):
    """Lifecycle of a branch; a root is always ROOT::

        OPEN ─┬─> COMMITTED
              ├─> DISCARDED
              └─> UNCOMMITTABLE ──> DISCARDED

    ``UNCOMMITTABLE``: the run did not end ``ok`` (it raised, was aborted, hit a limit), so
    its writes are partial. They can still be inspected (``changes``, ``state_files``) and
    discarded; ``commit`` raises ``CommitError`` saying why.
    """

    ROOT = "root"
    OPEN = "open"
    COMMITTED = "committed"
    DISCARDED = "discarded"
    UNCOMMITTABLE = "uncommittable"


_MOVES: dict[BranchState, frozenset[BranchState]] = {
    BranchState.OPEN: frozenset({BranchState.COMMITTED, BranchState.DISCARDED, BranchState.UNCOMMITTABLE}),
    BranchState.UNCOMMITTABLE: frozenset({BranchState.DISCARDED}),
}


def _advance(state: BranchState, to: BranchState) -> BranchState:
    if to not in _MOVES.get(state, frozenset()):
        raise WorkspaceError(f"cannot go from {state.value} to {to.value}")
    return to


class Workspace:
    """A frozen directory (the root) or one run's copy-on-write branch of it.

    Both expose the same capability methods; on a root the writes raise
    ``PermissionError`` (writes belong to a run's branch, see ``for_run``).
    """

    __slots__ = ("_deleted_or_written", "_dirs_added", "_held", "_seq", "_state", "_touched", "_tree", "_why_uncommittable")

    def __init__(self, tree: Tree, state: BranchState = BranchState.ROOT) -> None:
        self._tree = tree
        self._state = state
        # Branch-only; empty on a root. Invariant: the visible tree is the root's files
        # overridden by _deleted_or_written (None = deleted), plus _dirs_added.
        self._deleted_or_written: dict[str, bytes | None] = {}
        self._held = 0  # bytes of content in _deleted_or_written (``held_bytes``)
        self._dirs_added: set[str] = set()
        self._touched: dict[str, int] = {}  # path -> _seq of the last write to it
        self._seq = 0
        self._why_uncommittable: str | None = None  # set exactly when UNCOMMITTABLE

    @classmethod
    def frozen(cls, path: str | os.PathLike[str]) -> Workspace:
        """Snapshot the directory at ``path`` into memory (it is never written to).

        Symlinks that resolve inside the directory are followed; ones that lead out, loops
        and special files are kept only as names whose use is refused. A name that is not
        valid UTF-8 (any byte string but ``/`` and NUL is a valid file name on Linux) cannot
        cross to the program as text: that entry, and everything under it, is skipped and
        its path listed in ``skipped`` (as bytes). Raises ``WorkspaceError`` when ``path``
        is not a directory or holds more than ``MAX_FROZEN_BYTES``.
        """
        return cls(freeze_directory(Path(path)))

    @classmethod
    def from_files(cls, files: Mapping[str, str | bytes], dirs: Iterable[str] = ()) -> Workspace:
        """A frozen root built from ``{relative path: content}`` (str is UTF-8 encoded).

        Raises ``WorkspaceError`` for a path or a str content that is not valid text (a lone
        surrogate, a NUL in a path) or a path that leaves the root.
        """
        contents: dict[str, bytes] = {}
        try:
            for path, content in files.items():
                contents[text_path(path)] = content.encode() if isinstance(content, str) else bytes(content)
            folders = {text_path(d) for d in dirs}
        except (UnicodeEncodeError, ValueError, PermissionError) as exc:
            raise WorkspaceError(f"cannot build a workspace from these files: {exc}") from None
        return cls(Tree(contents, folders, {}, None))

    # -- identity, lifecycle --------------------------------------------------------------

    @property
    def root_id(self) -> str:
        """Content hash of the frozen root (equal roots, equal ids)."""
        return self._tree.root_id

    @property
    def source(self) -> Path | None:
        """The directory the root was frozen from (never written to), if any."""
        return self._tree.source

    @property
    def state(self) -> BranchState:
        return self._state

    @property
    def skipped(self) -> tuple[bytes, ...]:
        """Relative paths (bytes, as the OS names them) ``frozen`` left out because the
        name is not valid UTF-8."""
        return self._tree.skipped

    @property
    def uncommittable_reason(self) -> str | None:
        """Why ``commit`` is refused (the branch is ``UNCOMMITTABLE``), else None."""
        return self._why_uncommittable

    def for_run(self) -> Self:
        """A fresh private branch of the frozen root, for one run (a branch's own writes
        are not carried over: every run starts from the root).

        The branch is of this object's own class and keeps its other attributes (a shallow
        copy), so a subclass's overrides and added methods serve the program's own calls
        exactly as they serve the early ones on the root.
        """
        branch = copy.copy(self)
        Workspace.__init__(branch, self._tree, BranchState.OPEN)
        return branch

    def refuse_commit(self, reason: str) -> None:
        """Mark an open branch ``UNCOMMITTABLE``: its run did not end ``ok`` (the Host
        does this), so ``commit`` raises ``CommitError(reason)``; ``discard`` still works.
        Raises ``WorkspaceError`` unless the branch is open."""
        self._state = _advance(self._state, BranchState.UNCOMMITTABLE)
        self._why_uncommittable = reason

    def layer(self) -> Self:
        """A copy of this open branch, for one turn of a session: the turn writes into the
        copy, which the session adopts as its branch when the turn keeps its effects (it
        ended ``ok`` or ``error``) and drops otherwise. View ids continue this branch's.
        Of this object's own class, like ``for_run``.

        The same copy is a *speculative layer* of a run's branch (``pysolate._layers``):
        early writes land in it, and the branch ``adopt``s it when the program claims them.

        Raises ``WorkspaceError`` unless the branch is open.
        """
        if self._state is not BranchState.OPEN:
            raise WorkspaceError(f"cannot layer a {self._state.value} branch")
        layer = copy.copy(self)
        Workspace.__init__(layer, self._tree, BranchState.OPEN)
        layer._deleted_or_written = dict(self._deleted_or_written)
        layer._held = self._held
        layer._dirs_added = set(self._dirs_added)
        layer._touched = dict(self._touched)
        layer._seq = self._seq
        return layer

    def adopt(self, layer: Workspace) -> None:
        """Take the state of ``layer`` (a ``layer()`` of this branch, or of one of its
        layers) as this branch's own: the writes made there were claimed by the program
        (``pysolate._layers``). The layer is not changed; it must not be written again.

        Raises ``WorkspaceError`` unless both are open and of the same root.
        """
        if self._state is not BranchState.OPEN or layer._state is not BranchState.OPEN:
            raise WorkspaceError(f"cannot adopt a {layer._state.value} layer into a {self._state.value} branch")
        if layer._tree is not self._tree:
            raise WorkspaceError("cannot adopt a layer of another root")
        self._deleted_or_written = dict(layer._deleted_or_written)
        self._held = layer._held
        self._dirs_added = set(layer._dirs_added)
        self._touched = dict(layer._touched)
        self._seq = layer._seq

    def held_bytes(self) -> int:
        """Bytes of file content this branch holds beyond its root (what it wrote): counted
        in its run's byte budget (``GuestLimits.max_host_bytes``)."""
        return self._held

    def admits_early(self, method: str, arguments: Mapping[str, object]) -> bool:
        """Whether ``method(**arguments)`` may run early on a layer of this branch: the
        content written would stay within ``MAX_EARLY_BYTES``."""
        data = arguments.get("data", arguments.get("text", b""))
        size = len(data) if isinstance(data, bytes | str) else 0
        held = sum(len(d) for d in self._deleted_or_written.values() if d is not None)
        return held + size <= MAX_EARLY_BYTES

    def view_of(self, method: str, arguments: Mapping[str, object]) -> str:
        """The id of what ``method(**arguments)`` would see now (root id if unaffected)."""
        raw = arguments.get("path", "")
        try:
            path = self._resolve(raw) if isinstance(raw, str) else None
        except (OSError, ValueError):
            path = None  # the call fails identically whatever was written (NUL: ValueError)
        if path is None:
            return self._tree.root_id
        last = max((seq for p, seq in self._touched.items() if related(p, path)), default=0)
        return self._tree.root_id if last == 0 else f"{self._tree.root_id}+w{last}"

    def state_files(self) -> dict[str, bytes]:
        """The files this branch (or root) holds now: path → content."""
        out = dict(self._tree.files)
        for path, data in self._deleted_or_written.items():
            if data is None:
                out.pop(path, None)
            else:
                out[path] = data
        return dict(sorted(out.items()))

    def changes(self) -> dict[str, bytes | None]:
        """Paths written (content) or deleted (None) in this branch, relative to its root."""
        out: dict[str, bytes | None] = {}
        for path, data in self._deleted_or_written.items():
            before = self._tree.files.get(path)
            if data != before:
                out[path] = data
        return dict(sorted(out.items()))

    def commit(self, target: str | os.PathLike[str]) -> Path:
        """Write the branch's whole tree into the new or empty directory ``target``.

        Refused symlinks are not materialised. Raises ``CommitError`` when ``target`` is
        not empty, is or lies inside the source directory, or the run that made the branch
        did not end ``ok`` (``UNCOMMITTABLE``: the message says how it ended);
        ``WorkspaceError`` on a root or a branch already committed or discarded.
        """
        if self._state is BranchState.UNCOMMITTABLE:
            raise CommitError(f"refusing to commit a partial branch: {self._why_uncommittable}")
        out = Path(os.path.realpath(target))
        source = self._tree.source
        if source is not None and (out == source or source in out.parents):
            raise CommitError(f"refusing to commit into the source directory {source}")
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise CommitError(f"commit target {out} exists and is not an empty directory")
        self._state = _advance(self._state, BranchState.COMMITTED)
        out.mkdir(parents=True, exist_ok=True)
        for d in sorted(self._visible_dirs()):
            (out / d).mkdir(parents=True, exist_ok=True)
        for path, data in self.state_files().items():
            (out / path).write_bytes(data)
        return out

    def discard(self) -> None:
        """Drop the branch's writes. Raises ``WorkspaceError`` unless the branch is open or
        uncommittable."""
        self._state = _advance(self._state, BranchState.DISCARDED)
        self._deleted_or_written.clear()
        self._held = 0
        self._dirs_added.clear()

    # -- capability methods ---------------------------------------------------------------

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def read_bytes(self, path: str) -> bytes:
        """The content of file ``path``."""
        p = self._resolve(path)
        if self._is_dir(p):
            raise is_a_directory(path)
        data = self._file(p)
        if data is None:
            raise not_found(path)
        return data

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The content of file ``path``, decoded."""
        return (await self.read_bytes(path)).decode(encoding)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def list_dir(self, path: str = ".") -> list[str]:
        """The sorted names in directory ``path``."""
        p = self._resolve(path)
        if self._file(p) is not None:
            raise not_a_directory(path)
        if not self._is_dir(p):
            raise not_found(path)
        names = set(self._tree.children.get(p, ()))
        for q in (*self._deleted_or_written, *self._dirs_added):
            parent, _, name = q.rpartition("/")
            if parent == p:
                names.add(name)
        prefix = f"{p}/" if p else ""
        refused = self._tree.refused
        return sorted(n for n in names if self._exists(prefix + n) or prefix + n in refused)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def exists(self, path: str) -> bool:
        """True when ``path`` is a file or directory."""
        return self._exists(self._resolve(path))

    @capability(effect=Effect.WRITE, version=VERSION, scope="path")
    async def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace file ``path`` (parent directories are created)."""
        if type(data) is not bytes:
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        self._write(path, data)

    @capability(effect=Effect.WRITE, version=VERSION, scope="path")
    async def write_text(self, path: str, text: str, encoding: str = "utf-8") -> None:
        """Create or replace file ``path`` with ``text`` encoded."""
        if type(text) is not str:
            raise TypeError(f"text must be str, not {type(text).__name__}")
        self._write(path, text.encode(encoding))

    @capability(effect=Effect.WRITE, version=VERSION, scope="path")
    async def delete(self, path: str) -> None:
        """Delete file ``path`` (directories are not deleted)."""
        p = self._writable(path)
        if self._is_dir(p):
            raise is_a_directory(path)
        if self._file(p) is None:
            raise not_found(path)
        self._record(p, None)

    # -- internals --------------------------------------------------------------------------

    def _resolve(self, path: object) -> str:
        if type(path) is not str:
            raise TypeError(f"path must be str, not {type(path).__name__}")
        p = normalize(path)
        parts = p.split("/") if p else []
        for i in range(1, len(parts) + 1):
            why = self._tree.refused.get("/".join(parts[:i]))
            if why is not None:
                raise PermissionError(errno.EACCES, f"refused: {why}", path)
        return p

    def _writable(self, path: object) -> str:
        if self._state is BranchState.ROOT:
            raise PermissionError(errno.EROFS, "the workspace root is frozen; writes go to a run's branch", path)
        if self._state is not BranchState.OPEN:
            raise PermissionError(errno.EROFS, f"the run's branch is {self._state.value}", path)
        return self._resolve(path)

    def _file(self, p: str) -> bytes | None:
        if p in self._deleted_or_written:
            return self._deleted_or_written[p]
        return self._tree.files.get(p)

    def _is_dir(self, p: str) -> bool:
        return p in self._tree.dirs or p in self._dirs_added

    def _exists(self, p: str) -> bool:
        return self._is_dir(p) or self._file(p) is not None

    def _visible_dirs(self) -> set[str]:
        return {d for d in (*self._tree.dirs, *self._dirs_added) if d}

    def _write(self, path: str, data: bytes) -> None:
        p = self._writable(path)
        if self._is_dir(p):
            raise is_a_directory(path)
        parts = p.split("/")
        ancestors = ["/".join(parts[:i]) for i in range(1, len(parts))]
        if any(self._file(a) is not None for a in ancestors):
            raise not_a_directory(path)
        self._dirs_added.update(a for a in ancestors if a not in self._tree.dirs)
        self._record(p, data)

    def _record(self, p: str, data: bytes | None) -> None:
        self._seq += 1
        self._touched[p] = self._seq
        before = self._deleted_or_written.get(p)
        self._held += (0 if data is None else len(data)) - (0 if before is None else len(before))
        self._deleted_or_written[p] = data


def run_workspaces(targets: Mapping[str, object], status: str, error: ErrorInfo | None) -> dict[str, Workspace]:
    """A run's workspace branches (among its capability ``targets``) as its result returns
    them: open after status ``ok``; after any other end ``UNCOMMITTABLE``, the reason
    naming the status and error."""
    branches = {name: t for name, t in targets.items() if isinstance(t, Workspace)}
    if status != "ok":
        why = f"the run ended {status}" + (f" ({error.type}: {error.message})" if error is not None else "")
        for branch in branches.values():
            if branch.state is BranchState.OPEN:
                branch.refuse_commit(why)
    return branches
