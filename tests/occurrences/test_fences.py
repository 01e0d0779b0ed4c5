"""FenceExtractor: the first Python block of a markdown stream, whatever the chunking.

Strict mode is checked against markdown-it-py (a CommonMark implementation, installed with
rich) on generated documents; the cases below pin each rule and each deliberate departure
(lenient indentation, bare fences).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from occurrences import FenceExtractor


def extract(pieces: list[str] | str, **options: object) -> str:
    if isinstance(pieces, str):
        pieces = list(pieces)  # one character at a time: the hardest chunking
    fx = FenceExtractor(**options)  # type: ignore[arg-type]
    return "".join(fx.feed(p) for p in pieces) + fx.close()


def test_prose_around_the_block_is_ignored() -> None:
    doc = "Here is the code:\n\n```python\nx = 1\ny = 2\n```\n\nThat sets x.\n"
    assert extract(doc) == "x = 1\ny = 2\n"


@pytest.mark.parametrize("info", ["python", "py", "Python3", "py3 title='a.py'", " python"])
def test_python_info_strings(info: str) -> None:
    assert extract(f"```{info}\npass\n```\n") == "pass\n"


def test_other_languages_are_skipped_whole() -> None:
    doc = "````markdown\n```python\nnot = 'this'\n```\n````\n~~~py\nyes = 1\n~~~\n"
    assert extract(doc) == "yes = 1\n"


def test_only_the_first_python_block_counts() -> None:
    assert extract("```py\na = 1\n```\n```py\nb = 2\n```\n") == "a = 1\n"


def test_no_fence_means_no_code() -> None:
    assert extract("just prose, `inline` and ``x``\n") == ""
    assert extract("") == ""


def test_unclosed_fence_runs_to_the_end() -> None:
    assert extract("```python\nx = 1\ny = 2") == "x = 1\ny = 2"


def test_closer_needs_the_same_character_and_at_least_the_length() -> None:
    doc = "````python\n```\n~~~~\nx = 1\n`````  \nafter\n"
    assert extract(doc) == "```\n~~~~\nx = 1\n"


def test_closer_may_not_carry_text() -> None:
    assert extract("```python\n``` x\ny\n```\n") == "``` x\ny\n"


def test_backtick_info_with_backtick_is_not_an_opener() -> None:
    assert extract("```python`\nx\n```python\ny\n```\n") == "y\n"


def test_fence_markers_split_across_chunks() -> None:
    pieces = ["Text\n`", "`", "`py", "thon\nx = ", "1\n`", "``", "\nprose"]
    assert extract(pieces) == "x = 1\n"


def test_code_streams_before_its_line_ends() -> None:
    """A line that can no longer be a closer is emitted as it arrives."""
    fx = FenceExtractor()
    assert fx.feed("```python\nprint(") == "print("
    assert fx.feed("1") == "1"
    assert fx.feed(")\n``") == ")\n"  # "``" could still become the closer
    assert fx.feed("`\nmore prose") == ""
    assert fx.done
    assert fx.close() == ""


def test_content_loses_up_to_the_opener_indentation() -> None:
    doc = "  ```python\n    a = 1\n b = 2\nc = 3\n  ```\n"
    assert extract(doc) == "  a = 1\nb = 2\nc = 3\n"


def test_tabs_in_indentation_count_as_commonmark_columns() -> None:
    assert extract("  ```python\n\tx\n```\n") == "  x\n"


def test_lenient_mode_accepts_fences_indented_in_list_items() -> None:
    doc = "1. Run this:\n\n    ```python\n    x = 1\n    if x:\n        y = 2\n    ```\n"
    assert extract(doc) == "x = 1\nif x:\n    y = 2\n"
    assert extract(doc, lenient=False) == ""


def test_bare_fence_is_code_only_when_asked() -> None:
    doc = "```\nx = 1\n```\n"
    assert extract(doc) == ""
    assert extract(doc, bare=True) == "x = 1\n"


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_cr_are_kept_in_the_code(newline: str) -> None:
    doc = newline.join(["Text", "```python", "a = 1", "b = 2", "```", "end"])
    assert extract(doc) == f"a = 1{newline}b = 2{newline}"


def test_raw_mode_passes_text_through() -> None:
    fx = FenceExtractor(mode="raw")
    assert fx.feed("```python\n") == "```python\n"
    assert fx.close() == ""


def test_feed_after_close_and_unknown_mode_are_programmer_errors() -> None:
    fx = FenceExtractor()
    fx.close()
    with pytest.raises(RuntimeError):
        fx.feed("x")
    with pytest.raises(ValueError, match="mode"):
        FenceExtractor(mode="html")  # type: ignore[arg-type]


def reference(doc: str) -> str:
    """The first python/py fence's content per markdown-it-py (CommonMark)."""
    for token in MarkdownIt("commonmark").parse(doc):
        words = token.info.split()
        if token.type == "fence" and words and words[0].lower() in {"python", "py"}:
            return token.content
    return ""


LINES = st.sampled_from(
    [
        "prose line",
        "",
        "```python",
        "```py",
        "~~~python",
        "````python",
        "  ```python",
        "   ~~~py",
        "    ```python",
        "```text",
        "```",
        "````",
        "~~~",
        "~~~~~",
        "   ```",
        "    ```",
        "``` ",
        "```x`",
        "x = 1",
        "  indented = 2",
        "    deep = 3",
        "```` nested",
        "# heading",
        "===",
        "\t```python",
        " \tx = 1",
        "\t\tz",
        "  \t```",
        "`a` b",
        "``x`` y",
        "~~ z",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(LINES, max_size=14), st.booleans(), st.data())
def test_strict_mode_matches_commonmark_for_any_chunking(
    lines: list[str], final_newline: bool, data: st.DataObject
) -> None:
    doc = "\n".join(lines) + ("\n" if final_newline and lines else "")
    cuts = sorted(data.draw(st.sets(st.integers(0, len(doc)), max_size=12)))
    pieces = [doc[a:b] for a, b in itertools.pairwise([0, *cuts, len(doc)]) if b > a]
    expected = reference(doc)
    got = extract(pieces, lenient=False)
    if got != expected and expected.endswith("\n") and not doc.endswith("\n"):
        # markdown-it adds a newline to a block that the end of the document cut off.
        got += "\n"
    assert got == expected


MARKDOWN = st.lists(
    st.sampled_from(
        [
            "Some prose.",
            "",
            "```python",
            "    ```python",
            "~~~py",
            "```",
            "    ```",
            "````",
            "x = 1",
            "    y = 2",
            "\tz = 3",
            "- item",
            "1. step:",
            "```text",
            "`a` b",
        ]
    ),
    max_size=14,
).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(MARKDOWN, st.sampled_from(["\n", "\r\n", "\r"]), st.booleans(), st.data())
def test_any_chunking_gives_the_same_code(
    doc: str, newline: str, bare: bool, data: st.DataObject
) -> None:
    """Lenient and strict, bare or not, CR/CRLF/LF: the chunking never changes the code."""
    doc = doc.replace("\n", newline)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(doc)), max_size=12)))
    pieces = [doc[a:b] for a, b in itertools.pairwise([0, *cuts, len(doc)]) if b > a]
    for lenient in (True, False):
        whole = extract([doc], lenient=lenient, bare=bare)
        assert extract(pieces, lenient=lenient, bare=bare) == whole
        assert extract(doc, lenient=lenient, bare=bare) == whole
