"""What the CLI prints and writes: the outcome and report table, JSON, the timeline picture."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from .._result import RunResult
from .._timeline import Comparison, render_svg
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


def table(title: str, columns: Sequence[str], runs: Sequence[Measured]) -> Table:
    """Outcome rows, a rule, then report rows; one column per run."""
    table = Table(title=title, title_justify="left")
    table.add_column("")
    for name in columns:
        table.add_column(name, overflow="fold")
    for section in ([_outcome_rows(m.result) for m in runs], [_report_rows(m) for m in runs]):
        last = len(section[0]) - 1
        for i, (label, _) in enumerate(section[0]):
            table.add_row(label, *(rows[i][1] for rows in section), end_section=i == last)
    return table


def write_timeline(path: str | None, m: Measured, title: str, baseline: Measured | None = None) -> None:
    if path is None:
        return
    timeline = m.result.timeline
    if timeline is None:
        raise CliError("this run has no timeline")
    compare = None if baseline is None else Comparison(baseline.stream_seconds, baseline.wall_seconds)
    try:
        Path(path).write_text(render_svg(timeline, title=title, compare=compare), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write timeline {path}: {exc.strerror or exc}") from None


def run_json(m: Measured) -> dict[str, object]:
    return {"result": m.result.to_json(), "timings": m.timings()}


def print_json(payload: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
