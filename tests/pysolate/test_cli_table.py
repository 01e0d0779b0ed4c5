"""The CLI's results table: bordered where it fits the terminal; otherwise one plain line per
row (whole on a pipe, cut to a narrow terminal's width), never a row broken in two."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from rich.console import Console

from pysolate import RunReport, RunResult, RunStatus
from pysolate._cli._measure import Measured
from pysolate._cli._output import print_table

RUNS = [
    Measured(
        RunResult(
            RunStatus.OK,
            value=10,
            stdout="wrote standup.md with 10 lines\n",
            report=RunReport(logical=15),
        ),
        10.53,
        7.2,
    ),
    Measured(
        RunResult(
            RunStatus.OK,
            value=10,
            stdout="wrote standup.md with 10 lines\n",
            report=RunReport(logical=15, claimed=13),
        ),
        6.95,
        6.9,
    ),
]
ROWS = 17  # the outcome rows (5) and the report rows (12)


def printed(width: int, *, terminal: bool) -> list[str]:
    out = io.StringIO()
    console = Console(
        file=out, width=width, force_terminal=terminal, color_system=None, highlight=False
    )
    print_table(console, "Stream, then run  vs  Pysolate", ["Stream, then run", "Pysolate"], RUNS)
    return out.getvalue().splitlines()


def test_a_wide_terminal_gets_the_bordered_table() -> None:
    lines = printed(160, terminal=True)
    assert any(line.startswith("┏") for line in lines)
    assert all(len(line) <= 160 for line in lines)


@pytest.mark.parametrize(("width", "terminal"), [(80, False), (60, True), (200, False)])
def test_otherwise_each_row_is_one_line(width: int, terminal: bool) -> None:
    lines = printed(width, terminal=terminal)
    assert lines[0].rstrip() == "Stream, then run  vs  Pysolate" and not any(
        "┃" in line for line in lines
    )
    assert len(lines) == 2 + ROWS  # the title, the column names, one line per row
    (stdout,) = [line for line in lines if line.startswith("stdout")]
    (claimed,) = [line for line in lines if line.startswith("claimed")]
    assert claimed.split() == ["claimed", "0", "13"]
    if terminal:
        assert all(len(line) <= width for line in lines)
        assert stdout.endswith("…")
    else:  # a pipe: whole lines, however long
        assert stdout.split("  ")[-1].strip() == "wrote standup.md with 10 lines"


def test_the_demo_on_a_pipe_prints_whole_lines() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pysolate", "demo", "--speed", "50"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Replaying") and lines[0].endswith("then with Pysolate...")
    (stdout,) = [line for line in lines if line.startswith("stdout")]
    assert stdout.count("wrote standup.md with 10 lines") == 2
    assert [line.split()[-1] for line in lines if "tokens" in line and "early" in line] == [
        "ok",
        "ok",
    ]
