"""CPython's nesting limits, met the same way whoever parses and from wherever.

CPython gives up on a source nested too deeply in three ways: the tokenizer's
``too many nested parentheses`` (200) and ``too many levels of indentation`` (100), which
are ``SyntaxError``s like any other; the PEG parser's own stack (``MemoryError`` with no
message, past 6,000 levels); and the recursion guards of the steps that turn its tree into
``ast`` objects (``RecursionError: maximum recursion depth exceeded during ast
construction``, three levels per frame) and back for ``compile`` (``... while traversing
'expr' node``, one level per frame). Those guards count from the *caller's* Python stack
depth, so a ``1+1+...+1`` of 900 terms compiled at one stack depth and not at another: the
prefix parser inside a stream run, ``run_source``'s seal, a session's, and the Guest's own
compile would each draw the line elsewhere, and one source could be ``ok`` one way and
``rejected`` (or an ``error``) another.

So a text that could be nested that deeply is parsed, or compiled, in a thread of its own
whose stack is always the same frames (``_in_fixed_thread``): every caller, in the Host
and in the Guest child, draws the line at the same depth. One AST level takes at least one
character of source (``-`` of ``--x``, ``+1`` of a sum, a block's indentation), so a text
shorter than ``SHALLOW_CHARS`` (a top-level statement shorter than
``SHALLOW_COMPILE_CHARS``, for ``compile``) nests less deeply than that and stays on the
caller's thread: its guard could only fire under a caller some 300 frames deep.

Their errors are the source's verdict, not the Host's failure: callers turn them into a
rejection with CPython's own class and message (``SealError.from_limit``).

Standard library only (the Guest child imports it, ``threading`` only when it needs it).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable
from typing import Final, TypeVar

SHALLOW_CHARS: Final = 2_000
"""Longest text ``parse`` reads on the caller's own thread: below the AST construction
guard (about 2,990 levels from a fresh stack, three fewer per frame on it) for callers up to
about 300 frames deep, since no AST is deeper than its text is long."""

SHALLOW_COMPILE_CHARS: Final = 600
"""Longest top-level statement ``compile_tree`` compiles on the caller's thread: the guard
of ``compile`` counts one level per level from the caller's depth (about 990 from a fresh
stack), so this holds for callers up to about 300 frames deep."""

LIMIT_ERRORS: Final = (RecursionError, MemoryError)
"""What CPython's parser and compiler raise when a source is nested past their limits."""

_EOL: Final = re.compile(r"\r\n|\r|\n")
"""Line ends as the tokenizer counts them (``str.splitlines`` knows more)."""

_T = TypeVar("_T")


def parse(text: str, filename: str = "<unknown>", *, quiet: bool = False) -> ast.Module:
    """``ast.parse(text, filename)`` at a fixed depth when ``text`` is long. ``quiet``: its
    warnings suppressed whatever the warning filters (the prefix parser's pieces: under
    ``-W error`` an invalid escape would be a ``SyntaxError`` there, and a warning's line
    the piece's). Raises what ``ast.parse`` raises."""
    if len(text) < SHALLOW_CHARS:
        return _parse(text, filename, quiet)
    return _in_fixed_thread(_parse, text, filename, quiet)


def compile_tree(
    source: str, tree: ast.Module | ast.Expression, filename: str, mode: str
) -> object:
    """``compile(tree, filename, mode, dont_inherit=True)`` of ``source``'s ``tree``, at a
    fixed depth when one of its statements is long. Raises what ``compile`` raises."""
    if _longest_statement(source, tree) < SHALLOW_COMPILE_CHARS:
        return compile(tree, filename, mode, dont_inherit=True)
    return _in_fixed_thread(compile, tree, filename, mode, 0, True)


def _parse(text: str, filename: str, quiet: bool) -> ast.Module:
    if not quiet:
        return ast.parse(text, filename)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, filename)


def _longest_statement(source: str, tree: ast.Module | ast.Expression) -> int:
    """An upper bound of the characters of ``tree``'s longest top-level statement in
    ``source`` (whole lines), hence of how deep any of them nests; ``len(source)`` when
    that is short anyway."""
    body = tree.body if isinstance(tree, ast.Module) else [tree.body]
    if len(source) < SHALLOW_COMPILE_CHARS or not body:
        return len(source)
    starts = [0, *(m.end() for m in _EOL.finditer(source)), len(source)]
    last = len(starts) - 1
    return max(
        starts[min(node.end_lineno or node.lineno, last)] - starts[min(node.lineno - 1, last)]
        for node in body
    )


def _in_fixed_thread(work: Callable[..., _T], *args: object) -> _T:
    """``work(*args)`` in a fresh thread, whose stack is the same few frames in every
    process; the caller waits, as it would for the work itself. Raises what ``work``
    raises."""
    import threading

    outcome: list[tuple[bool, object]] = []
    thread = threading.Thread(
        target=_run, args=(work, args, outcome), name="pysolate-parse", daemon=True
    )
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]


def _run(
    work: Callable[..., object], args: tuple[object, ...], outcome: list[tuple[bool, object]]
) -> None:
    try:
        outcome.append((True, work(*args)))
    except BaseException as exc:  # handed to the waiting caller
        outcome.append((False, exc))
