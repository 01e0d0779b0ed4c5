"""PrefixParser: finality rules, exactness and sealing, one small source per rule.

Each case states the property it checks; ``accepted_after`` streams a source in the given
pieces and records how many statements were accepted after each piece, so a case reads as
"source, where it is cut, and what must be final at each cut".
"""

from __future__ import annotations

import ast
import sys
import warnings

import pytest

from occurrences import PrefixParser, SealError, Snapshot
from occurrences.parser._scanner import LineScanner


def dumps(statements: object) -> list[str]:
    assert isinstance(statements, (list, tuple))
    return [ast.dump(s, include_attributes=True) for s in statements]


def accepted_after(*pieces: str) -> list[int]:
    """Accepted statement count after each piece; the last entry is after close()."""
    parser = PrefixParser()
    counts = []
    count = 0
    for piece in pieces:
        snap = parser.feed(piece)
        if snap is not None:
            assert len(snap.statements) > count, "a snapshot must grow"
            count = len(snap.statements)
        counts.append(count)
    final = parser.close()
    source = "".join(pieces)
    assert dumps(final.statements) == dumps(ast.parse(source).body)
    assert parser.statistics().whole_parses == 0
    counts.append(len(final.statements))
    return counts


def stream(source: str, size: int = 1) -> tuple[list[Snapshot], Snapshot]:
    parser = PrefixParser()
    snaps = []
    for i in range(0, len(source), size):
        snap = parser.feed(source[i : i + size])
        if snap is not None:
            snaps.append(snap)
    return snaps, parser.close()


def test_simple_statement_is_final_at_its_newline() -> None:
    """A column-0 simple statement is final in the chunk that ends its logical line."""
    assert accepted_after("x = 1\n", "\n", "# c\n", "y", " = 2\n") == [1, 1, 1, 1, 2, 2]
    assert accepted_after("x = 1", "\n", "y = f(", "1,\n", "2)", "\n") == [0, 1, 1, 1, 1, 2, 2]


def test_last_statement_is_accepted_at_its_newline_or_at_close() -> None:
    assert accepted_after("x = 1\ny = 2\n") == [2, 2]
    assert accepted_after("x = 1\ny = 2") == [1, 2]


def test_compound_headers_and_decorators_wait_for_the_next_line() -> None:
    """``if``/``def``/``class``/``match`` ... may still grow (a body, ``else``); a one-line
    compound statement too (``else`` may follow); a decorator needs its definition."""
    assert accepted_after("if x: pass\n", "y = 1\n") == [0, 2, 2]
    assert accepted_after("def f(): pass\n", "y = 1\n") == [0, 2, 2]
    assert accepted_after("@d\n", "def f(): pass\n", "y = 1\n") == [0, 0, 2, 2]
    assert accepted_after("match x:\n", "    case 1:\n        pass\n", "y = 1\n") == [0, 0, 2, 2]
    assert accepted_after("match(x)\n", "match = 1\n") == [1, 2, 2]


def test_comment_and_blank_lines_join_the_next_statement() -> None:
    """Lines holding no code are not parsed as a group of their own."""
    parser = PrefixParser()
    for piece in ("x = 1\n", "# a\n\n   \n", "y = 2\n", "# tail\n"):
        parser.feed(piece)
    final = parser.close()
    assert dumps(final.statements) == dumps(ast.parse("x = 1\n# a\n\n   \ny = 2\n# tail\n").body)
    stats = parser.statistics()
    assert (stats.groups, stats.at_newline) == (3, 2)  # x, comments+y, the final comment


def test_a_complete_line_that_cannot_parse_dooms_at_once() -> None:
    parser = PrefixParser()
    assert parser.feed("x = = 1\n") is None
    assert parser.feed("y = 2\n") is None  # no snapshot after a certain error
    with pytest.raises(SealError):
        parser.close()


def test_else_after_comments_and_blank_lines_continues_the_if() -> None:
    src = ["if x:\n    a = 1\n", "# note\n\n", "else", ":\n    a = 2\n", "z = 3\n"]
    assert accepted_after(*src) == [0, 0, 0, 0, 2, 2]


def test_continuation_keyword_needs_a_complete_first_token() -> None:
    """``els`` may still become ``else``; ``elsewhere`` finalizes the ``if``."""
    assert accepted_after("if x:\n    pass\n", "els", "ewhere = 1\n") == [0, 0, 2, 2]
    assert accepted_after("if x:\n    pass\n", "e", "lif y:\n    pass\n") == [0, 0, 0, 1]


def test_first_token_that_cannot_start_a_keyword_finalizes_at_once() -> None:
    assert accepted_after("if x:\n    pass\n", "y") == [0, 1, 2]
    assert accepted_after("for a in b:\n    pass\n", "(y)") == [0, 1, 2]


def test_finally_and_except_continue_try() -> None:
    src = ["try:\n    pass\n", "except E:\n    pass\n", "finally:\n    pass\n", "x = 1\n"]
    assert accepted_after(*src) == [0, 0, 0, 2, 2]


def test_for_while_else() -> None:
    assert accepted_after("while x:\n    pass\n", "else:\n    pass\n", "f = 1\n") == [0, 0, 2, 2]


def test_decorator_joins_the_following_definition() -> None:
    src = ["@dec\n", "@other(1)\n", "def f():\n    pass\n", "x = 1\n"]
    assert accepted_after(*src) == [0, 0, 0, 2, 2]


def test_multiline_strings_hide_column_zero_text() -> None:
    src = 'x = """\ny = 2\nelse:\n"""', "\n", "z = 3\n"
    assert accepted_after(*src) == [0, 1, 2, 2]


def test_brackets_continue_at_column_zero() -> None:
    src = "x = [\n1,\n2,\n", "]\n", "y = (\n'a'\n", ")\n", "z = 0"
    assert accepted_after(*src) == [0, 1, 1, 2, 2, 3]


def test_backslash_continuation_joins_lines() -> None:
    src = "x = 1 + \\\n", "2\n", "y = 3\n"
    assert accepted_after(*src) == [0, 1, 2, 2]
    assert accepted_after("x = 1 + \\\r", "\n2\r", "\n") == [0, 0, 1, 1]


def test_backslash_in_indentation_keeps_the_line_inside_the_block() -> None:
    """``\\`` + newline inside indentation: the next line's column continues from it."""
    source = "def f():\n    pass\n\\\n    x = 1\ny = 2\n"
    _snaps, final = stream(source)
    assert [type(s).__name__ for s in final.statements] == ["FunctionDef", "Assign"]
    assert dumps(final.statements) == dumps(ast.parse(source).body)
    # A logical line opened by a backslash is merged, not tried early (safe either way).
    assert accepted_after("\\\n", "x = 1\n", "y = 2\n") == [0, 0, 2, 2]


def test_semicolons_give_several_statements_per_line() -> None:
    assert accepted_after("a = 1; b = 2\n", "c = 3; d = 4\n") == [2, 4, 4]


def test_match_statement_and_soft_keywords_as_names() -> None:
    src = [
        "match = 3\n",
        "match command:\n    case [x]:\n        pass\n    case _:\n        pass\n",
        "case = 1\n",
        "type = 2\n",
    ]
    assert accepted_after(*src) == [1, 1, 3, 4, 4]


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_cr_line_endings(newline: str) -> None:
    source = newline.join(["if x:", "    a = 1", "else:", "    a = 2", "b = 'z'", "c = 3", ""])
    for size in (1, 2, 3, 7):
        snaps, final = stream(source, size)
        assert dumps(final.statements) == dumps(ast.parse(source).body)
        # "\r" alone ends a line only once the next character shows it is not "\r\n".
        assert [len(s.statements) for s in snaps][-1] == (3 if newline == "\r\n" else 2)


def test_cr_at_chunk_end_waits_for_a_possible_lf() -> None:
    """A trailing ``\\r`` may be half of ``\\r\\n``: the line count must not double."""
    assert accepted_after("x = 1\r", "\ny = 2\r", "\n", "z = 3") == [0, 1, 2, 2, 3]
    assert accepted_after("x = 1\r", "y = 2\r") == [0, 1, 2]


def test_only_line_breaks_cpython_knows_end_lines() -> None:
    """Form feed, vertical tab and U+2028 are not line breaks for the tokenizer."""
    source = "x = '\x0b\u2028\x1c'\ny = 1"
    assert accepted_after(source) == [1, 2]


def test_form_feed_in_indentation_resets_the_column() -> None:
    source = "def f():\n    pass\n \x0cx = 1\ny = 2\n"
    _, final = stream(source)
    assert dumps(final.statements) == dumps(ast.parse(source).body)


def test_tabs_and_unicode_columns_are_exact() -> None:
    source = "if x:\n\tя = 'ü'; b = 'é'\nz = 'ß' + f'{я}'\n"
    _snaps, final = stream(source)
    assert dumps(final.statements) == dumps(ast.parse(source).body)


def test_string_prefixes_and_escaped_quotes() -> None:
    source = "a = r'\\'' + b\"\\\"\" + rb'''x'''\nb = 'it\\'s'\nc = '''a\\'''b'''\nd = 1\n"
    assert accepted_after(source) == [4, 4]


def test_fstrings_with_nested_quotes_and_fields() -> None:
    parts = [
        "a = f'{x!r:>{width}}' + f'{{literal}}'\n",
        'b = f"{d[\'k\']}" + rf"\\{x}"\n',
        "c = f'''\n{y}\n'''\n",
        "d = 1\n",
    ]
    assert accepted_after(*parts) == [1, 2, 3, 4, 4]


def test_snapshot_reports_new_statements_and_covered_source() -> None:
    parser = PrefixParser()
    assert parser.feed("a = 1\nb = 2") is not None  # "a = 1\n" is final
    snap = parser.feed("\nc")
    assert snap is not None
    assert snap.first_new == 1
    assert [s.lineno for s in snap.statements] == [1, 2]
    assert [s.lineno for s in snap.new_statements] == [2]
    assert snap.source == "a = 1\nb = 2\n"
    assert snap.end == len(snap.source)
    last = parser.feed(" = 3\n")
    assert last is not None and last.first_new == 2
    assert [s.lineno for s in last.new_statements] == [3]
    assert parser.source == "a = 1\nb = 2\nc = 3\n"
    final = parser.close()
    assert final.first_new == 3 and final.new_statements == ()
    assert final.source == parser.source


def test_snapshots_are_views_that_do_not_change_later() -> None:
    parser = PrefixParser()
    first = parser.feed("a = 1\nb")
    assert first is not None
    parser.feed(" = 2\nc = 3\n")
    parser.close()
    assert len(first.statements) == 1
    assert first.source == "a = 1\n"


def test_empty_and_comment_only_sources() -> None:
    assert stream("")[1].statements == ()
    assert stream("# only a comment\n\n")[1].statements == ()
    assert PrefixParser().feed("") is None


def test_feed_after_close_is_a_programmer_error() -> None:
    parser = PrefixParser()
    parser.close()
    with pytest.raises(RuntimeError):
        parser.feed("x")
    with pytest.raises(RuntimeError):
        parser.close()


def seal_error(source: str, size: int = 3) -> SealError:
    parser = PrefixParser()
    for i in range(0, len(source), size):
        parser.feed(source[i : i + size])
    with pytest.raises(SealError) as info:
        parser.close()
    return info.value


def cpython_error(source: str) -> tuple[object, ...]:
    with pytest.raises(SyntaxError) as info:
        ast.parse(source)
    e = info.value
    return (type(e).__name__, e.msg, e.lineno, e.offset, e.end_lineno, e.end_offset, e.text)


@pytest.mark.parametrize(
    "source",
    [
        "x = (1,\ny = 2\n",  # a bracket never closed
        "x = '''abc\n",  # a string never closed
        "s = 'abc\nt = 1\n",  # a newline in a single-quoted string
        "x = 1 + \\",  # ends in a backslash continuation
        "\\",  # ends in a continuation inside indentation
        "if x:\n",  # a block with no body
        "@dec\n",  # a decorator with nothing to decorate
        "x = 1\n  y = 2\n",  # unexpected indent
        "x = 1\nelse:\n    pass\n",  # else with no if
        "def f(:\n    pass\nx = 1\ny = 2\n",  # an error in the middle
        "a = 1\nb = )\nc = 'unterminated\n",  # two errors: CPython reports the first
        "print 'hi'\n",
        "x = 1\r\ny = (\r\n",
    ],
)
def test_seal_error_matches_cpython(source: str) -> None:
    err = seal_error(source)
    assert isinstance(err, SyntaxError)
    got = (type(err.__cause__).__name__, err.msg, err.lineno, err.offset)
    assert (*got, err.end_lineno, err.end_offset, err.text) == cpython_error(source)


def test_no_snapshots_after_an_error() -> None:
    """Once a group fails, the whole source cannot parse: nothing more is accepted."""
    parser = PrefixParser()
    snap = parser.feed("a = 1\nb = )\nc = 2\n")
    assert snap is not None
    assert len(snap.statements) == 1
    assert parser.feed("d = 3\ne = 4\n") is None
    with pytest.raises(SealError):
        parser.close()


def test_nul_byte_is_a_seal_error() -> None:
    parser = PrefixParser()
    parser.feed("x = 1\n")
    assert parser.feed("y = '\0'\nz = 1\n") is None
    with pytest.raises(SealError, match="null bytes"):
        parser.close()


def test_lone_surrogate_is_a_seal_error() -> None:
    assert "surrogates" in seal_error("x = '\ud800'\ny = 1\n").msg


def test_group_warnings_are_not_emitted_with_wrong_lines(recwarn: pytest.WarningsRecorder) -> None:
    source = "a = 1\nb = '\\d'\nc = 2\n"
    _, final = stream(source)
    assert len(final.statements) == 3
    assert not [w for w in recwarn if issubclass(w.category, (SyntaxWarning, DeprecationWarning))]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 and PEP 701 syntax is 3.12+")
def test_312_syntax_positions_after_the_first_group() -> None:
    """Later groups are shifted node by node: ``TypeAlias.name`` is a node, not a string,
    and PEP 701 f-strings may nest the same quotes and span lines in a field."""
    source = (
        "x = 1\n"
        "type Alias[T: int] = list[T]\n"
        "def f[T](a: T) -> T:\n    return a\n"
        "class C[*Ts, **P]:\n    pass\n"
        's = f"{d["k"]:{w}} {x # c\n}"\n'
        "y = 2\n"
    )
    _, final = stream(source)
    assert dumps(final.statements) == dumps(ast.parse(source).body)


def test_doubt_at_close_falls_back_to_one_whole_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the scanner ever end in doubt on valid source, close() still returns the exact
    statements (one whole-source parse) and reports only the ones not yet accepted as new."""
    parser = PrefixParser()
    parser.feed("a = 1\nb = 2\nc = 3")
    monkeypatch.setattr(LineScanner, "between", property(lambda self: False))
    final = parser.close()
    assert dumps(final.statements) == dumps(ast.parse("a = 1\nb = 2\nc = 3\n").body)
    assert final.first_new == 2
    assert parser.statistics().whole_parses == 1


def test_warning_filters_do_not_change_the_verdict() -> None:
    """Under ``-W error`` CPython turns an invalid escape into a SyntaxError; the parser's
    answer must not depend on the Host's warning filters (the Guest compiles for itself)."""
    source = "a = 1\nb = '\\d'\nc = 2\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, final = stream(source)
    assert len(final.statements) == 3
