"""The timeline picture: every label inside it and on nothing else, one colour per legend
entry, the markers, instants as ticks, one time origin, the headline."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pysolate._report._timeline import (
    TICK_PIXELS,
    Box,
    Comparison,
    Timeline,
    TimelineRecorder,
    headline,
    render_svg,
    text_width,
)

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
    legend = {
        r.get("class").split()[1]
        for r in root.iter(f"{SVG}rect")
        if r.get("class", "").startswith("legend")
    }
    used = {
        r.get("class").split()[1]
        for r in root.iter(f"{SVG}rect")
        if r.get("class", "").startswith("bar")
    }
    assert used <= legend
    assert {"last-token", "seal", "done", "sequential"} <= legend


def test_markers_for_the_last_token_the_seal_and_the_result_span_every_lane():
    root = ET.fromstring(render_svg(_timeline(), compare=Comparison(1.5, 3.7)))
    markers = {
        m.get("class").split()[1]: m
        for m in root.iter(f"{SVG}line")
        if m.get("class", "").startswith("marker")
    }
    assert set(markers) == {"last-token", "seal", "done"}
    lanes = [g for g in root.iter(f"{SVG}g") if g.get("class") == "lane"]
    assert [g.get("id") for g in lanes] == [
        "lane-compare",
        "lane-stream",
        "lane-speculative",
        "lane-guest",
        "lane-claims",
    ]
    bottom = max(
        float(g.find(f"{SVG}rect").get("y")) + float(g.find(f"{SVG}rect").get("height"))
        for g in lanes
    )
    for line in markers.values():
        assert float(line.get("y2")) >= bottom - 6


def test_the_comparison_lane_shares_the_time_axis():
    """The usual way ends later than Pysolate here: the axis reaches its end."""
    root = ET.fromstring(render_svg(_timeline(end=2.0), compare=Comparison(1.5, 3.7), width=960))
    sequential = next(r for r in root.iter(f"{SVG}rect") if r.get("class") == "bar sequential")
    assert float(sequential.get("x")) + float(sequential.get("width")) <= 960 - 20 + 0.5
    ticks = [
        t.text
        for t in root.iter(f"{SVG}text")
        if (t.text or "").endswith("s") and t.text[:-1].replace(".", "").isdigit()
    ]
    assert "3.5s" in ticks


def _demo_like(end: float = 7.0) -> Timeline:
    """What the demo draws: prose before the code, many early reads in a burst, the last
    token, the seal and the result close together, and Guest calls and claims that take no
    time at all (zero-width bars)."""
    rec = TimelineRecorder()
    rec.bar("stream", "tokens", 0.8, end - 0.01, "stream")
    for i in range(12):
        rec.mark("stream", f"{i + 1} statements", 1.0 + i * 0.45, "snapshot")
    rec.mark("stream", "sealed", end - 0.01, "seal")
    names = (
        ["workspace.list_dir"]
        + ["workspace.read_text"] * 4
        + ["docs.search"] * 4
        + ["people.lookup_owner"] * 4
    )
    for i, name in enumerate(names):
        rec.bar("speculative", name, 1.0 + 0.2 * i, 1.3 + 0.2 * i, "claimed")
    rec.bar("speculative", "docs.search", end - 0.2, end - 0.2, "cancelled")
    rec.bar("guest", "sealed program", end - 0.01, end, "guest")
    rec.bar("guest", "clock.today", end - 0.005, end - 0.005, "formal")
    rec.bar("guest", "workspace.write_text", end - 0.004, end - 0.002, "formal")
    for name in names:
        rec.bar("claims", name, end - 0.008, end - 0.008, "claim")
    return rec.freeze(end)


def _shapes(svg: str) -> tuple[list[tuple[str, Box]], list[tuple[str, Box]], tuple[float, float]]:
    """The labels' boxes (from font size and text length), and every bar's and line's box."""
    root = ET.fromstring(svg)
    texts = []
    for text in root.iter(f"{SVG}text"):
        label, size = text.text or "", float(text.get("font-size"))
        w = len(label) * size * 0.6
        x = float(text.get("x"))
        x0 = {"start": x, "middle": x - w / 2, "end": x - w}[text.get("text-anchor", "start")]
        y = float(text.get("y"))
        texts.append((label, Box(x0, y - 0.8 * size, x0 + w, y + 0.25 * size)))
    drawn = []
    for rect in root.iter(f"{SVG}rect"):
        if rect.get("class", "").startswith("bar"):
            x, y = float(rect.get("x")), float(rect.get("y"))
            drawn.append(
                (
                    rect.get("class"),
                    Box(x, y, x + float(rect.get("width")), y + float(rect.get("height"))),
                )
            )
    for line in root.iter(f"{SVG}line"):
        x1, x2 = sorted((float(line.get("x1")), float(line.get("x2"))))
        y1, y2 = sorted((float(line.get("y1")), float(line.get("y2"))))
        drawn.append((line.get("class", "line"), Box(x1 - 0.75, y1, x2 + 0.75, y2)))
    return texts, drawn, (float(root.get("width")), float(root.get("height")))


@pytest.mark.parametrize("timeline", [_timeline(), _demo_like()], ids=["small", "demo-like"])
@pytest.mark.parametrize("compare", [None, Comparison(stream_seconds=7.3, wall_seconds=10.53)])
@pytest.mark.parametrize("width", [480, 960])
def test_no_label_overlaps_a_bar_a_line_or_another_label(
    timeline: Timeline, compare: Comparison | None, width: int
) -> None:
    svg = render_svg(
        timeline,
        title="pysolate demo",
        width=width,
        compare=compare,
        headline=headline(10.53, 7.0, True),
    )
    texts, drawn, (w, h) = _shapes(svg)
    for label, box in texts:
        assert box.x0 >= 0 and box.x1 <= w and box.y0 >= 0 and box.y1 <= h, f"{label!r} is clipped"
        hit = [kind for kind, shape in drawn if box.overlaps(shape)]
        assert hit == [], f"{label!r} is drawn over {hit}"
    for i, (a, box) in enumerate(texts):
        for b, other in texts[i + 1 :]:
            assert not box.overlaps(other), f"{a!r} overlaps {b!r}"


def test_every_legend_entry_has_its_own_colour() -> None:
    root = ET.fromstring(render_svg(_demo_like(), compare=Comparison(7.3, 10.53)))
    fills = [
        r.get("fill") for r in root.iter(f"{SVG}rect") if r.get("class", "").startswith("legend")
    ]
    assert len(fills) >= 10 and len(set(fills)) == len(fills)


def test_instants_are_drawn_as_visible_ticks() -> None:
    """A claim that did not wait and a call that took no time still show: ticks at least
    ``TICK_PIXELS`` wide, taller than a bar."""
    root = ET.fromstring(render_svg(_demo_like()))
    ticks = [r for r in root.iter(f"{SVG}rect") if r.get("class", "").endswith(" tick")]
    claims = [r for r in ticks if r.get("class") == "bar claim tick"]
    assert len(claims) == 13 and any(r.get("class") == "bar formal tick" for r in ticks)
    assert all(float(r.get("width")) >= TICK_PIXELS and float(r.get("height")) > 11 for r in ticks)


def test_both_lanes_start_at_the_same_origin_with_the_reply_before_the_code() -> None:
    root = ET.fromstring(render_svg(_demo_like(), compare=Comparison(7.3, 10.53)))
    lanes = {g.get("id"): g for g in root.iter(f"{SVG}g")}
    baseline_tokens = next(
        r for r in lanes["lane-compare"].iter(f"{SVG}rect") if r.get("class") == "bar stream"
    )
    prose = next(
        r for r in lanes["lane-stream"].iter(f"{SVG}rect") if r.get("class") == "bar prose"
    )
    code = next(
        r for r in lanes["lane-stream"].iter(f"{SVG}rect") if r.get("class") == "bar stream"
    )
    assert prose.get("x") == baseline_tokens.get("x")  # time 0 of both runs
    assert float(prose.get("x")) + float(prose.get("width")) == pytest.approx(
        float(code.get("x")), abs=0.1
    )


def test_the_headline_tells_the_story() -> None:
    story = headline(10.53, 7.0, True)
    assert story == "10.5 s → 7.0 s, 1.5\u00d7 faster, results identical"
    assert headline(2.0, 4.0, False) == "2.0 s → 4.0 s, 2.0\u00d7 slower, results differ"
    root = ET.fromstring(render_svg(_demo_like(), compare=Comparison(7.3, 10.53), headline=story))
    assert story in [t.text for t in root.iter(f"{SVG}text")]
