"""The workspace capability: a frozen, content-addressed root and per-run branches.

The root is one of three kinds (``_tree``): ``Workspace.frozen(path)`` reads a directory
into memory, ``Workspace.frozen(path, lazy=True)`` records its listing and file identities
and reads on demand (a changed file fails its read), ``Workspace.git(repo, rev)`` is a git
commit read lazily from the object store. Reads of a root are ``immutable_read``
(docs/contract.md, rule 2): nothing can change what they return during a run, so the speculative lane
may run them early and a claim keyed by the root id is exact. The root id names the
content (a hash of it, of the file identities, or the commit id), so it changes exactly
when the content does.

Writes never reach the root, nor the source directory. Each run gets a *branch*
(``for_run()``): a copy-on-write overlay of the root where ``write_text``,
``write_bytes`` and ``delete`` land and where later reads see them. ``view_of`` gives
each read the id of what it would see: the root id while nothing the read depends on has
been written in this branch, else an id that changes with every affecting write (so a
read after a write never claims a pre-write result, contract 3). Every method declares
``scope="path"``: it touches only the state at ``path`` (a directory for ``list_dir``,
so anything under it), exactly the relation ``view_of`` uses, so discovery may still try
early a read that no earlier write can affect. At the end of the run the caller commits
the branch to a *new* directory (``commit``), writes it as a git commit
(``commit_to_git``), applies it back to the directory or work tree it came from where
nothing changed meanwhile (``apply``), or discards it. Whatever the branch holds can be
written: a write that no file system could take (a name over ``NAME_MAX``, a path over
``PATH_MAX``, a ``.git`` component, a path through a symlinked directory of the root) fails
in the program, as the call's own error.

Paths are relative, ``/``-separated. Absolute paths, any ``..`` component and paths
through a symlink that led out of the root when it was frozen are refused with
``PermissionError`` inside the program; other failures are the builtin ``OSError``
subclasses a real file system would raise, with the same ``errno``.

Prior art: git's content-addressed trees; overlayfs' upper/lower layers.
"""

from __future__ import annotations

import copy
import errno
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self

from occurrences import Effect

from .._exceptions import CommitError, WorkspaceError
from .._guest_api import ErrorInfo
from .._tools._capability import capability
from ._branch_state import BranchState, advance
from ._overlay import Overlay
from ._tree import (
    MAX_FROZEN_BYTES,
    Root,
    Tree,
    check_length,
    check_writable,
    freeze_directory,
    is_a_directory,
    normalize,
    not_a_directory,
    not_found,
    text_path,
)

__all__ = ["MAX_FROZEN_BYTES", "BranchState", "Workspace", "run_workspaces"]

VERSION = "1"
"""Capability version of the workspace methods (bump when their results change)."""

MAX_EARLY_BYTES = 16 * 1024 * 1024
"""Most content a branch may hold in its own writes for one more write to run early on a
speculative layer of it (``admits_early``); a write past it waits for the program."""


class Workspace:
    """A frozen root or one run's copy-on-write branch of it.

    Both expose the same capability methods; on a root the writes raise
    ``PermissionError`` (writes belong to a run's branch, see ``for_run``).
    """

    __slots__ = ("_overlay", "_state", "_tree", "_why_uncommittable")

    def __init__(self, tree: Root, state: BranchState = BranchState.ROOT) -> None:
        self._tree = tree
        self._state = state
        self._overlay = Overlay(tree)  # the branch's own writes (``_overlay``); empty on a root
        self._why_uncommittable: str | None = None  # set exactly when UNCOMMITTABLE

    @classmethod
    def frozen(cls, path: str | os.PathLike[str], *, lazy: bool = False) -> Self:
        """The directory at ``path`` as a frozen root (it is never written to).

        Eager (the default): every file is read into memory now, at most
        ``MAX_FROZEN_BYTES``, and later changes on disk are not seen. ``lazy=True``: only
        the listing and each file's identity (size, mtime, inode, ctime) are recorded and
        a file is read when a run first asks for it; a read of a file that changed since
        fails with ``WorkspaceChanged`` (the program sees a ``ToolError``), so a run never
        sees anything the directory did not hold at the freeze; no size limit.

        Symlinks that resolve inside the directory are followed; ones that lead out, loops
        and special files are kept only as names whose use is refused. A name that is not
        valid UTF-8 cannot cross to the program as text: that entry (and what is under it)
        is skipped and its path listed in ``skipped`` (as bytes). Raises ``WorkspaceError`` when ``path``
        is not a directory or (eager) holds more than ``MAX_FROZEN_BYTES``.
        """
        if lazy:
            from ._lazy_tree import LazyTree

            return cls(LazyTree(Path(path)))
        return cls(freeze_directory(Path(path)))

    @classmethod
    def git(cls, repo: str | os.PathLike[str], rev: str = "HEAD") -> Self:
        """The commit ``rev`` of the git repository at ``repo`` (a work tree or a bare
        repository) as a frozen root, read lazily from the object store (``_git_tree``):
        freezing resolves the commit and reads nothing else, and memory grows with what
        runs read, within bounded caches. The root id is the commit id.

        Raises ``ImportError`` naming the extra (``pysolate[git]``) when ``pygit2`` is not
        installed, ``WorkspaceError`` when ``repo`` is not a repository or ``rev`` names no
        commit there.
        """
        from ._git_tree import GitTree

        return cls(GitTree(repo, rev))

    @classmethod
    def from_files(cls, files: Mapping[str, str | bytes], dirs: Iterable[str] = ()) -> Workspace:
        """A frozen root built from ``{relative path: content}`` (str is UTF-8 encoded).

        Raises ``WorkspaceError`` for a path or a str content that is not valid text (a lone
        surrogate, a NUL in a path), a path that leaves the root, or a name no file system
        holds (``NAME_MAX``, ``PATH_MAX``).
        """
        contents: dict[str, bytes] = {}
        try:
            for path, content in files.items():
                contents[text_path(path)] = (
                    content.encode() if isinstance(content, str) else bytes(content)
                )
            folders = {text_path(d) for d in dirs}
            for path in (*contents, *folders):
                check_length(path, path)
        except (UnicodeEncodeError, OSError, ValueError) as exc:
            raise WorkspaceError(f"cannot build a workspace from these files: {exc}") from None
        return cls(Tree(contents, folders, {}, None))

    # -- identity, lifecycle --------------------------------------------------------------

    @property
    def root_id(self) -> str:
        """Identity of the frozen root (equal ids, equal content): a content hash, a hash of
        a lazy directory's file identities, or ``git-<commit id>``."""
        return self._tree.root_id

    @property
    def source(self) -> Path | None:
        """The directory the root was frozen from (the git work tree), never written to
        except by ``apply``; None for a root built from files or a bare repository."""
        return self._tree.source

    @property
    def state(self) -> BranchState:
        return self._state

    @property
    def skipped(self) -> tuple[bytes, ...]:
        """Relative paths (bytes, as the OS names them) the root left out because the
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
        self._state = advance(self._state, BranchState.UNCOMMITTABLE)
        self._why_uncommittable = reason

    def layer(self) -> Self:
        """A copy of this open branch, for one turn of a session: the turn writes into the
        copy, which the session adopts as its branch when the turn keeps its effects (it
        ended ``ok`` or ``error``) and drops otherwise. View ids continue this branch's.
        Of this object's own class, like ``for_run``.

        The same copy is a *speculative layer* of a run's branch (``pysolate._run._layers``):
        early writes land in it, and the branch ``adopt``s it when the program claims them.

        Raises ``WorkspaceError`` unless the branch is open.
        """
        if self._state is not BranchState.OPEN:
            raise WorkspaceError(f"cannot layer a {self._state.value} branch")
        layer = copy.copy(self)
        Workspace.__init__(layer, self._tree, BranchState.OPEN)
        layer._overlay = self._overlay.copy()
        return layer

    def adopt(self, layer: Workspace) -> None:
        """Take the state of ``layer`` (a ``layer()`` of this branch, or of one of its
        layers) as this branch's own: the writes made there were claimed by the program
        (``pysolate._run._layers``). The layer is not changed; it must not be written again.

        Raises ``WorkspaceError`` unless both are open and of the same root.
        """
        if self._state is not BranchState.OPEN or layer._state is not BranchState.OPEN:
            raise WorkspaceError(
                f"cannot adopt a {layer._state.value} layer into a {self._state.value} branch"
            )
        if layer._tree is not self._tree:
            raise WorkspaceError("cannot adopt a layer of another root")
        self._overlay = layer._overlay.copy()

    def held_bytes(self) -> int:
        """Bytes of content this branch wrote beyond its root (``GuestLimits.max_host_bytes``)."""
        return self._overlay.held

    def admits_early(self, method: str, arguments: Mapping[str, object]) -> bool:
        """Whether ``method(**arguments)`` may run early on a layer of this branch: the
        content written would stay within ``MAX_EARLY_BYTES``."""
        data = arguments.get("data", arguments.get("text", b""))
        size = len(data) if isinstance(data, bytes | str) else 0
        held = sum(len(d) for d in self._overlay.written.values() if d is not None)
        return held + size <= MAX_EARLY_BYTES

    def view_of(self, method: str, arguments: Mapping[str, object]) -> str:
        """The id of what ``method(**arguments)`` would see now (root id if unaffected)."""
        raw = arguments.get("path", "")
        try:
            path = self._resolve(raw) if isinstance(raw, str) else None
        except (OSError, ValueError):
            path = None  # the call fails identically whatever was written (NUL: ValueError)
        return self._tree.root_id if path is None else self._overlay.view_id(path)

    def state_files(self) -> dict[str, bytes]:
        """The files this branch (or root) holds now: path → content (a git or lazy root's
        files are all read: meant for small trees and tests)."""
        return self._overlay.files()

    def changes(self) -> dict[str, bytes | None]:
        """Paths written (content) or deleted (None) in this branch, relative to its root
        (a write of what the root held is no change; on a lazy root, a write over a file
        that changed on disk since the freeze counts as one)."""
        return self._overlay.changes()

    def commit(self, target: str | os.PathLike[str]) -> Path:
        """Write the branch's whole tree into the new or empty directory ``target``, all or
        nothing: into a temporary sibling first, renamed into place once complete, and only
        then is the branch ``COMMITTED``; a commit that fails leaves ``target`` as it was and
        the branch open (commit it elsewhere, or discard it).

        Refused symlinks are not materialised. Raises ``CommitError`` when ``target`` is
        not empty, is or lies inside the source directory, the writing fails (the
        ``OSError`` is its cause), or the run that made the branch did not end ``ok``
        (``UNCOMMITTABLE``: the message says how it ended); ``WorkspaceError`` on a root or
        a branch already committed, applied or discarded.
        """
        from ._write_out import write_new_directory

        self._check_can_end(BranchState.COMMITTED)
        out = Path(os.path.realpath(target))
        source = self._tree.source
        if source is not None and (out == source or source in out.parents):
            raise CommitError(f"refusing to commit into the source directory {source}")
        write_new_directory(out, sorted(self._overlay.visible_dirs()), self.state_files())
        self._state = advance(self._state, BranchState.COMMITTED)
        return out

    def commit_to_git(
        self,
        ref: str | None = None,
        message: str = "pysolate run",
        *,
        author: tuple[str, str] | None = None,
    ) -> str:
        """Write the branch as a git commit whose parent is the root commit (a
        ``Workspace.git`` root), returning its id: blobs and trees go to the repository's
        object store, ``ref`` (a branch name like ``pysolate/run-1``, or a full
        ``refs/...`` name; default ``pysolate/run-<first 12 hex digits of the commit>``)
        is created to point at it, and neither the work tree nor the index is touched.
        Unchanged entries keep their modes (executable bits, symlinks, submodules), so an
        unchanged symlink shows its target's new content, as on a file system (the branch
        reads it as a copy of what the target held in the root); a rewritten file keeps its
        executable bit; a directory left empty disappears (git
        holds no empty directories). ``author``: (name, email), default the repository's
        configured user, else ``pysolate``. The branch's state does not change.

        Raises ``CommitError`` when the root is not a git commit, the run did not end
        ``ok``, ``ref`` is not a valid new reference name, or it exists already;
        ``WorkspaceError`` on a root or a discarded branch.
        """
        from ._git_commit import commit_to_git

        return commit_to_git(
            self._state, self._why_uncommittable, self._tree, self.changes, ref, message, author
        )

    def apply(self, path: str | os.PathLike[str]) -> None:
        """Apply the branch's writes and deletes to the directory ``path`` (the git work
        tree, or the directory ``frozen`` read), only if every path they touch still holds
        what the root held there (its content, its kind; for a git root also the index
        entry), else ``ApplyConflict`` naming each such path, with nothing written. Each
        file is replaced atomically (a sibling written, then renamed over it); a journal
        (in the ``.git`` directory, else ``.pysolate-apply.json`` in ``path``) lets the
        next ``apply`` to ``path`` finish an apply that a crash interrupted, or roll back one
        that had not started replacing files, before it does its own. Nothing else on disk
        is changed: the index stays as it was, so a git work tree shows the run's changes
        as unstaged, and a symlink the run did not write stays a link (to its target's new
        content, if the run wrote that). Then the branch is ``APPLIED``; an apply that fails leaves it open.

        Raises ``ApplyConflict`` as above, ``CommitError`` when the run did not end ``ok``
        or ``path`` is not a directory, ``WorkspaceError`` on a root, a branch already
        committed, applied or discarded, or when writing fails (the cause says why; what
        was written by then is finished or rolled back by the next ``apply``).
        """
        from ._apply import apply_branch

        self._check_can_end(BranchState.APPLIED)
        apply_branch(self._tree, Path(path), self.changes(), set(self._overlay.dirs_added))
        self._state = advance(self._state, BranchState.APPLIED)

    def discard(self) -> None:
        """Drop the branch's writes. Raises ``WorkspaceError`` unless the branch is open or
        uncommittable."""
        self._state = advance(self._state, BranchState.DISCARDED)
        self._overlay.clear()

    def _check_can_end(self, to: BranchState) -> None:
        if self._state is BranchState.UNCOMMITTABLE:
            raise CommitError(f"refusing to commit a partial branch: {self._why_uncommittable}")
        advance(self._state, to)

    # -- capability methods ---------------------------------------------------------------

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def read_bytes(self, path: str) -> bytes:
        """The content of file ``path``."""
        p = self._resolve(path)
        if self._overlay.is_dir(p):
            raise is_a_directory(path)
        data = self._overlay.file(p)
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
        if self._overlay.is_file(p):
            raise not_a_directory(path)
        if not self._overlay.is_dir(p):
            raise not_found(path)
        return self._overlay.names(p)

    @capability(effect=Effect.IMMUTABLE_READ, version=VERSION, scope="path")
    async def exists(self, path: str) -> bool:
        """True when ``path`` is a file or directory."""
        return self._overlay.exists(self._resolve(path))

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
        if self._overlay.is_dir(p):
            raise is_a_directory(path)
        if not self._overlay.is_file(p):
            raise not_found(path)
        self._overlay.record(p, None)

    # -- internals --------------------------------------------------------------------------

    def _resolve(self, path: object) -> str:
        if type(path) is not str:
            raise TypeError(f"path must be str, not {type(path).__name__}")
        p = normalize(path)
        why = self._tree.refused(p)
        if why is not None:
            raise PermissionError(errno.EACCES, f"refused: {why}", path)
        return p

    def _writable(self, path: object) -> str:
        if self._state is BranchState.ROOT:
            raise PermissionError(
                errno.EROFS, "the workspace root is frozen; writes go to a run's branch", path
            )
        if self._state is not BranchState.OPEN:
            raise PermissionError(errno.EROFS, f"the run's branch is {self._state.value}", path)
        p = self._resolve(path)
        check_writable(path, p)  # type: ignore[arg-type]
        if self._tree.through_link(p):
            raise PermissionError(
                errno.EACCES, "refused: a path through a symlinked directory of the workspace", path
            )
        return p

    def _write(self, path: str, data: bytes) -> None:
        p = self._writable(path)
        if self._overlay.is_dir(p):
            raise is_a_directory(path)
        if self._overlay.above_a_file(p):
            raise not_a_directory(path)
        self._overlay.write(p, data)


def run_workspaces(
    targets: Mapping[str, object], status: str, error: ErrorInfo | None
) -> dict[str, Workspace]:
    """A run's workspace branches (among its capability ``targets``) as its result returns
    them: open after status ``ok``; after any other end ``UNCOMMITTABLE``, the reason
    naming the status and error."""
    branches = {name: t for name, t in targets.items() if isinstance(t, Workspace)}
    if status != "ok":
        why = f"the run ended {status}" + (
            f" ({error.type}: {error.message})" if error is not None else ""
        )
        for branch in branches.values():
            if branch.state is BranchState.OPEN:
                branch.refuse_commit(why)
    return branches
