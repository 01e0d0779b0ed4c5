"""A run's picture: what happened when, on four lanes, as data and as an SVG.

Lanes: ``stream`` (tokens arriving; accepted snapshots and the seal as marks), ``speculative``
(early physical calls, coloured by disposition), ``guest`` (the sealed program running, and
the formal calls it made itself), ``claims`` (each Guest call served by early work: how long
it waited). Times are seconds since the run started. Hand-written SVG: the picture is a few
dozen rectangles, not worth a plotting dependency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Literal

LaneName = Literal["stream", "speculative", "guest", "claims"]
LANES: tuple[LaneName, ...] = ("stream", "speculative", "guest", "claims")

_COLOURS = {
    "stream": "#9db4d3",
    "snapshot": "#3d6fb6",
    "seal": "#1b3a66",
    "claimed": "#3a9d5d",
    "orphaned": "#d9a441",
    "cancelled": "#b0b0b0",
    "late": "#c65b4a",
    "guest": "#7d6bb3",
    "formal": "#4b3d80",
    "claim": "#3a9d5d",
}


@dataclass(frozen=True, slots=True)
class Bar:
    """One interval on a lane; ``kind`` picks its colour (a disposition, ``formal`` ...)."""

    lane: LaneName
    label: str
    start: float
    end: float
    kind: str


@dataclass(frozen=True, slots=True)
class Mark:
    """One instant on a lane (a snapshot accepted, the seal)."""

    lane: LaneName
    label: str
    at: float
    kind: str


@dataclass(frozen=True, slots=True)
class Timeline:
    bars: tuple[Bar, ...] = ()
    marks: tuple[Mark, ...] = ()
    end: float = 0.0

    def lane(self, name: LaneName) -> tuple[Bar, ...]:
        return tuple(b for b in self.bars if b.lane == name)


@dataclass(slots=True)
class TimelineRecorder:
    """Collects bars and marks during a run; ``freeze`` gives the immutable ``Timeline``."""

    bars: list[Bar] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)

    def bar(self, lane: LaneName, label: str, start: float, end: float, kind: str) -> None:
        self.bars.append(Bar(lane, label, start, max(start, end), kind))

    def mark(self, lane: LaneName, label: str, at: float, kind: str) -> None:
        self.marks.append(Mark(lane, label, at, kind))

    def freeze(self, end: float) -> Timeline:
        return Timeline(tuple(self.bars), tuple(self.marks), end)


def render_svg(timeline: Timeline, *, title: str = "", width: int = 960) -> str:
    """The timeline as a standalone SVG document (one row per bar within its lane)."""
    left, right, row_h, pad = 110, 20, 14, 10
    span = max(timeline.end, 1e-9)
    scale = (width - left - right) / span

    def x(t: float) -> float:
        return left + max(0.0, t) * scale

    parts: list[str] = []
    y = 40
    for lane in LANES:
        bars = timeline.lane(lane)
        rows = max(1, len(bars)) if lane != "stream" else 1
        height = rows * row_h + 2 * pad
        parts.append(f'<g class="lane" id="lane-{lane}">')
        parts.append(f'<rect x="0" y="{y}" width="{width}" height="{height}" fill="#f6f6f6" stroke="#ddd"/>')
        parts.append(f'<text x="8" y="{y + height / 2 + 4}" font-size="12">{lane}</text>')
        for i, bar in enumerate(bars):
            row = 0 if lane == "stream" else i
            by = y + pad + row * row_h
            w = max(1.0, (bar.end - bar.start) * scale)
            colour = _COLOURS.get(bar.kind, "#888")
            parts.append(
                f'<rect class="bar {escape(bar.kind)}" x="{x(bar.start):.1f}" y="{by}" width="{w:.1f}" '
                f'height="{row_h - 3}" fill="{colour}"><title>{escape(bar.label)} '
                f"{bar.start:.3f}-{bar.end:.3f}s ({escape(bar.kind)})</title></rect>"
            )
            if lane != "stream":
                parts.append(
                    f'<text x="{x(bar.end) + 3:.1f}" y="{by + row_h - 4}" font-size="9">{escape(bar.label)}</text>'
                )
        for mark in (m for m in timeline.marks if m.lane == lane):
            colour = _COLOURS.get(mark.kind, "#444")
            parts.append(
                f'<line class="mark {escape(mark.kind)}" x1="{x(mark.at):.1f}" y1="{y + 2}" x2="{x(mark.at):.1f}" '
                f'y2="{y + height - 2}" stroke="{colour}" stroke-width="1.5"><title>{escape(mark.label)} '
                f"{mark.at:.3f}s</title></line>"
            )
        parts.append("</g>")
        y += height + 6
    # time axis
    ticks = _ticks(span)
    for t in ticks:
        parts.append(f'<line x1="{x(t):.1f}" y1="{y}" x2="{x(t):.1f}" y2="{y + 5}" stroke="#333"/>')
        parts.append(f'<text x="{x(t):.1f}" y="{y + 17}" font-size="10" text-anchor="middle">{t:g}s</text>')
    height = y + 30
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">'
        f'<text x="8" y="22" font-size="14" font-weight="bold">{escape(title)}</text>'
    )
    return head + "".join(parts) + "</svg>\n"


def _ticks(span: float) -> list[float]:
    for step in (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0):
        if span / step <= 12:
            break
    n = int(span / step) + 1
    return [round(i * step, 6) for i in range(n + 1) if i * step <= span * 1.0001]
