"""What the correctness contract says two runs must agree on, and where they differ.

A speculating run must equal the sequential run of the same sealed source (DESIGN.md):
outcome (status, value, stdout, error), the ordered log of logical calls (capability,
method, arguments, outcome, result or error) and the final workspace state. Timings,
lanes, observation ids and the report may differ, so ``RunResult.__eq__`` (which compares
them) is not the contract's equality. Plain data is compared type-exactly: ``1``, ``1.0``
and ``True`` differ here as they do in call keys.
"""

from __future__ import annotations

from ._result import RunResult


def observable(result: RunResult) -> dict[str, object]:
    """The parts of ``result`` the contract fixes, as comparable plain data."""
    return {
        "status": result.status.value,
        "value": result.value,
        "stdout": result.stdout,
        "error": result.error,
        "calls": [(c.capability, c.method, c.args, c.kwargs, c.outcome, c.result, c.error) for c in result.calls],
        "workspaces": {name: ws.state_files() for name, ws in sorted(result.workspaces.items())},
    }


def differences(a: RunResult, b: RunResult) -> list[str]:
    """Names of the contract's parts on which ``a`` and ``b`` differ (empty: equal)."""
    left, right = observable(a), observable(b)
    return [name for name in left if not same(left[name], right[name])]


def same(x: object, y: object) -> bool:
    """Equality that also requires equal types, all the way down."""
    if type(x) is not type(y):
        return False
    if isinstance(x, dict):
        assert isinstance(y, dict)
        return list(x) == list(y) and all(same(x[k], y[k]) for k in x)
    if isinstance(x, list | tuple):
        assert isinstance(y, list | tuple)
        return len(x) == len(y) and all(same(i, j) for i, j in zip(x, y, strict=True))
    return bool(x == y)
