"""What the correctness contract says two runs must agree on, and where they differ.

A speculating run must equal the sequential run of the same sealed source (docs/contract.md):
outcome (status, value, stdout, error), the ordered log of logical calls (capability,
method, arguments, outcome, result or error) and the final workspace state. Timings,
lanes, observation ids and the report may differ, so ``RunResult.__eq__`` (which compares
them) is not the contract's equality. Plain data is compared type-exactly: ``1``, ``1.0``
and ``True`` differ here as they do in call keys (dict keys too), and floats by their
bits: a NaN equals a NaN of the same bits, ``0.0`` differs from ``-0.0``.
"""

from __future__ import annotations

import dataclasses
import struct

from ._result import RunResult


class Observed(dict[str, object]):
    """``observable``'s result: a plain dict whose ``==`` is ``same`` (exact, NaN-safe),
    so ``observable(a) == observable(b)`` is the contract's equality."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dict) and same(dict(self), dict(other))

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None


def observable(result: RunResult) -> Observed:
    """The parts of ``result`` the contract fixes, as comparable plain data."""
    return Observed(
        {
            "status": result.status.value,
            "value": result.value,
            "stdout": result.stdout,
            "error": result.error,
            "calls": [
                (c.capability, c.method, c.args, c.kwargs, c.outcome, c.result, c.error)
                for c in result.calls
            ],
            "workspaces": {
                name: ws.state_files() for name, ws in sorted(result.workspaces.items())
            },
        }
    )


def differences(a: RunResult, b: RunResult) -> list[str]:
    """Names of the contract's parts on which ``a`` and ``b`` differ (empty: equal)."""
    left, right = observable(a), observable(b)
    return [name for name in left if not same(left[name], right[name])]


def same(x: object, y: object) -> bool:
    """Equality that also requires equal types, all the way down (into dataclasses such
    as ``ErrorInfo``); floats are equal when their bits are."""
    if type(x) is not type(y):
        return False
    if isinstance(x, float):
        assert isinstance(y, float)
        return _bits(x) == _bits(y)
    if isinstance(x, dict):
        assert isinstance(y, dict)
        return len(x) == len(y) and all(
            same(kx, ky) and same(vx, vy)
            for (kx, vx), (ky, vy) in zip(x.items(), y.items(), strict=True)
        )
    if isinstance(x, list | tuple):
        assert isinstance(y, list | tuple)
        return len(x) == len(y) and all(same(i, j) for i, j in zip(x, y, strict=True))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return all(same(getattr(x, f.name), getattr(y, f.name)) for f in dataclasses.fields(x))
    return bool(x == y)


def _bits(value: float) -> bytes:
    return struct.pack(">d", value)
