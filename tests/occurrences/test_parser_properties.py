"""PrefixParser properties (hypothesis): chunking never changes the answer.

* For any program built from tricky fragments and any chunking, the final snapshot equals
  ``ast.parse`` of the whole source, and every snapshot is a prefix of the final one.
* For arbitrary Python-ish text (mostly invalid), ``close()`` raises exactly the error
  CPython gives for the whole source, or returns exactly its statements.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
import warnings

from corpus_check import due_offsets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from occurrences import PrefixParser, SealError, Snapshot
from occurrences.parser._parser import _COMPOUND

FRAGMENTS = [
    "x = 1\n",
    "a = b = (1,\n2)\n",
    "if x:\n    y = 1\n",
    "if x:\n    pass\n# c\n\nelif y:\n    pass\nelse:\n    pass\n",
    "for i in r:\n    pass\nelse:\n    z = 2\n",
    "while w:\n    break\n",
    "try:\n    t()\nexcept E as e:\n    pass\nelse:\n    pass\nfinally:\n    f()\n",
    "@dec\n@d2(1)\ndef f(a, *b, **c):\n    return a\n",
    "class C(B):\n    '''doc\nelse:\n'''\n    x: int = 3\n",
    "s = '''\nx = 1\n'''\n",
    "s = 'a\\\nb'\n",
    "v = [\n1,\n]\n",
    "w = 1 + \\\n    2\n",
    "\\\nq = 1\n",
    "a = 1; b = 2\n",
    "match p:\n    case [1, *r]:\n        pass\n    case {'k': v}:\n        pass\n",
    "match = 1\n",
    "f'{x!r:>{w}}' f\"{{}}\" r'\\''\nb_ = rb'\\'' b'''\"'''\n",
    "g = lambda: (yield)\n",
    "async def h():\n    await z\n",
    "elsewhere = 3\n",
    "finally_ = 4\n",
    "# comment\n",
    "\n",
    "   \n",
    "u = 'é' + \"ü\"\n",
    "if a:\n\tb = 1\n",
    "return 5\n",
    "t = ('a'\n'b')\n",
    "'a'\n'b'\n",
    "\x0cz = 5\n",
    "p = f(1,\n  2)  # c\n",
    "k = 1  # c\n    # indented comment\n",
    *(["type X = int\n"] if sys.version_info >= (3, 12) else []),
]

NEWLINES = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def programs(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(FRAGMENTS), min_size=0, max_size=8))
    source = "".join(parts)
    newline = draw(NEWLINES)
    if newline != "\n":
        source = source.replace("\n", newline)
    if source and draw(st.booleans()):
        source = source.rstrip("\r\n")  # no final newline
    return source


@st.composite
def chunked(draw: st.DrawFn, sources: st.SearchStrategy[str]) -> tuple[str, list[str]]:
    source = draw(sources)
    cuts = sorted(draw(st.sets(st.integers(0, max(len(source), 0)), max_size=40)))
    bounds = [0, *cuts, len(source)]
    return source, [source[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def dumps(statements: tuple[ast.stmt, ...] | list[ast.stmt]) -> list[str]:
    return [ast.dump(s, include_attributes=True) for s in statements]


def run(chunks: list[str]) -> tuple[list[Snapshot], Snapshot | SealError]:
    parser = PrefixParser()
    snaps = [s for c in chunks if (s := parser.feed(c)) is not None]
    try:
        return snaps, parser.close()
    except SealError as exc:
        return snaps, exc


def reference(source: str) -> list[ast.stmt] | SyntaxError | ValueError:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(source).body
        except (SyntaxError, ValueError) as exc:
            return exc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunked(programs()))
def test_any_chunking_gives_the_whole_parse_and_growing_prefixes(
    case: tuple[str, list[str]],
) -> None:
    source, chunks = case
    snaps, final = run(chunks)
    expected = reference(source)
    assert isinstance(expected, list), "the fragments only build valid programs"
    assert isinstance(final, Snapshot)
    want = dumps(expected)
    assert dumps(final.statements) == want
    assert final.source == source
    count = 0
    for snap in snaps:
        assert len(snap.statements) > count
        assert snap.first_new == count
        count = len(snap.statements)
        assert dumps(snap.statements) == want[:count]
        assert snap.source == source[: snap.end]
    if count == len(want) and want:
        # Accepted before close(): only a simple statement whose line has ended.
        assert not isinstance(expected[-1], _COMPOUND)
        assert source.rstrip(" \t\x0c").endswith(("\n", "\r")) or "#" in source.splitlines()[-1]


_LINE_END = re.compile(r"\r\n|\r|\n")


@st.composite
def cut_at_line_ends(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A program in chunks that end exactly at line ends (some extra cuts elsewhere, and
    ``\r\n`` pairs split between chunks)."""
    source = draw(programs())
    ends = [m.end() for m in _LINE_END.finditer(source)]
    splits = [m.start() + 1 for m in _LINE_END.finditer(source) if m.group() == "\r\n"]
    cuts: set[int] = set()
    if ends:
        cuts |= draw(st.sets(st.sampled_from(ends), max_size=len(ends)))
    if splits:
        cuts |= draw(st.sets(st.sampled_from(splits), max_size=4))
    cuts |= draw(st.sets(st.integers(0, len(source)), max_size=4))
    bounds = [0, *sorted(cuts), len(source)]
    return source, [source[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut_at_line_ends())
def test_simple_statements_are_accepted_in_the_chunk_that_ends_their_line(
    case: tuple[str, list[str]],
) -> None:
    """Zero extra chunks: a column-0 simple statement is in the snapshot of the very chunk
    whose text ends its logical line with a newline; and still exactly the final parse's."""
    source, chunks = case
    expected = reference(source)
    assert isinstance(expected, list)
    want = dumps(expected)
    due = due_offsets(source, expected)
    parser = PrefixParser()
    count, fed = 0, 0
    for chunk in chunks:
        snap = parser.feed(chunk)
        fed += len(chunk)
        if snap is not None:
            count = len(snap.statements)
            assert dumps(snap.statements) == want[:count]
        for index, offset in due.items():
            if offset == fed:
                assert count > index, f"statement {index} not accepted at its newline"
    assert dumps(parser.close().statements) == want


PYTHONISH = st.lists(
    st.sampled_from([*"xyif el:s=()[]{}'\"\\#@\n\r\t ;,.fr0123+-*", "else", "elif", "  ", "'''"]),
    max_size=40,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(chunked(PYTHONISH))
def test_close_raises_exactly_what_cpython_raises(case: tuple[str, list[str]]) -> None:
    source, chunks = case
    snaps, final = run(chunks)
    expected = reference(source)
    if isinstance(expected, list):
        assert isinstance(final, Snapshot)
        assert dumps(final.statements) == dumps(expected)
        for snap in snaps:
            assert dumps(snap.statements) == dumps(expected)[: len(snap.statements)]
    else:
        assert isinstance(final, SealError)
        assert isinstance(expected, SyntaxError)
        got = (final.msg, final.lineno, final.offset, final.end_lineno, final.end_offset)
        assert got == (
            expected.msg,
            expected.lineno,
            expected.offset,
            expected.end_lineno,
            expected.end_offset,
        )
