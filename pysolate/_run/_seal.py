"""The seal: the complete source is checked once, as the Guest's compiler would check it."""

from __future__ import annotations

import ast

from occurrences import SealError
from occurrences.depth import LIMIT_ERRORS, compile_tree, parse

from .._guest_api import ErrorInfo
from .._guest_errors import AGENT_FILENAME


def seal(source: str, tree: ast.Module | None = None) -> ast.Module:
    """Check that ``source`` compiles as a whole and return its tree; raise ``SealError``
    when it does not.

    ``compile``, not only ``ast.parse``: some errors (``return`` outside a function, a
    top-level ``await``, ``too many statically nested blocks``) are only found by the
    compiler, and the Guest must never start on a source it would reject. ``tree``, when
    given, is ``source`` already parsed (the prefix parser's statements equal
    ``ast.parse``'s), so it is not parsed again.

    A source nested past CPython's limits (``RecursionError``, the parser's
    ``MemoryError``) is rejected with CPython's class and message, at the same depth for
    every caller (``occurrences.depth``): ``run_source``, ``run_stream`` and a
    session draw the line in the same place.
    """
    try:
        if tree is None:
            tree = parse(source, AGENT_FILENAME)
        compile_tree(source, tree, AGENT_FILENAME, "exec")
        return tree
    except SyntaxError as exc:
        raise SealError.from_syntax_error(exc)  # noqa: B904 (it sets __cause__ itself)
    except LIMIT_ERRORS as exc:
        raise SealError.from_limit(exc) from exc
    except ValueError as exc:  # NUL bytes, lone surrogates: reported as the prefix parser does
        raise SealError(str(exc)) from exc


def rejection(exc: SealError) -> ErrorInfo:
    """The error a rejected run reports: the compiler's own class name, message and line."""
    return ErrorInfo(type(exc.__cause__ or exc).__name__, exc.msg, exc.lineno)
