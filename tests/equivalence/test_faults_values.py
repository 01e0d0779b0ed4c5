"""Fault catalogue, values: what cannot cross the broker fails one way (issue 13, items 1, 6).

Each program runs sequentially and streamed through both Guests (``faulty.both_ways``
asserts they are equal, type-exactly, with the accounting invariants). A value the program
passes that cannot cross is one exception in the program at the call, and no tool runs; a
result that cannot cross is a ``ToolError`` (``InvalidResult``) at the call, whether the
early lane or the program's own call produced it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from pysolate import RunResult, RunStatus, Workspace, WorkspaceError
from pysolate._guest_api import ErrorInfo, GuestFactory
from pysolate.testing import differences, observable

from .faulty import both_ways, guests

pytestmark = pytest.mark.anyio

CATCH = "try:\n    {call}\nexcept Exception as e:\n    out = (type(e).__name__, str(e))\nout\n"
"""A program that makes one call and returns what it raised."""

SURROGATE = "odd.echo: arguments must be plain data (str with a lone surrogate at index 1)"


@pytest.mark.parametrize("factory", guests())
@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param("odd.echo('a\\ud800b')", ("ValueError", SURROGATE), id="surrogate"),
        pytest.param(
            "odd.echo(value='a\\udfffb')", ("ValueError", SURROGATE), id="surrogate_keyword_value"
        ),
        pytest.param(
            "odd.echo(**{'v\\ud800': 1})",
            (
                "ValueError",
                "odd.echo: arguments must be plain data (str with a lone surrogate at index 1)",
            ),
            id="surrogate_keyword_name",
        ),
        pytest.param(
            "odd.echo(['ok', {'a\\ud800b': 1}])",
            ("ValueError", SURROGATE),
            id="surrogate_nested_key",
        ),
        pytest.param(
            "odd.echo(10 ** 5000)",
            (
                "ValueError",
                "odd.echo: arguments must be plain data (int with more than 4300 digits)",
            ),
            id="huge_int",
        ),
        pytest.param(
            "odd.echo(-(10 ** 4300))",
            (
                "ValueError",
                "odd.echo: arguments must be plain data (int with more than 4300 digits)",
            ),
            id="huge_negative_int",
        ),
        pytest.param(
            "odd.echo({1, 2})",
            ("TypeError", "odd.echo: arguments must be plain data (not plain data: set)"),
            id="not_plain",
        ),
        pytest.param(
            "workspace.write_text('a.txt', 'x\\ud800')",
            (
                "ValueError",
                "workspace.write_text: arguments must be plain data (str with a lone surrogate at index 1)",
            ),
            id="surrogate_written",
        ),
    ],
)
async def test_an_argument_that_cannot_cross_fails_in_the_program(
    factory: GuestFactory, call: str, expected: tuple[str, str]
) -> None:
    both = await both_ways(CATCH.format(call=call), factory)
    result = both.streamed
    assert (result.status, result.value) == ("ok", expected)
    assert result.calls == ()  # refused before it left the program: no receipt
    assert both.streamed_odd.calls == [] and both.reference_odd.calls == []  # no tool ran
    assert result.workspaces["workspace"].changes() == {}


@pytest.mark.parametrize("factory", guests())
@pytest.mark.parametrize(
    "call",
    [
        "workspace.read_text('a\\x00b')",
        "workspace.exists('d/\\x00')",
        "workspace.write_text('a\\x00', 'x')",
    ],
)
async def test_nul_in_a_workspace_path_is_a_value_error_at_the_call(
    factory: GuestFactory, call: str
) -> None:
    """As ``open`` does: ``ValueError: embedded null byte``; nothing is read or written."""
    both = await both_ways(CATCH.format(call=call), factory)
    result = both.streamed
    assert (result.status, result.value) == ("ok", ("ValueError", "embedded null byte"))
    assert [c.outcome for c in result.calls] == ["error"]
    assert result.workspaces["workspace"].changes() == {}


@pytest.mark.parametrize("factory", guests())
@pytest.mark.parametrize(
    ("method", "reason"),
    [
        ("big", "int with more than 4300 digits"),
        ("bad_text", "str with a lone surrogate at index 1"),
    ],
)
async def test_a_result_that_cannot_cross_is_a_tool_error_in_both_lanes(
    factory: GuestFactory, method: str, reason: str
) -> None:
    source = f"try:\n    odd.{method}()\nexcept Exception as e:\n    out = (type(e).__name__, e.type_name, str(e))\nout\n"
    both = await both_ways(source, factory)
    message = f"InvalidResult: odd.{method} returned a value that cannot cross: {reason}"
    for result in (both.reference, both.streamed):
        assert (result.status, result.value) == ("ok", ("ToolError", "InvalidResult", message))
        assert [(c.outcome, c.error.type if c.error else None) for c in result.calls] == [
            ("error", "InvalidResult")
        ]
    assert both.streamed.calls[0].lane == "claimed"  # the early lane produced it
    assert both.reference.calls[0].lane == "direct"


@pytest.mark.parametrize("factory", guests())
async def test_a_tool_error_that_is_not_text_is_escaped(factory: GuestFactory) -> None:
    """The message gets the surrogate's escape; args that cannot cross are dropped."""
    source = "try:\n    odd.fail_text()\nexcept ValueError as e:\n    out = (str(e), e.args)\nout\n"
    both = await both_ways(source, factory)
    text = "bad \\udc80 name"
    assert both.streamed.value == (text, (text,))
    assert both.streamed.calls[0].error == ErrorInfo("ValueError", text, None)


@pytest.mark.parametrize("factory", guests())
async def test_nan_valued_runs_compare_equal(factory: GuestFactory) -> None:
    """``both_ways`` compares with ``same``; here the value, a result and an argument are NaN."""
    both = await both_ways(
        "x = odd.nan()\ny = odd.echo(x)\n[x, y, odd.echo([float('nan')])]\n", factory
    )
    value = both.streamed.value
    assert isinstance(value, list) and math.isnan(value[0])
    assert differences(both.reference, both.streamed) == []
    assert observable(both.reference) == observable(both.streamed)


def _result(value: object) -> RunResult:
    return RunResult(status=RunStatus.OK, value=value, error=ErrorInfo("E", "m", None))


def test_differences_compares_floats_by_bits_and_types_exactly() -> None:
    nan = float("nan")
    assert differences(_result(nan), _result(float("nan"))) == []
    assert (
        differences(_result([nan, {1.5: nan}]), _result([float("nan"), {1.5: float("nan")}])) == []
    )
    assert observable(_result((nan,))) == observable(_result((float("nan"),)))
    assert differences(_result(nan), _result(-nan)) == ["value"]  # other bits
    assert differences(_result(0.0), _result(-0.0)) == ["value"]
    assert differences(_result(nan), _result("nan")) == ["value"]
    assert differences(_result({1: "a"}), _result({True: "a"})) == ["value"]  # keys type-exactly
    assert differences(_result({1: "a", 2: "b"}), _result({2: "b", 1: "a"})) == ["value"]  # order
    assert observable(_result(1)) != observable(_result(True))


def test_frozen_skips_names_that_are_not_text(tmp_path: Path) -> None:
    """Linux allows any bytes but ``/`` and NUL in a name; one that is not UTF-8 cannot
    cross as text, so ``frozen`` leaves it (and all under it) out and lists it."""
    root = os.fsencode(tmp_path)
    (tmp_path / "ok.txt").write_text("fine")
    with open(os.path.join(root, b"caf\xe9.txt"), "wb") as f:
        f.write(b"x")
    os.mkdir(os.path.join(root, b"d\xff"))
    with open(os.path.join(root, b"d\xff", b"inner.txt"), "wb") as f:
        f.write(b"y")
    ws = Workspace.frozen(tmp_path)
    assert ws.skipped == (b"caf\xe9.txt", b"d\xff")
    assert ws.state_files() == {"ok.txt": b"fine"}
    assert ws.root_id.startswith("ws-")


def test_from_files_refuses_paths_that_are_not_text() -> None:
    with pytest.raises(WorkspaceError, match="surrogate"):
        Workspace.from_files({"a\ud800.txt": "x"})
    with pytest.raises(WorkspaceError, match="null"):
        Workspace.from_files({"a\0.txt": "x"})
