"""``branch.commit_to_git``: a run's changes as a real commit on top of its root commit.

Only the object store and one new ref are written: a blob per written file, a new tree for
each directory on the way to a change (every other entry is the root's, kept as it was:
modes, symlinks, submodules), and a commit whose parent is the root commit. The work tree
and the index are not touched, so the commit is a reviewable unit, like a pull request
(``git show``, ``git diff <root>..<ref>``), merged or applied afterwards by the user's
choice. A directory that the changes leave empty is dropped (git holds no empty
directories); the names were checked when the program wrote them (no ``.git``, nothing
over ``NAME_MAX``), so the trees pass ``git fsck``.

Prior art: ``git commit-tree`` and ``git stash create`` (a commit made without touching
the work tree).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._exceptions import CommitError, WorkspaceError
from ._branch_state import BranchState
from ._git_tree import BLOB, EXECUTABLE, TREE, GitTree

if TYPE_CHECKING:
    from ._tree import Root

DEFAULT_AUTHOR = ("pysolate", "pysolate@localhost")
"""Author and committer when neither ``author`` is given nor ``user.name`` configured."""


def commit_to_git(
    state: BranchState,
    why_not: str | None,
    root: Root,
    changes: Callable[[], dict[str, bytes | None]],
    ref: str | None,
    message: str,
    author: tuple[str, str] | None,
) -> str:
    """``Workspace.commit_to_git`` of a branch in ``state`` (``why_not``: why it is
    uncommittable): its checks, then ``commit_branch``."""
    if state is BranchState.UNCOMMITTABLE:
        raise CommitError(f"refusing to commit a partial branch: {why_not}")
    if state not in (BranchState.OPEN, BranchState.COMMITTED, BranchState.APPLIED):
        raise WorkspaceError(f"cannot commit a {state.value} branch")
    if not isinstance(root, GitTree):
        raise CommitError("commit_to_git needs a Workspace.git root (this one is not a git commit)")
    return commit_branch(root, changes(), ref, message, author)


def commit_branch(
    root: GitTree,
    changes: dict[str, bytes | None],
    ref: str | None,
    message: str,
    author: tuple[str, str] | None,
) -> str:
    """Write ``changes`` (path -> content, None: deleted) as a commit on ``root``'s commit
    and point the new ``ref`` at it; returns the commit id (hex). ``CommitError`` for a
    ref that is invalid or exists."""
    pygit2 = root._pygit2
    repo = root.repository
    with root._lock:
        tree = _build(repo, pygit2, root.tree, "", changes) or repo.TreeBuilder().write()
        signature = _signature(repo, pygit2, author)
        commit = repo.create_commit(None, signature, signature, message, tree, [root.commit])
        name = ref if ref is not None else f"pysolate/run-{str(commit)[:12]}"
        full = name if name.startswith("refs/") else f"refs/heads/{name}"
        if not pygit2.reference_is_valid_name(full):
            raise CommitError(f"{name!r} is not a valid git reference name")
        try:
            repo.references.create(full, commit, force=False)
        except (pygit2.AlreadyExistsError, ValueError, pygit2.GitError) as exc:
            raise CommitError(f"cannot create {full}: {exc}") from None
    return str(commit)


def _build(
    repo: Any, pygit2: Any, oid: bytes | None, prefix: str, changes: dict[str, bytes | None]
) -> Any:
    """The new tree for directory ``prefix`` (raw id ``oid`` in the root, None if new), or
    None when it ends up empty."""
    base = repo[pygit2.Oid(raw=oid)] if oid is not None else None
    builder = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    entries = {e.name: (e.filemode, e.id.raw) for e in base} if base is not None else {}
    here: dict[str, bytes | None] = {}
    below: dict[str, dict[str, bytes | None]] = {}
    for path, data in changes.items():
        name, _, rest = path.partition("/")
        if rest:
            below.setdefault(name, {})[rest] = data
        else:
            here[name] = data
    for name, sub in below.items():
        mode, sub_oid = entries.get(name, (None, None))
        new = _build(repo, pygit2, sub_oid if mode == TREE else None, f"{prefix}{name}/", sub)
        if new is not None:
            builder.insert(name, new, TREE)
        elif name in entries:
            builder.remove(name)
    for name, data in here.items():
        if name in below:
            continue  # a file the branch deleted where it then wrote a directory
        if data is None:
            if name in entries:
                builder.remove(name)
            continue
        mode = entries.get(name, (BLOB, b""))[0]
        builder.insert(name, repo.create_blob(data), EXECUTABLE if mode == EXECUTABLE else BLOB)
    if len(builder) == 0:
        return None
    return builder.write()


def _signature(repo: Any, pygit2: Any, author: tuple[str, str] | None) -> Any:
    if author is not None:
        return pygit2.Signature(*author)
    try:
        return repo.default_signature
    except (KeyError, pygit2.GitError):
        return pygit2.Signature(*DEFAULT_AUTHOR)
