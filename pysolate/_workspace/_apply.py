"""``branch.apply(path)``: a run's changes written back to the real directory, safely.

First every path the changes touch (each written or deleted file, each directory the
branch created, and their ancestors) is compared with what the root held there
(``Root.held``): the same kind of entry (a file, a symlink with the same target, a
directory, nothing) and, for a file, the same content (its SHA-256 or git blob id; for a
lazy root its recorded identity, or the hash once read). Where the root is a git commit
and ``path`` is a work tree, the index must hold the root's entry for each such path too
(nothing staged since, nothing added). Any difference is an ``ApplyConflict`` naming every
such path, before anything is written. Then the changes are written through the journal
of ``_journal``: each file replaced atomically, a crash at any point leaving each file
wholly old or wholly new and a journal that the next ``apply`` finishes or rolls back.

The index is not updated (the changes show as unstaged in ``git status``), and nothing
outside the touched paths is looked at or changed. An apply is not atomic against another
writer of the same files during its own few milliseconds: the comparison proves the state
at its start.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from .._exceptions import ApplyConflict, CommitError, WorkspaceError
from ._git_tree import GitTree
from ._journal import Dirs, Journal, Op, fsync_dir, journal_path, opened, recover, write_journal
from ._lazy_tree import identity
from ._tree import Held, Root, ancestors

FILE_MODE = 0o666
"""Mode of a file the apply creates, before the umask (a replaced file keeps its mode)."""


def apply_branch(
    root: Root, target: Path, changes: dict[str, bytes | None], dirs_added: set[str]
) -> None:
    """Apply ``changes`` (path -> content, None: deleted) and create ``dirs_added`` under
    ``target`` (the module docstring). ``ApplyConflict``, ``CommitError`` (not a
    directory), ``WorkspaceError`` (the writing failed, or a change the journal cannot
    order: a directory where the root held a file)."""
    target = Path(os.path.realpath(target))
    if not target.is_dir():
        raise CommitError(f"apply target {target} is not a directory")
    where = journal_path(target)
    plan = [
        (path, "write" if data is not None else "delete", _sha(data))
        for path, data in sorted(changes.items())
    ]
    finished = recover(target)
    if finished is not None and finished.state == "committing" and finished.plan() == plan:
        return  # this very apply was interrupted, and is now finished
    own = os.path.relpath(where, target)
    if any(path == own or path.startswith(own + ".") for path in changes):
        raise WorkspaceError(f"cannot apply a change to {own}: it is the apply journal's name")
    with opened(target) as dirs:
        held = {path: root.held(path) for path in changes}
        create = _check(root, target, dirs, changes, held, dirs_added)
        if not plan and not create:
            return
        journal = Journal("preparing", secrets.token_hex(6), dirs=create)
        for n, (path, data) in enumerate(sorted(changes.items())):
            existing = held[path].kind in ("file", "link")
            journal.ops.append(
                Op(
                    path,
                    "write" if data is not None else "delete",
                    _sha(data),
                    temp=f".pysolate-{journal.token}-{n}.new" if data is not None else None,
                    backup=f".pysolate-{journal.token}-{n}.old" if existing else None,
                )
            )
        write_journal(where, journal)
        try:
            _prepare(dirs, journal, changes)
        except Exception as exc:
            recover(target)  # rolls the preparation back
            raise WorkspaceError(f"apply to {target} failed, nothing was changed: {exc}") from exc
        journal.state = "committing"
        write_journal(where, journal)
        try:
            for op in journal.ops:
                fd, name = dirs.split(op.path)
                if op.temp is not None:
                    os.rename(op.temp, name, src_dir_fd=fd, dst_dir_fd=fd)
                else:
                    os.unlink(name, dir_fd=fd)
            dirs.sync()
            for op in journal.ops:
                if op.backup is not None:
                    fd, _ = dirs.split(op.path)
                    os.unlink(op.backup, dir_fd=fd)
        except Exception as exc:
            raise WorkspaceError(
                f"apply to {target} was interrupted; the next apply to it finishes it: {exc}"
            ) from exc
    where.unlink()
    fsync_dir(where.parent)


def _sha(data: bytes | None) -> str:
    return hashlib.sha256(data).hexdigest() if data is not None else ""


def _check(
    root: Root,
    target: Path,
    dirs: Dirs,
    changes: dict[str, bytes | None],
    held: dict[str, Held],
    dirs_added: set[str],
) -> list[str]:
    """Every conflict, raised together; else the directories to create (outermost first)."""
    conflicts: dict[str, str] = {}
    create: list[str] = []
    wanted = set(dirs_added)
    for path in changes:
        wanted.update(ancestors(path))

    def under_conflict(path: str) -> bool:
        return any(a in conflicts for a in ancestors(path))

    for d in sorted(wanted, key=lambda p: (p.count("/"), p)):
        if under_conflict(d):
            continue
        was, now = root.held(d), _kind(dirs.lstat(d))
        if was.kind == "file" and changes.get(d, b"") is None:
            raise WorkspaceError(
                f"cannot apply: directory {d} replaces a file the run deleted; commit the branch to a new directory instead"
            )
        if now == "dir":
            continue
        if now is None and was.kind == "missing":
            create.append(d)
        else:
            conflicts[d] = _changed(was.kind, now)
    for path in changes:
        if not under_conflict(path):
            why = _compare(held[path], dirs, path)
            if why is not None:
                conflicts[path] = why
    if isinstance(root, GitTree):
        conflicts.update(_index_conflicts(root, target, held, conflicts))
    if conflicts:
        raise ApplyConflict(conflicts)
    return create


def _kind(st: os.stat_result | None) -> str | None:
    if st is None:
        return None
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISLNK(st.st_mode):
        return "link"
    return "dir" if stat.S_ISDIR(st.st_mode) else "special"


def _changed(was: str, now: str | None) -> str:
    if now is None:
        return "deleted"
    if was == "missing":
        return "created" if now == "file" else f"created (a {'symlink' if now == 'link' else now})"
    return {"dir": "a directory now", "link": "a symlink now", "file": "a file now"}.get(
        now, "not a regular file now"
    )


def _compare(was: Held, dirs: Dirs, path: str) -> str | None:
    """Why ``path`` on disk is not what the root held, or None."""
    st = dirs.lstat(path)
    now = _kind(st)
    if now != (was.kind if was.kind != "missing" else None):
        return _changed(was.kind, now)
    if st is None or now == "dir":
        return None
    fd, name = dirs.split(path)
    if now == "link":
        return (
            None
            if os.fsencode(os.readlink(name, dir_fd=fd)) == was.link
            else "modified (the symlink points elsewhere)"
        )
    if was.identity is not None and identity(st) == was.identity:
        return None
    if was.sha256 is None and was.git_oid is None:
        return "modified"
    data = _read(fd, name)
    if was.sha256 is not None:
        return None if hashlib.sha256(data).digest() == was.sha256 else "modified"
    assert was.git_oid is not None
    return None if _git_blob_id(data, len(was.git_oid)) == was.git_oid else "modified"


def _read(fd: int, name: str) -> bytes:
    f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    with os.fdopen(f, "rb") as file:
        return file.read()


def _git_blob_id(data: bytes, width: int) -> bytes:
    header = b"blob %d\0" % len(data)
    return (hashlib.sha1(header + data) if width == 20 else hashlib.sha256(header + data)).digest()


def _index_conflicts(
    root: GitTree, target: Path, held: dict[str, Held], known: dict[str, str]
) -> dict[str, str]:
    """Paths whose index entry in ``target``'s repository is not the root's (nothing when
    ``target`` is not a git work tree)."""
    pygit2: Any = root._pygit2
    try:
        repository = pygit2.Repository(str(target))
    except pygit2.GitError:
        return {}
    if repository.workdir is None or Path(repository.workdir).resolve() != target:
        return {}
    index = repository.index
    index.read()
    conflicted = {e.path for entry in (index.conflicts or ()) for e in entry if e is not None}
    out: dict[str, str] = {}
    for path, was in held.items():
        if path in known:
            continue
        if path in conflicted:
            out[path] = "conflicted in the index"
            continue
        entry = index[path] if path in index else None  # noqa: SIM401 (pygit2's Index has no get)
        if was.kind in ("file", "link"):
            if entry is None:
                out[path] = "removed from the index"
            elif entry.id.raw != was.git_oid or entry.mode != was.mode:
                out[path] = "staged otherwise in the index"
        elif entry is not None:
            out[path] = "added to the index"
    return out


def _prepare(dirs: Dirs, journal: Journal, changes: dict[str, bytes | None]) -> None:
    for d in journal.dirs:
        fd, name = dirs.split(d)
        os.mkdir(name, 0o777, dir_fd=fd)
    for op in journal.ops:
        fd, name = dirs.split(op.path)
        if op.backup is not None:
            os.link(name, op.backup, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        data = changes[op.path]
        if data is None:
            continue
        assert op.temp is not None
        old = dirs.lstat(op.path)
        mode = stat.S_IMODE(old.st_mode) if old is not None and stat.S_ISREG(old.st_mode) else None
        out = os.open(
            op.temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            FILE_MODE,
            dir_fd=fd,
        )
        try:
            if mode is not None:
                os.fchmod(out, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            os.fsync(out)
        finally:
            os.close(out)
    dirs.sync()
