"""What every Guest shows the program: rebuilt tool exceptions, the final value, error lines."""

from __future__ import annotations

import pytest

from pysolate._calls._broker import failure_from
from pysolate._guest_errors import (
    AGENT_FILENAME,
    ToolError,
    error_line,
    rebuild_exception,
    split_program,
)


def _round_trip(exc: Exception) -> Exception:
    failure = failure_from(exc)
    return rebuild_exception(failure.type_name, failure.message, failure.exc_args)


@pytest.mark.parametrize(
    "original",
    [
        FileNotFoundError(2, "No such file or directory", "a.txt"),
        KeyError("k"),
        ValueError("bad", 3),
        PermissionError(13, "refused: '..' leaves the workspace", "../x"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
        TimeoutError("slow"),
    ],
)
def test_builtin_tool_exceptions_come_back_as_themselves(original: Exception) -> None:
    rebuilt = _round_trip(original)
    assert type(rebuilt) is type(original)
    assert str(rebuilt) == str(original)
    assert rebuilt.args == original.args
    if isinstance(original, OSError):
        assert isinstance(rebuilt, OSError)
        assert (rebuilt.errno, rebuilt.filename) == (original.errno, original.filename)


def test_other_exceptions_become_tool_error_with_their_name() -> None:
    class Custom(Exception):
        pass

    rebuilt = _round_trip(Custom("boom"))
    assert isinstance(rebuilt, ToolError)
    assert (rebuilt.type_name, rebuilt.message, str(rebuilt)) == ("Custom", "boom", "Custom: boom")


@pytest.mark.parametrize(
    "name", ["SystemExit", "KeyboardInterrupt", "BaseException", "GeneratorExit", "print", "object"]
)
def test_names_that_are_not_builtin_exception_classes_never_construct_them(name: str) -> None:
    assert isinstance(rebuild_exception(name, "m", ()), ToolError)


def test_args_that_do_not_fit_fall_back_to_the_message() -> None:
    rebuilt = rebuild_exception("UnicodeDecodeError", "cannot decode", ("wrong",))
    assert isinstance(rebuilt, ToolError)
    rebuilt_os = rebuild_exception("KeyError", "k", ())
    assert type(rebuilt_os) is KeyError and str(rebuilt_os) == "'k'"


def test_non_plain_exception_args_are_dropped_for_the_message() -> None:
    failure = failure_from(ValueError(object()))
    assert failure.exc_args == (failure.message,)


def test_split_program_separates_a_final_expression_keeping_lines() -> None:
    body, final = split_program("x = 1\n\nx + 1\n")
    namespace: dict[str, object] = {}
    exec(body, namespace)
    assert final is not None and eval(final, namespace) == 2
    assert final.co_filename == AGENT_FILENAME
    assert split_program("x = 1")[1] is None
    assert split_program("")[1] is None


def test_error_line_is_the_deepest_agent_frame() -> None:
    body, _ = split_program("def f():\n    return {}['k']\n\nx = f()\n")
    with pytest.raises(KeyError) as info:
        exec(body, {})
    assert error_line(info.value) == 2
    assert error_line(KeyError("no traceback")) is None
