"""``result_text``: what a model is told about a run, in one place for every integration.

A raw SDK loop (``CodeTool``'s replies), Pydantic AI (a ``ModelRetry``) and smolagents (an
``InterpreterError``) all answer the model's code with this text, so a model reads the same
thing whichever stack runs it: the value and what the program printed, or where and why it
failed; and the calls that may have changed something, in order, so that a retry neither
repeats a write nor forgets one.
"""

from __future__ import annotations

import inspect
from typing import Final

from ._result import RunResult, RunStatus

REPLY_CHARS: Final = 20_000
"""At most this many characters of the value's repr, and of what the program printed, go
into the text (each cut is said, with how much was left out): a model's context is finite,
and a request over the API's size limit would fail the conversation."""


def check_result(result: object) -> RunResult:
    """``result`` if it is a ``RunResult``; ``TypeError`` naming the forgotten ``await``
    for a coroutine, and the type for anything else."""
    if inspect.isawaitable(result):
        raise TypeError(
            f"expected a RunResult, got an un-awaited {type(result).__name__}: await it "
            "(result = await host.run_stream(...)), or use pysolate.SyncHost"
        )
    if not isinstance(result, RunResult):
        raise TypeError(f"expected a RunResult, not {type(result).__name__}")
    return result


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters not shown)"


def result_text(result: RunResult, *, limit: int = REPLY_CHARS) -> str:
    """What a model is told about ``result``.

    ``ok``: the value of the last expression (its ``repr``). Otherwise where and why:
    ``The code raised at line 3: ZeroDivisionError: ...``, ``The code was rejected ...
    Nothing ran.``, ``The code was stopped (limit) ...``. Then the calls that may have
    changed something (effect ``write`` or ``unknown``, or a method that does not exist),
    in order, with their outcomes; then what the program printed. The value and the output
    are cut at ``limit`` characters each, saying so.

    Raises ``TypeError`` for an un-awaited coroutine (a forgotten ``await``) or anything
    else that is not a ``RunResult``.
    """
    result = check_result(result)
    error = result.error
    if result.status is RunStatus.OK:
        text = f"The code ran. Value of the last expression: {_cut(repr(result.value), limit)}"
    else:
        what = f"{error.type}: {error.message}" if error is not None else "no error information"
        at = f" at line {error.line}" if error is not None and error.line is not None else ""
        if result.status is RunStatus.REJECTED:
            text = f"The code was rejected{at}: {what}. Nothing ran."
        elif result.status is RunStatus.ERROR:
            text = f"The code raised{at}: {what}"
        else:
            text = f"The code was stopped ({result.guest_status or 'aborted'}){at}: {what}"
    done = [
        f"{c.tool} ({c.outcome})" for c in result.calls if c.effect is None or c.effect.may_write
    ]
    if done:
        text += f"\nCalls that may have changed something, in order: {', '.join(done)}"
    if result.stdout:
        text += f"\nIt printed:\n{_cut(result.stdout, limit)}"
    return text
