"""The timeline picture: every label inside it, a legend for every colour, the markers."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pysolate._timeline import Comparison, TimelineRecorder, render_svg, text_width

SVG = "{http://www.w3.org/2000/svg}"


def _timeline(end: float = 2.0):
    rec = TimelineRecorder()
    rec.bar("stream", "tokens", 0.0, 1.5, "stream")
    rec.mark("stream", "3 statements", 0.4, "snapshot")
    rec.mark("stream", "sealed", 1.5, "seal")
    rec.bar("speculative", "docs.search_everything_with_a_long_name", 0.5, 1.99, "claimed")
    rec.bar("speculative", "docs.search", 0.0, 0.01, "orphaned")
    rec.bar("guest", "sealed program", 1.5, end, "guest")
    rec.bar("guest", "workspace.write_text_at_the_very_end", 1.9, end, "formal")
    rec.bar("claims", "docs.search_everything_with_a_long_name", 1.51, 1.99, "claim")
    return rec.freeze(end)


def _boxes(svg: str):
    root = ET.fromstring(svg)
    width = float(root.get("width"))
    height = float(root.get("height"))
    for text in root.iter(f"{SVG}text"):
        size = float(text.get("font-size"))
        w = text_width(text.text or "", size)
        x = float(text.get("x"))
        x0 = {"start": x, "middle": x - w / 2, "end": x - w}[text.get("text-anchor", "start")]
        y = float(text.get("y"))
        yield text.text, (x0, y - size, x0 + w, y), (width, height)


@pytest.mark.parametrize("compare", [None, Comparison(stream_seconds=1.5, wall_seconds=3.7)])
@pytest.mark.parametrize("width", [480, 960])
def test_every_label_box_is_inside_the_picture(compare, width):
    svg = render_svg(_timeline(), title="run", width=width, compare=compare)
    boxes = list(_boxes(svg))
    assert len(boxes) > 10
    for label, (x0, y0, x1, y1), (w, h) in boxes:
        assert x0 >= 0 and x1 <= w, f"{label!r} clipped horizontally: {x0:.0f}..{x1:.0f} of {w:.0f}"
        assert y0 >= 0 and y1 <= h, f"{label!r} clipped vertically"


def test_the_legend_names_every_colour_used():
    root = ET.fromstring(render_svg(_timeline(), compare=Comparison(1.5, 3.7)))
    legend = {r.get("class").split()[1] for r in root.iter(f"{SVG}rect") if r.get("class", "").startswith("legend")}
    used = {r.get("class").split()[1] for r in root.iter(f"{SVG}rect") if r.get("class", "").startswith("bar")}
    assert used <= legend
    assert {"last-token", "seal", "done", "sequential"} <= legend


def test_markers_for_the_last_token_the_seal_and_the_result_span_every_lane():
    root = ET.fromstring(render_svg(_timeline(), compare=Comparison(1.5, 3.7)))
    markers = {m.get("class").split()[1]: m for m in root.iter(f"{SVG}line") if m.get("class", "").startswith("marker")}
    assert set(markers) == {"last-token", "seal", "done"}
    lanes = [g for g in root.iter(f"{SVG}g") if g.get("class") == "lane"]
    assert [g.get("id") for g in lanes] == ["lane-compare", "lane-stream", "lane-speculative", "lane-guest", "lane-claims"]
    bottom = max(float(g.find(f"{SVG}rect").get("y")) + float(g.find(f"{SVG}rect").get("height")) for g in lanes)
    for line in markers.values():
        assert float(line.get("y2")) >= bottom - 6


def test_the_comparison_lane_shares_the_time_axis():
    """The usual way ends later than Pysolate here: the axis reaches its end."""
    root = ET.fromstring(render_svg(_timeline(end=2.0), compare=Comparison(1.5, 3.7), width=960))
    sequential = next(r for r in root.iter(f"{SVG}rect") if r.get("class") == "bar sequential")
    assert float(sequential.get("x")) + float(sequential.get("width")) <= 960 - 20 + 0.5
    ticks = [t.text for t in root.iter(f"{SVG}text") if (t.text or "").endswith("s") and t.text[:-1].replace(".", "").isdigit()]
    assert "3.5s" in ticks
