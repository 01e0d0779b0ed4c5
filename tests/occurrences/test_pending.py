"""Provisional parses of the statement still streaming (``PrefixParser.pending``).

A provisional parse is for discovery only, but the calls it offers must be the model's own
text at its final position: every call that ends within ``limit`` is, node for node and
position for position, a call of the final parse. The property below checks that for every
chunking of programs written to stress the repair (brackets, strings holding ``,`` and
``)``, comprehensions, headers split over lines, ``\\r\\n``, continuations).
"""

from __future__ import annotations

import ast
import io
import itertools
import random
import sys
import tokenize

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from occurrences import PrefixParser, SealError
from occurrences.parser import _pending as _parser_module

PROGRAMS = [
    'x = docs.get(k="a")\ny = docs.search(q=x, n=2)\nprint(x, y)\n',
    'if mode == "fast":\n    plan = docs.search(query="fast, path)")\n    n = len(plan)\nelse:\n    plan = docs.get(k=(1, 2))\n',
    "results = (\n    docs.get(k='a'),\n    docs.get(\n        k='b'),\n    docs.search(q=f\"{x}, {y})\"),\n)\n",
    "pages = [docs.get(k=q) for q in qs]\nsizes = {docs.get(k=q): len(q) for q in (1, 2)}\n",
    "for t in topics:\n    r = docs.search(query=t)\n    if r:\n        break\n    docs.get(k=t)\n",
    "try:\n    owner = kb.get(key='o')\nexcept (KeyError, ValueError) as e:\n    docs.search(query=str(e))\nfinally:\n    done(1)\n",
    "with docs.open(p) as f, docs.open(q) as g:\n    data = f.read(), g.read()\n",
    "total = docs.get(k='a') + \\\n    docs.get(k='b')\nz = docs.get(k=1) if total else docs.get(k=2)\n",
    "x = f(a)(b)[c(d)].e(g)\r\ny = h(\r\n    i(j),\r\n    k)\r\n",
    "@decorate(docs.get(k='d'))\ndef f(a, b=docs.get(k='e')):\n    return docs.search(q=a)\n\nv = f(1)\n",
    "match docs.get(k='m'):\n    case Point(x=1):\n        docs.get(k='p')\n    case _:\n        pass\n",
    "s = '''multi, line)\n''' + docs.get(k=\"s\")\nt = lambda: docs.get(k='l')\n",
    "a = docs.get(k=1); r = [f(docs.get(k=2)), 3]\nif a:\n    b = [g(docs.get(k=3)),\n        4]\n",
    'é = [docs.get(k="ü"), docs.get(k="日本")]\nif "ß":\n    y = docs.search(q="€", n=(1,\n 2))\n',
]


def _calls(statements: list[ast.stmt]) -> list[ast.Call]:
    return [n for s in statements for n in ast.walk(s) if isinstance(n, ast.Call)]


def _key(node: ast.Call) -> tuple[int, int, int | None, int | None]:
    return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


@st.composite
def chunked(draw: st.DrawFn) -> tuple[str, list[str]]:
    source = draw(st.sampled_from(PROGRAMS))
    cuts = sorted(draw(st.sets(st.integers(1, len(source) - 1), max_size=len(source) // 2)))
    bounds = [0, *cuts, len(source)]
    return source, [source[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(chunked())
def test_every_provisional_call_within_the_limit_is_a_call_of_the_final_parse(
    case: tuple[str, list[str]],
) -> None:
    source, chunks = case
    final = {_key(n): ast.dump(n, include_attributes=True) for n in _calls(ast.parse(source).body)}
    parser = PrefixParser()
    for chunk in chunks:
        parser.feed(chunk)
        found = parser.pending()
        if found is None:
            continue
        for node in _calls(found.statements):
            assert node.end_lineno is not None and node.end_col_offset is not None
            if (node.end_lineno, node.end_col_offset) > found.limit:
                continue  # closed by the repair: never run (the lane refuses it)
            assert final.get(_key(node)) == ast.dump(node, include_attributes=True), ast.unparse(
                node
            )


def _pending_calls(chunks: list[str]) -> list[list[str]]:
    """After each chunk: the calls a fresh provisional parse offers (within its limit)."""
    parser = PrefixParser()
    seen: list[list[str]] = []
    for chunk in chunks:
        parser.feed(chunk)
        found = parser.pending()
        if found is None:
            seen.append([])
            continue
        seen.append(
            [
                ast.unparse(n)
                for n in _calls(found.statements)
                if (n.end_lineno, n.end_col_offset) <= found.limit
                and isinstance(n.func, ast.Attribute)
            ]
        )
    return seen


def test_a_top_level_call_is_offered_at_its_closing_parenthesis() -> None:
    assert _pending_calls(['x = docs.get(k="a"', ")", "\n"]) == [[], ["docs.get(k='a')"], []]


def test_a_call_in_an_if_body_is_offered_before_its_newline() -> None:
    chunks = ["if m:\n", '    y = docs.get(k="a")', ".strip()", "\n"]
    assert _pending_calls(chunks)[1] == ["docs.get(k='a')"]


def test_an_element_is_offered_at_its_comma_and_a_later_one_at_its_paren() -> None:
    both = ["docs.get(k='a')", "docs.get(k='b')"]
    chunks = ["r = (\n    docs.get(k='a')", ",", "\n    docs.get(k='b')", "\n)"]
    assert _pending_calls(chunks) == [[], ["docs.get(k='a')"], both, both]


def test_a_first_element_that_may_become_a_comprehension_waits_for_its_comma() -> None:
    """``[docs.get(k=q)`` may go on `` for q in qs]``: its ``q`` would be another name."""
    assert _pending_calls(["r = [docs.get(k=q)", " for q in qs]"]) == [[], []]
    assert _pending_calls(["r = [a, docs.get(k=q)", "]"])[0] == ["docs.get(k=q)"]


def test_a_column_0_line_that_may_still_become_else_is_not_used() -> None:
    """``e`` may be ``else``: until that is decided the line belongs to no group."""
    parser = PrefixParser()
    parser.feed("if x:\n    pass\n")
    parser.pending()
    parser.feed("e")
    assert parser.pending() is None


def test_text_inside_an_element_costs_no_new_parse() -> None:
    """Only a new ``,`` or ``)`` (or a new line) can offer more: nothing else re-parses."""
    parser = PrefixParser()
    parser.feed("r = (\n    docs.get(k='a'),")
    assert parser.pending() is not None
    for piece in ("\n", "    docs.", "search(q='lon", "ger text"):
        parser.feed(piece)
        found = parser.pending()
        if piece != "\n":
            assert found is None


def test_without_at_paren_a_call_waits_for_what_may_rewrite_it() -> None:
    """Under the projection pushdown ``fs.read_text(p)`` may become ``.splitlines()[:2]``:
    the call is final only at the line's end (or an element's comma)."""
    parser = PrefixParser()
    parser.feed('first = fs.read_text("f1")')
    assert parser.pending(at_paren=False) is None
    parser.feed(".splitlines()[:2]\n")
    assert parser.pending(at_paren=False) is None, "accepted at its newline, nothing pending"


def _offered(found: object) -> dict[tuple[int, int, int | None, int | None], str]:
    """The calls a provisional parse offers (within its limit), by position."""
    assert found is not None
    limit = found.limit  # type: ignore[attr-defined]
    calls = _calls(found.statements)  # type: ignore[attr-defined]
    return {
        _key(n): ast.dump(n, include_attributes=True)
        for n in calls
        if (n.end_lineno, n.end_col_offset) <= limit
    }


@settings(max_examples=300, deadline=None)
@given(chunked())
def test_a_refused_parse_would_offer_no_call_the_last_one_did_not(
    case: tuple[str, list[str]],
) -> None:
    """``pending`` does not parse again text that adds no ``)`` to what its last parse of the
    group used: a fresh parser given all the text at once offers nothing that the last
    parse found (since statements were last accepted) did not, node for node."""
    _, chunks = case
    parser = PrefixParser()
    latest: dict[tuple[int, int, int | None, int | None], str] = {}
    text = ""
    for chunk in chunks:
        text += chunk
        if parser.feed(chunk) is not None:
            latest = {}  # a new group: the graph supersedes what was provisional
        found = parser.pending()
        if found is not None:
            latest = _offered(found)
        fresh = PrefixParser()
        fresh.feed(text)
        once = fresh.pending()
        if once is not None:
            missing = {k: v for k, v in _offered(once).items() if latest.get(k) != v}
            assert not missing, (text, missing)


def test_a_line_that_adds_no_paren_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A header, ``else:``, a plain assignment: no new call can end there."""
    parses: list[str] = []

    def counting(
        text: str, *, at_paren: bool = True, line: int = 1, reuse: object = None
    ) -> object:
        parses.append(text)
        return _parser_module.pending(text, at_paren=at_paren, line=line, reuse=reuse)  # type: ignore[arg-type]

    monkeypatch.setattr("occurrences.parser._parser.pending", counting)
    parser = PrefixParser()
    offered: list[list[str]] = []
    for line in [
        "if m:\n",
        "    a = docs.get(k=1)\n",
        "    b = (2,\n",
        "    3)\n",
        "else:\n",
        "    c = docs.get(k=2)\n",
    ]:
        parser.feed(line)
        found = parser.pending()
        offered.append(sorted(_offered(found).values()) if found is not None else [])
    assert [bool(o) for o in offered] == [False, True, False, True, False, True]
    assert len(parses) == 3, (
        "parsed at the two calls, and at the ')' of a tuple (a call might end there)"
    )
    assert len(offered[-1]) == 2


def test_a_paren_the_last_parse_did_not_use_still_counts() -> None:
    """The first parse stops after ``docs.get(k=1)`` (``[f(...)`` may become a comprehension):
    the ``)`` after it were not used, so the ``,`` that completes the element parses again."""
    chunks = ["a = docs.get(k=1); r = [f(docs.get(k=2))", ",", " 3]"]
    assert _pending_calls(chunks) == [["docs.get(k=1)"], ["docs.get(k=1)", "docs.get(k=2)"], []]


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="3.11 only: its C tokenizer stands in for tokenize"
)
def test_the_c_tokenizer_repairs_as_tokenize_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """On 3.11 the repair reads the C tokenizer, not the pure-Python ``tokenize``. On every
    prefix of the programs above (and a few invalid ones) both give the same repair, except
    where ``tokenize`` goes on past an unterminated string with error tokens and cuts inside
    it: its repair then does not parse, and the C tokenizer's (cut before the string, if
    there is a cut) does, or gives no repair either."""
    extra = [
        'x = [docs.get(k=1), g("a, b)',
        "if a:\n  b = 1\n c = 2\n",
        "x = 1 # c, d)\nif y:  # (\n    z = f(1)\n",
    ]
    texts = {p[:i] for p in [*PROGRAMS, *extra] for i in range(1, len(p) + 1)}
    fast = {t: (_parser_module._repair(t, True), _parser_module._repair(t, False)) for t in texts}
    monkeypatch.setattr(
        _parser_module, "_tokens", lambda text: tokenize.generate_tokens(io.StringIO(text).readline)
    )
    gained = 0
    for text in sorted(texts):
        for at_paren, c_tokens in zip((True, False), fast[text], strict=True):
            pure = _parser_module._repair(text, at_paren)
            if pure != c_tokens:
                assert not _parses(pure), (text, pure, c_tokens)
                gained += _parses(c_tokens)
    assert gained, "a cut before an unterminated string"


def _parses(repaired: tuple[str, tuple[int, int]] | None) -> bool:
    try:
        return repaired is not None and bool(ast.parse(repaired[0]).body)
    except SyntaxError:
        return False


def test_a_lone_surrogate_gives_no_provisional_parse_and_no_error() -> None:
    """No source holding one compiles (``close`` rejects it); ``pending`` must not raise."""
    for chunks in (
        ['x = [f("\ud800"), g(1)', ","],
        ['y = g(1), "\ud800', "\n"],
        ["if a:\n", '    b = h("\udc00")', "\n"],
    ):
        parser = PrefixParser()
        for chunk in chunks:
            parser.feed(chunk)
            found = parser.pending()
            assert found is None or "\ud800" not in ast.unparse(found.statements[0])
        with pytest.raises(SealError):
            parser.close()


LONG_BLOCKS = [
    "for d in docs_ids:\n"
    + "".join(f"    v{i} = docs.get(k=d + '{i}')\n" for i in range(12))
    + "    break\nz = 1\n",
    "if mode:\n    a = docs.get(k=1)\n    # a comment\n\n    b = [docs.get(k=2),\n         docs.get(k=3)]\n"
    "    if a:\n        c = docs.get(k=4)\n        d = docs.get(k=5)\n    e = docs.get(k=6); f = docs.get(k=7)\n"
    "    @dec(docs.get(k=8))\n    def g(x):\n        return docs.get(k=x)\n    h = g(9)\n    s = '''x,\n)'''\nelse:\n    pass\n",
    "while n:\n    x = docs.get(k=n)\n    with docs.open(x) as f:\n        y = f.read()\n        z = docs.get(k=y)\n    n = docs.next(k=n)\n",
    "with docs.open('a') as f:\n    for t in f:\n        r = docs.get(k=t)\n        s = docs.get(k=r)\n    u = docs.get(k='u')\n    try:\n        w = docs.get(k='w')\n    except E:\n        w = 0\n    q = docs.get(k=w)\n",
]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(LONG_BLOCKS), st.integers(1, 9), st.randoms(use_true_random=False))
def test_a_parse_reusing_the_previous_one_is_the_whole_texts_parse(
    source: str, size: int, rnd: object
) -> None:
    """Issue 36, item 7: each provisional parse given the previous one (its final leading
    body statements shared, their lines not parsed again) equals, node for node and
    position for position, the parse of the same text from scratch; and reuse happens."""
    calls: list[int] = []
    original = _parser_module.pending

    def dump(found: _parser_module.Pending | None) -> object:
        return (
            None
            if found is None
            else ([ast.dump(s, include_attributes=True) for s in found.statements], found.limit)
        )

    def checked(
        text: str,
        *,
        at_paren: bool = True,
        line: int = 1,
        reuse: _parser_module.Pending | None = None,
    ) -> _parser_module.Pending | None:
        found = original(text, at_paren=at_paren, line=line, reuse=reuse)
        assert dump(found) == dump(original(text, at_paren=at_paren, line=line)), text
        calls.append(found.reused if found is not None else 0)
        return found

    assert isinstance(rnd, random.Random)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("occurrences.parser._parser.pending", checked)
        parser = PrefixParser()
        at = 0
        while at < len(source):
            step = rnd.randint(1, size)
            parser.feed(source[at : at + step])
            at += step
            parser.pending()
    assert calls and max(calls) > 0, "the previous parse was reused"


@pytest.mark.parametrize(
    "text", ["a\nb\nc", "a\nb\nc\n", "\n\n", "x", "ab\ncd\n\nef", "", "a\r\nb\rc\nd"]
)
def test_a_line_is_found_from_the_end_where_the_tokenizer_ends_lines(text: str) -> None:
    from occurrences.parser._parser import _EOL, _line_start

    starts = [0, *(m.end() for m in _EOL.finditer(text))]
    for row in range(1, len(starts) + 3):
        assert _line_start(text, row) == (starts[row - 1] if row <= len(starts) else len(text))
