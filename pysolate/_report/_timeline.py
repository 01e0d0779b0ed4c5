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
    "prose": "#dbe5f1",
    "stream": "#9db4d3",
    "snapshot": "#3d6fb6",
    "seal": "#1b3a66",
    "claimed": "#3a9d5d",
    "orphaned": "#d9a441",
    "cancelled": "#c9c9c9",
    "late": "#c65b4a",
    "discarded": "#8c564b",
    "guest": "#9c8fd0",
    "formal": "#4b3d80",
    "claim": "#17a2b8",
    "shared": "#2f7f7a",
    "last-token": "#e8590c",
    "sequential": "#6f6f6f",
    "done": "#222222",
}
"""One colour per legend entry (``tests/pysolate/test_timeline.py`` checks they differ)."""


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
    """A finished run's picture as data (``RunResult.timeline``); ``render_svg`` draws it."""

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
    "prose": "reply before the code",
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
    "shared": "served by another run's call",
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


ASCENT, DESCENT = 0.8, 0.25
"""A label's box above and below its baseline, as shares of its font size."""

TICK_PIXELS = 3.0
"""Bars narrower than this (a claim that did not wait, a cancelled call) are drawn as a tick
of this width, taller than a bar, so an instant is visible."""


TIMES = "\u00d7"
"""The multiplication sign of the headline's "1.5 times faster"."""


@dataclass(frozen=True, slots=True)
class Box:
    """An axis-aligned box in picture coordinates."""

    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: Box) -> bool:
        return (
            self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1
        )


def text_box(x: float, y: float, label: str, size: float, anchor: str = "start") -> Box:
    """The estimated box of ``label`` drawn at ``(x, y)`` (its baseline) with ``anchor``."""
    w = text_width(label, size)
    x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
    return Box(x0, y - ASCENT * size, x0 + w, y + DESCENT * size)


def headline(baseline_seconds: float, seconds: float, equal: bool) -> str:
    """The picture's one-line story, "10.5 s → 7.0 s, 1.5 times faster, results identical"
    (written with the multiplication sign), from the usual way's and Pysolate's wall times."""
    ratio = baseline_seconds / seconds if seconds > 0 else float("inf")
    pace = f"{ratio:.1f}{TIMES} faster" if ratio >= 1 else f"{1 / ratio:.1f}{TIMES} slower"
    return f"{baseline_seconds:.1f} s → {seconds:.1f} s, {pace}, results {'identical' if equal else 'differ'}"


@dataclass(slots=True)
class _Canvas:
    """The SVG parts written so far, and the picture's width labels must stay inside."""

    width: int
    parts: list[str] = field(default_factory=list)

    def text(
        self,
        x: float,
        y: float,
        label: str,
        size: float,
        *,
        anchor: str = "start",
        bold: bool = False,
    ) -> None:
        weight = ' font-weight="bold"' if bold else ""
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}"{weight}>{escape(label)}</text>'
        )

    def bar(
        self, kind: str, x0: float, x1: float, y: float, h: float, title: str
    ) -> tuple[float, float]:
        """A bar from ``x0`` to ``x1`` (a tick when too narrow to see); its drawn extent."""
        fill = _COLOURS.get(kind, "#888")
        if x1 - x0 < TICK_PIXELS:
            mid = (x0 + x1) / 2
            x0, x1, y, h, kind = (
                mid - TICK_PIXELS / 2,
                mid + TICK_PIXELS / 2,
                y - 2,
                h + 3,
                f"{kind} tick",
            )
        self.parts.append(
            f'<rect class="bar {escape(kind)}" x="{x0:.1f}" y="{y:.1f}" width="{x1 - x0:.1f}" height="{h:.1f}" '
            f'fill="{fill}"><title>{escape(title)}</title></rect>'
        )
        return x0, x1


@dataclass(slots=True)
class _Labels:
    """Where a bar's label may go in its row: right of it, else just right of the first
    line past it that leaves room, else left of it, else in the label column right of the
    time axis (where no bar or line is), shortened to fit. ``lines`` are the x of the
    vertical lines crossing every lane."""

    canvas: _Canvas
    left: float
    column: float
    pad: float
    size: float
    lines: list[float]

    def place(
        self, label: str, x0: float, x1: float, y: float, others: list[tuple[float, float]]
    ) -> None:
        w = text_width(label, self.size)
        past = sorted(at + 3 for at in self.lines if at > x1)
        for start in (x1 + 3, *past, x0 - 3 - w):
            if (
                start >= self.left
                and start + w <= self.canvas.width - self.pad
                and self._free(start, start + w, others)
            ):
                self.canvas.text(start, y, label, self.size)
                return
        room = self.canvas.width - self.pad - self.column
        while label and text_width(label, self.size) > room:
            label = label[:-2] + "…"
        self.canvas.text(self.column, y, label, self.size)

    def _free(self, x0: float, x1: float, others: list[tuple[float, float]]) -> bool:
        if any(x0 - 1 <= at <= x1 + 1 for at in self.lines):
            return False
        return not any(a < x1 + 1 and x0 - 1 < b for a, b in others)


def render_svg(
    timeline: Timeline,
    *,
    title: str = "",
    width: int = 960,
    compare: Comparison | None = None,
    headline: str = "",
) -> str:
    """The timeline as a standalone SVG document (one row per bar within its lane).

    ``compare`` adds a lane for the usual way (stream, then run) on the same time axis, from
    the same origin: each run's first moment is 0, and the Pysolate stream lane draws the
    reply before the code too. Vertical markers show the last token, the seal and the
    result across every lane, their captions above the lanes; ``headline`` (see
    ``headline()``) is printed under the title. A legend names every colour used, each its
    own. Every label sits inside the picture and on no bar or line (``text_box``).
    """
    pad, row_h, label_size, name_size = 10, 14, 9, 12
    names = [("pysolate " + lane if compare is not None else lane) for lane in LANES] + (
        [compare.label] if compare else []
    )
    left = 8 + max(text_width(n, name_size) for n in names) + 10
    labels = [b.label for b in timeline.bars if b.lane != "stream"] + (
        [f"done at {compare.wall_seconds:.2f}s"] if compare else []
    )
    column = min(max((text_width(t, label_size) for t in labels), default=0.0) + 6, 0.3 * width)
    plot_right = width - pad - column
    end = max(timeline.end, compare.wall_seconds if compare else 0.0, 1e-9)
    scale = (plot_right - left) / end

    def x(t: float) -> float:
        return left + max(0.0, t) * scale

    canvas = _Canvas(width)
    canvas.text(8, 22, title, 14, bold=True)
    y = 30.0
    if headline:
        canvas.text(8, y + 14, headline, 12, bold=True)
        y += 20
    stream = timeline.lane("stream")
    last_token = max((b.end for b in stream), default=None)
    seal = next((m.at for m in timeline.marks if m.kind == "seal"), None)
    markers = sorted(
        (t, name)
        for t, name in ((last_token, "last-token"), (seal, "seal"), (timeline.end, "done"))
        if t is not None
    )
    for row, (at, kind) in enumerate(markers):  # one caption row each, above every line
        caption = f"{_KIND_NAMES[kind]} {at:.2f}s"
        w = text_width(caption, 10)
        canvas.text(min(max(x(at) - w / 2, pad), width - pad - w), y + 12 + 14 * row, caption, 10)
    y += 14 * len(markers) + 8
    lines_top = y
    place = _Labels(canvas, left, plot_right + 6, pad, label_size, [x(at) for at, _ in markers])
    used: dict[str, None] = {}
    if compare is not None:
        height = row_h + 2 * pad
        canvas.parts.append(
            f'<g class="lane" id="lane-compare"><rect x="0" y="{y}" width="{width}" height="{height}" fill="#eeeeee" stroke="#ddd"/>'
        )
        canvas.text(8, y + height / 2 + 4, compare.label, name_size)
        drawn = []
        for start, stop, kind, what in (
            (0.0, compare.stream_seconds, "stream", "tokens"),
            (compare.stream_seconds, compare.wall_seconds, "sequential", "program"),
        ):
            used[kind] = None
            drawn.append(
                canvas.bar(
                    kind, x(start), x(stop), y + pad, row_h - 3, f"{what} {start:.3f}-{stop:.3f}s"
                )
            )
        place.place(
            f"done at {compare.wall_seconds:.2f}s",
            drawn[-1][0],
            drawn[-1][1],
            y + pad + row_h - 4,
            drawn,
        )
        canvas.parts.append("</g>")
        y += height + 6
    for lane, name in zip(LANES, names, strict=False):
        bars = timeline.lane(lane)
        if lane == "stream" and bars and bars[0].start > 0:  # what came before the code
            bars = (
                Bar("stream", "reply before the code", 0.0, min(b.start for b in bars), "prose"),
                *bars,
            )
        rows = 1 if lane == "stream" else max(1, len(bars))
        height = rows * row_h + 2 * pad
        canvas.parts.append(f'<g class="lane" id="lane-{lane}">')
        canvas.parts.append(
            f'<rect x="0" y="{y}" width="{width}" height="{height}" fill="#f6f6f6" stroke="#ddd"/>'
        )
        canvas.text(8, y + height / 2 + 4, name, name_size)
        for i, bar in enumerate(bars):
            used[bar.kind] = None
            by = y + pad + (0 if lane == "stream" else i) * row_h
            title_text = f"{bar.label} {bar.start:.3f}-{bar.end:.3f}s ({bar.kind})"
            x0, x1 = canvas.bar(bar.kind, x(bar.start), x(bar.end), by, row_h - 3, title_text)
            if lane != "stream":
                place.place(bar.label, x0, x1, by + row_h - 4, [(x0, x1)])
        for mark in (m for m in timeline.marks if m.lane == lane and m.kind != "seal"):
            used[mark.kind] = None
            canvas.parts.append(
                f'<line class="mark {escape(mark.kind)}" x1="{x(mark.at):.1f}" y1="{y + 2}" x2="{x(mark.at):.1f}" '
                f'y2="{y + height - 2}" stroke="{_COLOURS.get(mark.kind, "#444")}" stroke-width="1.5"><title>{escape(mark.label)} '
                f"{mark.at:.3f}s</title></line>"
            )
        canvas.parts.append("</g>")
        y += height + 6
    for at, kind in markers:
        used[kind] = None
        canvas.parts.append(
            f'<line class="marker {kind}" x1="{x(at):.1f}" y1="{lines_top:.1f}" x2="{x(at):.1f}" y2="{y - 6}" '
            f'stroke="{_COLOURS[kind]}" stroke-width="1.2" stroke-dasharray="4 3"/>'
        )
    for t in _ticks(end, plot_right - left):
        canvas.parts.append(
            f'<line class="tick" x1="{x(t):.1f}" y1="{y}" x2="{x(t):.1f}" y2="{y + 5}" stroke="#333"/>'
        )
        tick = f"{t:g}s"
        w = text_width(tick, 10)
        canvas.text(
            min(max(x(t), pad + w / 2), width - pad - w / 2), y + 17, tick, 10, anchor="middle"
        )
    bottom = _legend(canvas, [k for k in _KIND_NAMES if k in used], y + 36, pad) + 8
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
        canvas.parts.append(
            f'<rect class="legend {kind}" x="{x:.1f}" y="{y - swatch + 1}" width="{swatch}" height="{swatch}" fill="{_COLOURS[kind]}"/>'
        )
        canvas.text(x + swatch + 4, y, words, size)
        x += item + gap
    return y + 6


def _ticks(span: float, pixels: float) -> list[float]:
    """Axis ticks: the finest step of at most 12 ticks whose labels do not touch."""
    step = 60.0
    for step in (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0):
        if span / step <= 12 and step / span * pixels >= text_width(f"{span:g}s", 10) + 10:
            break
    n = int(span / step) + 1
    return [round(i * step, 6) for i in range(n + 1) if i * step <= span * 1.0001]
