"""What the correctness contract says two runs must agree on, and where they differ.

The demo shows the sequential baseline and the Pysolate run side by side; "equal" must
mean the contract's equality (DESIGN.md), not ``RunResult.__eq__`` (which also compares
reports and receipts' timings, lanes and observation ids, which are allowed to differ).
"""

from __future__ import annotations

from pysolate import RunResult


def observable(result: RunResult) -> dict[str, object]:
    """The parts of ``result`` the contract fixes: outcome, call log, workspace changes.

    The call log keeps capability, method, arguments, outcome and result or error of each
    logical call, in order; timings, lanes and observation ids are left out.
    """
    return {
        "status": result.status.value,
        "value": result.value,
        "stdout": result.stdout,
        "error": result.error,
        "calls": [
            (c.capability, c.method, c.args, c.kwargs, c.outcome, c.result, c.error)
            for c in result.calls
        ],
        "workspace changes": {name: ws.changes() for name, ws in sorted(result.workspaces.items())},
    }


def differences(a: RunResult, b: RunResult) -> list[str]:
    """Names of the contract's parts on which ``a`` and ``b`` differ (empty: equal).

    Plain-data comparison is type-exact (``1``, ``1.0`` and ``True`` differ), as call keys are.
    """
    left, right = observable(a), observable(b)
    return [name for name in left if not _same(left[name], right[name])]


def _same(x: object, y: object) -> bool:
    if type(x) is not type(y):
        return False
    if isinstance(x, dict):
        assert isinstance(y, dict)
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, list | tuple):
        assert isinstance(y, list | tuple)
        return len(x) == len(y) and all(_same(i, j) for i, j in zip(x, y, strict=True))
    return x == y
