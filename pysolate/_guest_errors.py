"""What the program sees of tool failures, its own errors and its final value.

Every Guest (the isolated subprocess one in ``_guest/`` and the in-process one in
``pysolate.testing``) must show the program exactly the same thing, or the in-process
Guest would test a different contract. So the few rules that decide it live here, once:

- ``rebuild_exception``: a ``ToolFailure`` (type name, message, plain args) becomes the
  builtin exception of that name, so ``except FileNotFoundError`` works in the program;
  any other name becomes ``ToolError``. Nothing but builtin ``Exception`` subclasses is
  ever constructed from a name, so a Host cannot make the program raise ``SystemExit``.
- ``split_program``: the program's last top-level statement, when it is an expression, is
  evaluated separately so its value becomes the run's value (like the REPL's ``_``).
- ``error_line``: the line in the agent's source of the deepest frame running agent code.
- ``arguments_not_plain``: a call whose arguments cannot cross (not plain data, a lone
  surrogate, an over-long int) fails in the Guest, before it reaches the Host.

Standard library only, and nothing from the rest of ``pysolate`` (``occurrences.depth``,
the nesting limits, is standard library only too): the subprocess Guest imports this
module without the Host's dependencies.
"""

from __future__ import annotations

import ast
import builtins
from types import CodeType, TracebackType

from occurrences.depth import compile_tree, parse

AGENT_FILENAME = "<agent>"
"""The filename agent code is compiled under; frames with it are agent frames."""


class ToolError(Exception):
    """A capability failed with an exception that is not a Python builtin.

    Raised inside the program. ``type_name`` is the class name the tool raised; ``str()``
    of it is ``"<type_name>: <message>"`` so nothing the Host reported is lost.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


def _builtin_exception(type_name: str) -> type[Exception] | None:
    candidate = getattr(builtins, type_name, None)
    if isinstance(candidate, type) and issubclass(candidate, Exception):
        return candidate
    return None


def rebuild_exception(type_name: str, message: str, args: tuple[object, ...]) -> Exception:
    """The exception the program sees for a failed call.

    A builtin ``Exception`` subclass named ``type_name`` is built from ``args`` (so
    ``FileNotFoundError(2, 'No such file or directory', 'a.txt')`` keeps its ``errno``
    and its ``str``); when the args do not fit its constructor, from ``message`` alone;
    otherwise a ``ToolError``.
    """
    cls = _builtin_exception(type_name)
    if cls is None:
        return ToolError(type_name, message)
    for attempt in (args, (message,)) if args else ((message,),):
        try:
            return cls(*attempt)
        except Exception:
            continue
    return ToolError(type_name, message)


def arguments_not_plain(capability: str, method: str, reason: Exception) -> Exception:
    """The error a call whose arguments cannot cross raises in the program.

    Every Guest raises it before the call leaves the program (so the call never reaches
    the Host, no tool runs and there is no receipt), from the same ``reason``: the
    ``NotPlain`` the plain-data codec raised. A value of the wrong type is a
    ``TypeError``; one of a plain type that cannot cross (``Uncrossable``: a lone
    surrogate, an int over the digit limit) a ``ValueError``.
    """
    cls = ValueError if isinstance(reason, ValueError) else TypeError
    where = f"{capability}.{method}" if capability else method  # "": a function tool
    return cls(f"{where}: arguments must be plain data ({reason})")


def split_program(source: str) -> tuple[CodeType, CodeType | None]:
    """Compile ``source`` as (body, final expression or None), under ``AGENT_FILENAME``.

    Line numbers are the agent's: both parts are compiled from nodes of one parse.
    Raises ``SyntaxError`` exactly as ``compile`` does, and a source nested past CPython's
    limits its ``RecursionError`` or ``MemoryError`` at the depth the Host's seal met them
    (``occurrences.depth``): what the seal accepted, every Guest compiles.
    """
    tree = parse(source, AGENT_FILENAME)
    last: ast.expr | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1].value
        del tree.body[-1]
    body = compile_tree(source, tree, AGENT_FILENAME, "exec")
    assert isinstance(body, CodeType)
    if last is None:
        return body, None
    final = compile_tree(source, ast.Expression(last), AGENT_FILENAME, "eval")
    assert isinstance(final, CodeType)
    return body, final


def error_line(exc: BaseException) -> int | None:
    """The line of the deepest agent frame in ``exc``'s traceback (None when there is none).

    A ``SyntaxError`` raised while compiling agent code reports its own line.
    """
    line: int | None = None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == AGENT_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None and isinstance(exc, SyntaxError) and exc.filename == AGENT_FILENAME:
        line = exc.lineno
    return line


def safe_str(exc: BaseException) -> str:
    """``str(exc)``, or a placeholder when the exception's own ``__str__`` raises."""
    try:
        return str(exc)
    except Exception:
        return f"<unprintable {type(exc).__name__}>"


def safe_repr(value: object) -> str:
    """``repr(value)``, or a placeholder naming its type when that raises (an int over
    the str-conversion limit, a broken ``__repr__``). The placeholder holds no address:
    every run of the same program must show the same value."""
    try:
        return repr(value)
    except Exception as exc:
        return f"<{type(value).__qualname__} object: repr raised {type(exc).__name__}>"
