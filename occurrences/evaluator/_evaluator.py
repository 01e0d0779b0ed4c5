"""The exact, bounded argument evaluator: a call's arguments computed in the Host.

Speculation needs a call's arguments before the Guest runs. This module computes the value
of an expression from the accepted prefix *exactly as CPython would*, or says it cannot
(``NotKnown``). Exactness comes from using CPython's own operators, builtins and methods,
never reimplementations; safety comes from applying them only to plain values and only
after bounds are checked (``_budget``, ``_sizes``). It walks the AST by node type with a refusing
fallback, in the manner of pyflakes' checker: any node it does not know is ``NotKnown``.

What it never does: call anything outside the whitelist, read any attribute except a
whitelisted method in call position, touch a dunder name, evaluate ``lambda``, ``:=``,
``await`` or ``yield``, mutate a value from ``env``, or return a mutable container that
aliases one. Every CPython exception (``KeyError``, ``ZeroDivisionError``, ...) becomes
``NotKnown``: the Guest raises the real one at run time, and a wrong guess here could only
cost a wasted early read, never a different result (the claim is the gate).

Comprehensions follow CPython's scoping: the first iterable is evaluated in the enclosing
scope, every ``for`` target is local to the comprehension (reading it before it is bound is
an error), and nothing leaks out. Iterators (generator expressions, ``zip``, ``map``, ...)
are drained eagerly and bounded; that can only turn a value CPython would compute lazily
into ``NotKnown``, never into a different value.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from ._budget import DEFAULT_LIMITS, Limits
from ._walker import Walker


def evaluate(
    node: ast.expr, env: Mapping[str, object], *, limits: Limits = DEFAULT_LIMITS
) -> object:
    """The value of ``node`` computed exactly as CPython would, or raise ``NotKnown``.

    ``env`` holds the names bound where the expression runs. A name bound to ``UNKNOWN``
    gives ``NotKnown``; a name absent from ``env`` is a whitelisted pure builtin or
    ``NotKnown``; a name present in ``env`` is never the builtin. The result is immutable or
    a fresh copy sharing nothing mutable with ``env``.

    Raises:
        NotKnown: the value is unknown, unsafe to compute in the Host, exceeds a limit, or
            CPython itself would raise while computing it. Nothing else is ever raised.
    """
    walker = Walker(env, limits)
    return walker.run(lambda: walker.export(walker.eval(node, ())))


def evaluate_call_arguments(
    call: ast.Call, env: Mapping[str, object], *, limits: Limits = DEFAULT_LIMITS
) -> tuple[tuple[object, ...], dict[str, object]]:
    """``(args, kwargs)`` of ``call`` with ``*`` and ``**`` arguments expanded, or ``NotKnown``.

    One budget covers all the arguments. Every value is exported like ``evaluate``'s
    result (fresh, nothing aliasing ``env``).

    Raises:
        NotKnown: as for ``evaluate``, for any argument; also for a repeated keyword.
    """
    walker = Walker(env, limits)

    def compute() -> tuple[tuple[object, ...], dict[str, object]]:
        args, kwargs = walker.arguments(call, ())
        return tuple(walker.export(a) for a in args), {
            k: walker.export(v) for k, v in kwargs.items()
        }

    return walker.run(compute)
