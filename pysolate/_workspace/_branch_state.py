"""The lifecycle of a workspace branch (split from ``_workspace``: one enum, one transition
function that rejects illegal moves)."""

from __future__ import annotations

import enum

from .._exceptions import WorkspaceError


class BranchState(enum.Enum):
    """Lifecycle of a branch; a root is always ROOT::

        OPEN ─┬─> COMMITTED
              ├─> APPLIED
              ├─> DISCARDED
              └─> UNCOMMITTABLE ──> DISCARDED

    A failed ``commit`` or ``apply`` (a conflict, an unusable target, a disk error) leaves
    the branch ``OPEN``. ``commit_to_git`` writes only git objects and a ref, so it leaves
    the state as it is (an open, committed or applied branch can be written as a commit).
    ``UNCOMMITTABLE``: the run did not end ``ok`` (it raised, was aborted, hit a limit), so
    its writes are partial. They can still be inspected (``changes``, ``state_files``) and
    discarded; ``commit``, ``commit_to_git`` and ``apply`` raise ``CommitError`` saying why.
    """

    ROOT = "root"
    OPEN = "open"
    COMMITTED = "committed"
    APPLIED = "applied"
    DISCARDED = "discarded"
    UNCOMMITTABLE = "uncommittable"


_MOVES: dict[BranchState, frozenset[BranchState]] = {
    BranchState.OPEN: frozenset(
        {
            BranchState.COMMITTED,
            BranchState.APPLIED,
            BranchState.DISCARDED,
            BranchState.UNCOMMITTABLE,
        }
    ),
    BranchState.UNCOMMITTABLE: frozenset({BranchState.DISCARDED}),
}


def advance(state: BranchState, to: BranchState) -> BranchState:
    if to not in _MOVES.get(state, frozenset()):
        raise WorkspaceError(f"cannot go from {state.value} to {to.value}")
    return to
