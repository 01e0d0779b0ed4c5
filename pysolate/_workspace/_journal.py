"""The journal that makes ``branch.apply`` crash-safe, and what the next apply does with it.

An apply goes through two states, each written to the journal (atomically: a temporary
file renamed over it, both fsynced) before the step it announces:

- ``preparing``: missing directories are created, each new content is written and
  fsynced in a sibling of its file (``.pysolate-<token>-<n>.new``), and each file about to
  be replaced or deleted gets a hard link (``.pysolate-<token>-<n>.old``). Nothing a
  reader of the tree sees has changed yet; a crash here is **rolled back** (the siblings,
  links and created directories removed).
- ``committing``: each sibling is renamed over its file (atomic), each deleted file
  unlinked. A crash here is **finished**: the siblings still there are renamed in, the
  files still there deleted, after checking that each still is what the apply left there
  (the link says which inode that is); one that is not is an ``ApplyConflict`` and the
  journal is kept.

At every instant each file is wholly old or wholly new. The journal lives in the git
directory of a work tree (``.git/pysolate-apply.json``), else in the directory itself
(``.pysolate-apply.json``), so the next ``apply`` to the same directory finds it.

Prior art: write-ahead logging with redo (SQLite's rollback journal, ext4's ordered
journal); ``git``'s ``index.lock`` protocol for the atomic replacement of one file.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .._exceptions import ApplyConflict, WorkspaceError

JOURNAL = "pysolate-apply.json"
"""The journal's name in a git directory (``.`` prefixed in a plain directory)."""


@dataclass(slots=True)
class Op:
    """One file the apply changes: ``write`` (its new content in ``temp``) or ``delete``;
    ``backup`` links what was there (None when nothing was)."""

    path: str
    action: str
    sha256: str  # of the new content ("" for a delete): which apply this is
    temp: str | None = None
    backup: str | None = None


@dataclass(slots=True)
class Journal:
    state: str  # "preparing" | "committing"
    token: str
    ops: list[Op] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)  # created by this apply, outermost first

    def plan(self) -> list[tuple[str, str, str]]:
        return [(op.path, op.action, op.sha256) for op in self.ops]


def journal_path(target: Path) -> Path:
    """Where the journal of an apply to ``target`` lives (the module docstring)."""
    dot_git = target / ".git"
    if dot_git.is_dir():
        return dot_git / JOURNAL
    if dot_git.is_file():  # a linked work tree or a submodule: "gitdir: <path>"
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            return (target / text.removeprefix("gitdir:").strip()).resolve() / JOURNAL
    return target / f".{JOURNAL}"


def write_journal(where: Path, journal: Journal) -> None:
    data = json.dumps({"format": "pysolate-apply", "version": 1, **asdict(journal)}).encode()
    temp = where.with_name(where.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temp, where)
    fsync_dir(where.parent)


def read_journal(where: Path) -> Journal | None:
    try:
        raw = json.loads(where.read_bytes())
        if raw.get("format") != "pysolate-apply" or raw.get("version") != 1:
            raise ValueError("not a pysolate apply journal")
        return Journal(
            raw["state"], raw["token"], [Op(**op) for op in raw["ops"]], list(raw["dirs"])
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WorkspaceError(
            f"cannot read the apply journal {where}: {exc}; remove it once the directory is checked"
        ) from None


def fsync_dir(path: Path | int) -> None:
    fd = (
        os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if not isinstance(path, int)
        else path
    )
    try:
        os.fsync(fd)
    finally:
        if not isinstance(path, int):
            os.close(fd)


class Dirs:
    """Directory descriptors under a target, opened component by component without
    following symlinks (so a path never leaves the target, and only the relative path's
    components meet the kernel's name limits)."""

    def __init__(self, target: Path) -> None:
        self.top = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._fds: dict[str, int] = {"": self.top}

    def fd(self, path: str) -> int:
        """The descriptor of directory ``path`` (``OSError`` when it is not one)."""
        fd = self._fds.get(path)
        if fd is None:
            parent, _, name = path.rpartition("/")
            fd = os.open(
                name,
                os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=self.fd(parent),
            )
            self._fds[path] = fd
        return fd

    def split(self, path: str) -> tuple[int, str]:
        parent, _, name = path.rpartition("/")
        return self.fd(parent), name

    def lstat(self, path: str) -> os.stat_result | None:
        try:
            fd, name = self.split(path)
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None  # (a symlink on the way fails O_NOFOLLOW: callers check ancestors first)

    def sync(self) -> None:
        for fd in self._fds.values():
            os.fsync(fd)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


@contextlib.contextmanager
def opened(target: Path) -> Iterator[Dirs]:
    dirs = Dirs(target)
    try:
        yield dirs
    finally:
        dirs.close()


def sibling(op_path: str, name: str | None) -> str | None:
    """The path of a journal's temporary or backup ``name`` next to ``op_path``."""
    if name is None:
        return None
    parent = op_path.rpartition("/")[0]
    return f"{parent}/{name}" if parent else name


def recover(target: Path) -> Journal | None:
    """Finish or roll back the apply to ``target`` a crash interrupted (the module
    docstring); returns its journal (state ``committing``: finished, ``preparing``: rolled
    back), None when there was none. ``ApplyConflict`` when a file the interrupted apply
    was replacing changed since (the journal is kept)."""
    where = journal_path(target)
    journal = read_journal(where)
    if journal is None:
        return None
    with opened(target) as dirs:
        if journal.state == "committing":
            _finish(dirs, journal, where)
        else:
            _roll_back(dirs, journal)
        _drop(dirs, [sibling(op.path, op.backup) for op in journal.ops])
        dirs.sync()
    where.unlink()
    fsync_dir(where.parent)
    return journal


def _same(a: os.stat_result | None, b: os.stat_result | None) -> bool:
    return a is not None and b is not None and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _finish(dirs: Dirs, journal: Journal, where: Path) -> None:
    conflicts: dict[str, str] = {}
    todo: list[tuple[Op, str | None]] = []
    for op in journal.ops:
        now = dirs.lstat(op.path)
        kept = sibling(op.path, op.backup)
        backup = dirs.lstat(kept) if kept is not None else None
        temp = sibling(op.path, op.temp)
        if op.action == "write" and temp is not None and dirs.lstat(temp) is not None:
            if (op.backup is None and now is not None) or (
                op.backup is not None and not _same(now, backup)
            ):
                conflicts[op.path] = (
                    f"changed after an interrupted apply (its journal {where} is kept)"
                )
            todo.append((op, temp))
        elif op.action == "delete" and now is not None:
            if not _same(now, backup):
                conflicts[op.path] = (
                    f"changed after an interrupted apply (its journal {where} is kept)"
                )
            todo.append((op, None))
    if conflicts:
        raise ApplyConflict(conflicts)
    for op, temp in todo:
        fd, name = dirs.split(op.path)
        if temp is not None:
            os.rename(temp.rpartition("/")[2], name, src_dir_fd=fd, dst_dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)


def _roll_back(dirs: Dirs, journal: Journal) -> None:
    _drop(dirs, [sibling(op.path, op.temp) for op in journal.ops])
    for d in reversed(journal.dirs):
        st = dirs.lstat(d)
        if st is not None and stat.S_ISDIR(st.st_mode):
            with contextlib.suppress(OSError):  # not empty: something else put a file there
                fd, name = dirs.split(d)
                os.rmdir(name, dir_fd=fd)


def _drop(dirs: Dirs, paths: list[str | None]) -> None:
    for path in paths:
        if path is not None:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                fd, name = dirs.split(path)
                os.unlink(name, dir_fd=fd)
