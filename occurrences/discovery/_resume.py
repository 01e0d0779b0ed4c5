"""A provisional ``for`` loop discovered line by line, not block by block (issue 36, item 7).

An unfinished ``for`` over known items is read once per new line of its body while the
model streams it. Walking the whole body again for every line made a long block quadratic
(a 400-line body: 28 s of discovery where ``run_source`` takes 0.14 s). Instead the walk is
*recorded*: per iteration, the state of the loop's scope at two points (after the body's
final statements - those another statement already follows - and after the whole body as
it stood), and a new parse of the same loop whose body only grew is *resumed* from them:
each iteration's state is put back and only the new statements are walked in it.

What stays exact and what is approximated:

- Within an iteration, every new statement reads exactly what the statements before it
  bound in that iteration (its point was taken there).
- Across iterations it is approximate: iteration ``i + 1`` starts from its own recorded
  point, which did not see what the *new* statements did in iteration ``i`` (a name they
  rebind for the next iteration, a write). That can only make an early call's arguments
  wrong or its read early where the program reads after a write - work that no Guest call
  claims, because the claim is by exact key on the exact view (docs/contract.md, rule 3). Provisional
  occurrences are tentative anyway, and the accepted loop is discovered afresh, exactly.
- A ``break`` a new statement makes certain in iteration ``i`` ends the loop there: every
  later iteration's occurrences are declared dead (each iteration runs under a branch of
  its own, ``reached``, live until then), so their early work is released at once.
- A walk that saw a possible write (its order among branch writes must follow the program,
  which resumption would not keep), ran out of expansion budget, or that the new parse
  does not continue (another header, an ``else``, a changed final statement) is not
  resumed: the statement is walked afresh, as before.

Prior art: incremental static analysis that memoizes per-statement abstract states and
re-runs the transfer functions only downstream of an edit (IncA, Infer's incremental mode);
here the edits only append.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from dataclasses import replace as copy_with

from ._bindings import Binding, Origins, Scope
from ._control import _Branch, _Context, _Exit
from ._model import PathItem
from ._scopes import Written


@dataclass(slots=True)
class Point:
    """The loop scope's state (and the timeline's) at one point of one iteration."""

    local: dict[str, Binding]
    mutable: dict[str, None]
    assigned: set[str]
    seen: dict[str, Origins]
    aliased: set[str]
    written: Written
    maybe: bool  # the loop's exit may already have been taken (``_Exit.maybe``)
    branches: tuple[_Branch, ...]


def capture(overlay: Scope, ctx: _Context, exit_: _Exit) -> Point:
    """A copy of the state at ``ctx`` (``overlay`` is the loop's scope)."""
    return Point(
        dict(overlay.local),
        dict(overlay.mutable),
        set(overlay.assigned),
        dict(overlay.seen),
        set(overlay.aliased),
        ctx.written.copy(),
        exit_.maybe,
        ctx.branches,
    )


def restore(point: Point, overlay: Scope, ctx: _Context, path: tuple[PathItem, ...]) -> _Context:
    """Put ``point`` back into ``overlay`` (taking its containers: a point is resumed from
    once); the iteration's context ``ctx`` as it stood there, at ``path``."""
    overlay.local, overlay.mutable, overlay.assigned = point.local, point.mutable, point.assigned
    overlay.seen, overlay.aliased = point.seen, point.aliased
    return copy_with(ctx, written=point.written, branches=point.branches, path=path)


@dataclass(slots=True, eq=False)
class Iteration:
    """One iteration of a recorded loop walk."""

    index: int
    ctx: _Context  # where its body starts (its path is set per walk)
    reached: _Branch  # live until a ``break`` before it is certain
    final: Point | None = None  # after the final statements (None: it left before)
    after: Point | None = None  # after the whole body (None: it left before)
    left: type[ast.stmt] | None = None  # a ``break``/``continue`` that certainly ran
    left_in_tail: bool = False  # ... in the statements after ``final``


@dataclass(slots=True, eq=False)
class LoopWalk:
    """The recorded walk of the provisional ``for`` still streaming (see the module
    docstring). ``body[:final]`` are the statements walked as final, the rest (the last
    one) as the tail, whose occurrences are of generation ``tail``."""

    node: ast.For
    limit: tuple[int, int]  # where the model's text ended in the parse last walked
    body: list[ast.stmt] = field(default_factory=list)
    final: int = 0
    tail: int = 0
    overlay: Scope | None = None
    exit_: _Exit | None = None
    iterations: list[Iteration] = field(default_factory=list)
    expanded: bool = False  # the loop was expanded (its items are known)
    resumable: bool = True  # no write seen, expansion not cut short
    broken: bool = False  # a certain ``break`` ended it at the last iteration


def span(node: ast.AST) -> tuple[object, ...]:
    return (
        type(node),
        getattr(node, "lineno", None),
        getattr(node, "col_offset", None),
        getattr(node, "end_lineno", None),
        getattr(node, "end_col_offset", None),
    )


def continues(walk: LoopWalk, statements: list[ast.stmt]) -> ast.For | None:
    """The new parse's loop, if it is ``walk``'s loop with its body grown: the same header,
    the same final statements (the very objects: the parser shares them, ``Pending.reused``),
    no ``else`` yet."""
    if not walk.resumable or len(statements) != 1:
        return None
    new, old = statements[0], walk.node
    if not isinstance(new, ast.For) or new.orelse or span(new)[:3] != span(old)[:3]:
        return None
    if span(new.target) != span(old.target) or span(new.iter) != span(old.iter):
        return None
    body, final = new.body, walk.final
    if len(body) <= final:
        return None
    # The parser shares a prefix of the previous parse's body (its final statements, as
    # one slice, in order): the same object at both ends of it is the same prefix.
    if final and (body[0] is not walk.body[0] or body[final - 1] is not walk.body[final - 1]):
        return None
    return new


def same_statement(old: ast.stmt, new: ast.stmt, limit: tuple[int, int]) -> bool:
    """Whether ``new`` is ``old`` parsed again, ``old`` being of a parse of the model's text
    up to ``limit``. A statement is its text: the same span, all of it the model's own (the
    repair adds only after the limit), holds the same statement, node for node."""
    end = (old.end_lineno or 0, old.end_col_offset or 0)
    return end <= limit and span(old) == span(new)
