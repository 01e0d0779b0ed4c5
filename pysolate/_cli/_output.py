"""What the CLI prints and writes: the outcome and report table, JSON, the timeline picture."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .._report._result import RunResult
from .._report._timeline import Comparison, headline, render_svg
from ._errors import CliError
from ._measure import Measured

_REPORT_ROWS = (
    "logical",
    "physical",
    "claimed",
    "direct",
    "shared",
    "cancelled",
    "late",
    "orphaned",
)


def _outcome_rows(result: RunResult) -> list[tuple[str, str]]:
    return [
        ("status", result.status.value),
        ("value", repr(result.value)),
        ("stdout", result.stdout.rstrip("\n")),
        ("error", _error_text(result)),
        ("isolation", result.isolation.level if result.isolation else "none (nothing ran)"),
    ]


def _error_text(result: RunResult) -> str:
    error = result.error
    if error is None:
        return ""
    where = f" (line {error.line})" if error.line is not None else ""
    return f"{error.type}: {error.message}{where}"


def _report_rows(m: Measured) -> list[tuple[str, str]]:
    report = m.result.report
    rows = [
        ("wall s", f"{m.wall_seconds:.2f}"),
        ("stream s", f"{m.stream_seconds:.2f}"),
        ("after last token s", f"{m.after_stream_seconds:.2f}"),
    ]
    rows += [(name, str(getattr(report, name))) for name in _REPORT_ROWS]
    rows.append(("time saved s", f"{report.time_saved:.2f}"))
    return rows


def _rows(runs: Sequence[Measured]) -> list[list[tuple[str, list[str]]]]:
    """The table's sections (outcome, report): per row its label and one cell per run."""
    sections = []
    for section in ([_outcome_rows(m.result) for m in runs], [_report_rows(m) for m in runs]):
        sections.append(
            [(label, [rows[i][1] for rows in section]) for i, (label, _) in enumerate(section[0])]
        )
    return sections


def table(title: str, columns: Sequence[str], runs: Sequence[Measured]) -> Table:
    """Outcome rows, a rule, then report rows; one column per run."""
    table = Table(title=title, title_justify="left")
    table.add_column("")
    for name in columns:
        table.add_column(name, overflow="fold")
    for section in _rows(runs):
        for i, (label, cells) in enumerate(section):
            table.add_row(label, *cells, end_section=i == len(section) - 1)
    return table


def print_table(
    console: Console, title: str, columns: Sequence[str], runs: Sequence[Measured]
) -> None:
    """The runs' table as a bordered table where it fits the terminal; otherwise as plain
    lines, one per row, columns aligned, never wrapped (a row broken over two lines reads
    as two rows): whole on a pipe or in a file, cut to the width of a narrow terminal."""
    bordered = table(title, columns, runs)
    natural = Measurement.get(
        console, console.options.update_width(10**6), bordered
    ).maximum  # unclamped
    if console.is_terminal and natural <= console.width:
        console.print(bordered)
        return
    lines = [("", list(columns))] + [row for section in _rows(runs) for row in section]
    lines = [(label, [cell.replace("\n", "\\n") for cell in cells]) for label, cells in lines]
    first = max(len(label) for label, _ in lines)
    widths = [max(len(cells[i]) for _, cells in lines) for i in range(len(columns))]
    console.print(title, soft_wrap=True)
    for label, cells in lines:
        text = Text(
            "  ".join(
                [label.ljust(first), *(c.ljust(w) for c, w in zip(cells, widths, strict=True))]
            ).rstrip()
        )
        if console.is_terminal:
            text.truncate(console.width, overflow="ellipsis")
        console.print(text, soft_wrap=True)


def write_timeline(
    path: str | None,
    m: Measured,
    title: str,
    baseline: Measured | None = None,
    *,
    equal: bool | None = None,
) -> None:
    """Write ``m``'s timeline to ``path`` (nothing when None); with ``baseline`` its lane
    too, and the headline (the two wall times, the speed-up, whether the results are
    ``equal``)."""
    if path is None:
        return
    timeline = m.result.timeline
    if timeline is None:
        raise CliError("this run has no timeline")
    compare = (
        None if baseline is None else Comparison(baseline.stream_seconds, baseline.wall_seconds)
    )
    story = (
        ""
        if baseline is None or equal is None
        else headline(baseline.wall_seconds, m.wall_seconds, equal)
    )
    try:
        Path(path).write_text(
            render_svg(timeline, title=title, compare=compare, headline=story), encoding="utf-8"
        )
    except OSError as exc:
        raise CliError(f"cannot write timeline {path}: {exc.strerror or exc}") from None


def run_json(m: Measured) -> dict[str, object]:
    return {"result": m.result.to_json(), "timings": m.timings()}


def print_json(payload: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
