"""A run's picture: what happened when, on four lanes, as data and as an SVG.

Lanes: ``stream`` (tokens arriving; accepted snapshots as marks), ``speculative``
(early physical calls, coloured by disposition), ``guest`` (the sealed program running, and
the formal calls it made itself), ``claims`` (each Guest call served by early work: how long
it waited). Times are seconds since the run started. The last token and the seal are markers
across every lane; an optional comparison lane shows the same stream run the usual way.
Hand-written SVG: the picture is a few dozen rectangles, not worth a plotting dependency.
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
    "discarded": "#8c564b",
    "guest": "#7d6bb3",
    "formal": "#4b3d80",
    "claim": "#3a9d5d",
    "last-token": "#c0392b",
    "sequential": "#8e8e8e",
    "done": "#222222",
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


@dataclass(frozen=True, slots=True)
class Comparison:
    """The same stream run the usual way, drawn as one more lane: tokens, then the program."""

    stream_seconds: float
    wall_seconds: float
    label: str = "stream, then run"


_KIND_NAMES = {
    "stream": "tokens arriving",
    "snapshot": "statements accepted",
    "seal": "sealed",
    "last-token": "last token",
    "claimed": "early call, claimed",
    "orphaned": "early call, never claimed",
    "cancelled": "early call, cancelled",
    "late": "early call, finished late",
    "discarded": "early call on a dropped branch layer",
    "guest": "sealed program running",
    "formal": "call run by the program",
    "claim": "program call served early (its wait)",
    "sequential": "program run after the stream",
    "done": "result",
}
"""What each colour means, in the legend's words."""

FONT_WIDTH = 0.6
"""Average glyph width of the sans-serif font as a share of its size: the estimate every
label's box is computed with, so labels can be kept inside the picture."""


def text_width(text: str, size: float) -> float:
    """Estimated width in pixels of ``text`` at font ``size``."""
    return len(text) * size * FONT_WIDTH


@dataclass(slots=True)
class _Canvas:
    """The SVG parts written so far, and the picture's width labels must stay inside."""

    width: int
    parts: list[str] = field(default_factory=list)

    def text(self, x: float, y: float, label: str, size: float, *, anchor: str = "start", bold: bool = False) -> None:
        weight = ' font-weight="bold"' if bold else ""
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}"{weight}>{escape(label)}</text>'
        )

    def label_after(self, start: float, end: float, y: float, label: str, size: float, pad: float) -> None:
        """A bar's label right of it, or left of it, or against the right edge: never clipped."""
        w = text_width(label, size)
        if end + 3 + w <= self.width - pad:
            self.text(end + 3, y, label, size)
        elif start - 3 - w >= pad:
            self.text(start - 3, y, label, size, anchor="end")
        else:
            self.text(self.width - pad, y, label, size, anchor="end")


def render_svg(
    timeline: Timeline,
    *,
    title: str = "",
    width: int = 960,
    compare: Comparison | None = None,
) -> str:
    """The timeline as a standalone SVG document (one row per bar within its lane).

    ``compare`` adds a lane for the usual way (stream, then run) on the same time axis.
    Vertical markers show the last token and the seal across every lane; a legend names
    every colour used. Every label is placed inside the picture (see ``text_width``).
    """
    left, right, row_h, pad, label_size = 130, 20, 14, 10, 9
    end = max(timeline.end, compare.wall_seconds if compare else 0.0, 1e-9)
    scale = (width - left - right) / end

    def x(t: float) -> float:
        return left + max(0.0, t) * scale

    canvas = _Canvas(width)
    canvas.text(8, 22, title, 14, bold=True)
    last_token = max((b.end for b in timeline.bars if b.lane == "stream"), default=None)
    seal = next((m.at for m in timeline.marks if m.kind == "seal"), None)
    markers = [
        (t, name) for t, name in ((last_token, "last-token"), (seal, "seal"), (timeline.end, "done")) if t is not None
    ]
    top = 40 + 14 * len(markers)  # one row of marker captions each, so they never overlap
    y = top
    used: dict[str, None] = {}
    if compare is not None:
        height = row_h + 2 * pad
        canvas.parts.append(f'<g class="lane" id="lane-compare"><rect x="0" y="{y}" width="{width}" height="{height}" fill="#eeeeee" stroke="#ddd"/>')
        canvas.text(8, y + height / 2 + 4, compare.label, 12)
        for start, stop, kind, label in (
            (0.0, compare.stream_seconds, "stream", "tokens"),
            (compare.stream_seconds, compare.wall_seconds, "sequential", "program"),
        ):
            used[kind] = None
            canvas.parts.append(
                f'<rect class="bar {kind}" x="{x(start):.1f}" y="{y + pad}" width="{max(1.0, (stop - start) * scale):.1f}" '
                f'height="{row_h - 3}" fill="{_COLOURS[kind]}"><title>{label} {start:.3f}-{stop:.3f}s</title></rect>'
            )
        canvas.label_after(x(compare.stream_seconds), x(compare.wall_seconds), y + pad + row_h - 4, f"done at {compare.wall_seconds:.2f}s", label_size, pad)
        canvas.parts.append("</g>")
        y += height + 6
    for lane in LANES:
        bars = timeline.lane(lane)
        rows = max(1, len(bars)) if lane != "stream" else 1
        height = rows * row_h + 2 * pad
        canvas.parts.append(f'<g class="lane" id="lane-{lane}">')
        canvas.parts.append(f'<rect x="0" y="{y}" width="{width}" height="{height}" fill="#f6f6f6" stroke="#ddd"/>')
        canvas.text(8, y + height / 2 + 4, "pysolate " + lane if compare is not None else lane, 12)
        for i, bar in enumerate(bars):
            used[bar.kind] = None
            by = y + pad + (0 if lane == "stream" else i) * row_h
            w = max(1.0, (bar.end - bar.start) * scale)
            canvas.parts.append(
                f'<rect class="bar {escape(bar.kind)}" x="{x(bar.start):.1f}" y="{by}" width="{w:.1f}" '
                f'height="{row_h - 3}" fill="{_COLOURS.get(bar.kind, "#888")}"><title>{escape(bar.label)} '
                f"{bar.start:.3f}-{bar.end:.3f}s ({escape(bar.kind)})</title></rect>"
            )
            if lane != "stream":
                canvas.label_after(x(bar.start), x(bar.start) + w, by + row_h - 4, bar.label, label_size, pad)
        for mark in (m for m in timeline.marks if m.lane == lane and m.kind != "seal"):
            used[mark.kind] = None
            canvas.parts.append(
                f'<line class="mark {escape(mark.kind)}" x1="{x(mark.at):.1f}" y1="{y + 2}" x2="{x(mark.at):.1f}" '
                f'y2="{y + height - 2}" stroke="{_COLOURS.get(mark.kind, "#444")}" stroke-width="1.5"><title>{escape(mark.label)} '
                f"{mark.at:.3f}s</title></line>"
            )
        canvas.parts.append("</g>")
        y += height + 6
    for row, (at, kind) in enumerate(markers):
        used[kind] = None
        caption = f"{_KIND_NAMES[kind]} {at:.2f}s"
        canvas.parts.append(
            f'<line class="marker {kind}" x1="{x(at):.1f}" y1="{40 + 14 * row - 2}" x2="{x(at):.1f}" y2="{y - 6}" '
            f'stroke="{_COLOURS[kind]}" stroke-width="1.2" stroke-dasharray="4 3"/>'
        )
        caption_x = min(max(x(at) - text_width(caption, 10) / 2, pad), width - pad - text_width(caption, 10))
        canvas.text(caption_x, 40 + 14 * row - 4, caption, 10)
    for t in _ticks(end):
        canvas.parts.append(f'<line x1="{x(t):.1f}" y1="{y}" x2="{x(t):.1f}" y2="{y + 5}" stroke="#333"/>')
        tick = f"{t:g}s"
        tick_x = min(x(t), width - pad - text_width(tick, 10) / 2)
        canvas.text(tick_x, y + 17, tick, 10, anchor="middle")
    bottom = _legend(canvas, [k for k in _KIND_NAMES if k in used], y + 34, pad) + 8
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{bottom:.0f}" '
        f'viewBox="0 0 {width} {bottom:.0f}" font-family="sans-serif">'
    )
    return head + "".join(canvas.parts) + "</svg>\n"


def _legend(canvas: _Canvas, kinds: list[str], y: float, pad: float) -> float:
    """Swatches with their meaning, wrapped to the picture's width; the y below them."""
    size, swatch, gap = 10, 10, 16
    x: float = pad
    for kind in kinds:
        words = _KIND_NAMES[kind]
        item = swatch + 4 + text_width(words, size)
        if x + item > canvas.width - pad and x > pad:
            x, y = pad, y + 16
        canvas.parts.append(f'<rect class="legend {kind}" x="{x:.1f}" y="{y - swatch + 1}" width="{swatch}" height="{swatch}" fill="{_COLOURS[kind]}"/>')
        canvas.text(x + swatch + 4, y, words, size)
        x += item + gap
    return y + 6


def _ticks(span: float) -> list[float]:
    for step in (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0):
        if span / step <= 12:
            break
    n = int(span / step) + 1
    return [round(i * step, 6) for i in range(n + 1) if i * step <= span * 1.0001]
