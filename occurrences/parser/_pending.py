"""Provisional statements: what an unfinished top-level statement already says for certain.

The prefix parser accepts a statement only when no later text can change it, so a read in
the body of an ``if`` waits for the whole ``if`` (and a possible ``else``), and the reads
of a multi-line tuple wait for its closing bracket. Yet their own text is final as soon as
it has streamed: Pydantic AI code mode's ``speculate`` starts a read at its closing
parenthesis. This module turns the unfinished group's complete lines into a *provisional*
parse that discovery may read (never run, never trust for anything else):

* at the end of a logical line, the open blocks are closed: a header still waiting for
  its body gets ``pass``, a ``try`` still in its body gets ``finally: pass``;
* inside brackets, the text is cut after the last comma that directly separates elements
  of a still-open bracket, and those brackets are closed; every element before the cut is
  complete, the one after it is dropped;
* a closing parenthesis is a cut too, where what precedes it can no longer become a
  comprehension's element: at the statement's own level (``x = docs.get(k)`` before its
  newline), or inside a bracket that already holds a comma. Then a call is discovered as
  soon as its ``)`` has streamed, as code mode's ``speculate`` starts it. (Not with
  ``at_paren=False``: when a pass may rewrite a call by what follows it, such as the
  projection pushdown's ``.splitlines()[:n]``, the call is not final at its ``)``.)

The text may end inside a line (the chunk so far): that line is unfinished, never taken
for a complete one, and only its part before a cut is used.

Everything before the cut is the model's own text at its final position, so the nodes it
yields carry the final parse's positions. A call that ends after ``Pending.limit`` was
closed by the repair, not by the model, and must never run. What the rest of the
statement adds may still change what encloses a complete element (``... if c else ...``
after it, an outer comprehension's ``for``), so the calls found here are only ever tried
as discardable early work.

The repair is best effort: when the tokenizer or the parser refuses the repaired text,
there is simply no provisional parse this time.

*Incremental* (issue 36, item 7): a long block streams one line at a time, and each new
line used to re-tokenize and re-parse the whole statement. Given the previous parse of the
same group (``reuse``), the statements of its first body that are already followed by
another (final: nothing later can change them) are not parsed again: their lines are taken
out of the text (what follows them is moved down by as many lines afterwards) and the
statement objects of the previous parse are spliced back in front of the body. The result is the parse of the whole text, node for node and position for position,
with those leading statements shared with the previous parse (``Pending.reused``), so that
discovery, too, can tell what it already read.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import token
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Final

from ..depth import LIMIT_ERRORS
from ._lines import parse_at, shift_lines

MAX_PENDING_CHARS: Final = 20_000
"""Longest unfinished statement parsed provisionally. Each new complete line re-tokenizes
and re-parses the statement so far (quadratic in its size), so a very long one waits for
its end like any other statement."""

_HEADERS: Final = frozenset(
    {
        "if",
        "elif",
        "else",
        "for",
        "while",
        "with",
        "try",
        "except",
        "finally",
        "def",
        "class",
        "async",
        "match",
        "case",
    }
)
_NOT_FOLLOWED: Final = frozenset({"def", "class", "async", "@"})
"""First tokens of statements whose bodies discovery does not follow where they stand
(definitions, decorated or not): a provisional parse of them would find nothing to start."""

_OPEN: Final = {"(": ")", "[": "]", "{": "}"}
_EOL: Final = re.compile(r"\r\n|\r")
_FSTRING_START: Final = getattr(tokenize, "FSTRING_START", -1)  # 3.12+
_FSTRING_END: Final = getattr(tokenize, "FSTRING_END", -1)

_Token = tuple[int, str, tuple[int, int], tuple[int, int], object]  # type, string, start, end, line

if sys.version_info[:2] == (3, 11):
    import _tokenize

    _EXACT: Final = frozenset(token.EXACT_TOKEN_TYPES.values())

    def _tokens(text: str) -> Iterator[_Token]:
        """3.11's ``tokenize`` is pure Python, five to ten times slower here than the C
        tokenizer it wraps only from 3.12 on; this is that C tokenizer, which 3.11's
        ``ast.parse`` reads too. Unlike ``tokenize`` it stops at the first error (an
        unterminated string) instead of going on with error tokens, yields no ``NL`` or
        ``COMMENT``, gives ``NEWLINE`` no text of its own, and operators their exact type
        (made ``OP`` here). Its columns count UTF-8 bytes; those of operators, the only
        columns ``_repair`` reads, are made characters as in ``tokenize``."""
        op = tokenize.OP
        rows = None if text.isascii() else text.split("\n")
        for value, kind, srow, erow, scol, ecol, _ in _tokenize.TokenizerIter(text):
            if kind in _EXACT:
                kind = op
                if rows is not None:
                    scol = len(rows[srow - 1].encode()[:scol].decode())
                    ecol = len(rows[erow - 1].encode()[:ecol].decode())
            yield kind, value, (srow, scol), (erow, ecol), None

else:

    def _tokens(text: str) -> Iterator[_Token]:
        return tokenize.generate_tokens(io.StringIO(text).readline)  # the C tokenizer from 3.12


@dataclass(frozen=True, slots=True)
class Pending:
    """A provisional parse of an unfinished group (positions as in the whole source)."""

    statements: list[ast.stmt]
    limit: tuple[int, int]
    """(line, UTF-8 column) where the model's text ends: a call ending after it is synthetic."""
    reused: int = 0
    """How many leading statements of the (single) statement's first body are the very
    objects of the parse it was given to reuse."""


@dataclass(slots=True)
class _Block:
    keyword: str
    indent: str  # the header line's leading whitespace


def pending(
    text: str, *, at_paren: bool = True, line: int = 1, reuse: Pending | None = None
) -> Pending | None:
    """The provisional parse of ``text`` (complete physical lines of one unfinished group
    that starts at line ``line`` of the whole source, where its positions are), or None when
    nothing can be taken from it yet. ``reuse``: the previous parse of the same group, on a
    prefix of ``text`` (see the module docstring)."""
    if not text or len(text) > MAX_PENDING_CHARS:
        return None
    # Lines end as the tokenizer ends them; string values and positions do not change.
    text = _EOL.sub("\n", text)
    kept = _final_body(reuse, line) if reuse is not None else None
    if kept is not None:
        rest, header, gap = _without(text, kept, line)
        found = _parse(rest, at_paren, line, header, gap)
        if found is not None and _splice(found, reuse, kept):
            return replace(found, reused=len(kept))
    return _parse(text, at_paren, line)


def _parse(text: str, at_paren: bool, line: int, header: int = 0, gap: int = 0) -> Pending | None:
    """The repair and parse of ``text``; ``gap`` lines were taken out of it after its first
    ``header`` lines (``_without``), so what follows them is moved down by ``gap``."""
    try:
        repaired = _repair(text, at_paren)
    except UnicodeEncodeError:
        return None  # a lone surrogate: no source holding one compiles
    if repaired is None:
        return None
    source, (row, col) = repaired
    try:
        module = parse_at(source, line)
    except (SyntaxError, ValueError, *LIMIT_ERRORS):
        return None
    if gap:
        if len(module.body) != 1 or not isinstance(module.body[0], _BODIED) or row <= header:
            return None
        top = module.body[0]
        shift_lines([*top.body, *getattr(top, "orelse", ())], gap)
        top.end_lineno = (top.end_lineno or 0) + gap
        row += gap
    return Pending(module.body, (row + line - 1, col))


_BODIED: Final = (ast.For, ast.While, ast.If, ast.With)
"""Statements whose first body the previous parse's final statements are reused from
(``try`` is not: the repair gives it a ``finally``)."""


def _final_body(reuse: Pending, line: int) -> list[ast.stmt] | None:
    """The final leading statements of ``reuse``'s first body, when they can be blanked:
    every one but the last, on lines of their own, below the header, with no clause after
    the body yet."""
    if len(reuse.statements) != 1:
        return None
    top = reuse.statements[0]
    if not isinstance(top, _BODIED) or getattr(top, "orelse", None) or len(top.body) < 2:
        return None
    kept, last = top.body[:-1], top.body[-1]
    end = kept[-1].end_lineno
    if end is None or end >= _first_line(last) or _first_line(kept[0]) <= top.lineno:
        return None
    return kept


def _first_line(node: ast.stmt) -> int:
    """A statement's first line: its first decorator's, if it has any."""
    decorators = getattr(node, "decorator_list", None)
    return min([node.lineno, *(d.lineno for d in decorators)]) if decorators else node.lineno


def _without(text: str, kept: list[ast.stmt], line: int) -> tuple[str, int, int]:
    """``text`` without the lines of ``kept`` (they follow the header and end before the
    last few lines, so both ends are found in time for those lines only); the number of
    lines before them and of theirs."""
    first, last = (
        _first_line(kept[0]) - line,
        (kept[-1].end_lineno or 0) - line + 1,
    )  # 0-based, end exclusive
    start = 0
    for _ in range(first):
        start = text.index("\n", start) + 1
    end = len(text)
    for _ in range(text.count("\n") - last + 1):
        end = text.rindex("\n", 0, end)
    return text[:start] + text[end + 1 :], first, last - first


def _splice(found: Pending, reuse: Pending | None, kept: list[ast.stmt]) -> bool:
    """Put ``kept`` back in front of ``found``'s body; False if ``found`` is not the same
    statement continued (then the whole text is parsed)."""
    assert reuse is not None
    if len(found.statements) != 1:
        return False
    top, old = found.statements[0], reuse.statements[0]
    if type(top) is not type(old) or (top.lineno, top.col_offset) != (old.lineno, old.col_offset):
        return False
    assert isinstance(top, _BODIED)
    if not top.body or top.body[0].lineno <= (kept[-1].end_lineno or 0):
        return False
    top.body[0:0] = kept
    return True


def _repair(text: str, at_paren: bool) -> tuple[str, tuple[int, int]] | None:
    """The text made parseable, and where the model's text ends in it (line, UTF-8 column)."""
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    partial = not text.endswith("\n")  # the last line is still streaming
    blocks: list[_Block] = []  # open bodies, innermost last (as of the last NEWLINE)
    header: _Block | None = None  # a header whose body has not begun
    stack: list[_Block] = []  # open bodies while tokenizing
    brackets: list[str] = []
    separated: list[bool] = []  # per open bracket: it holds an element-level comma
    # (row, col, open brackets) after a comma or ")"
    cut: tuple[int, int, tuple[str, ...]] | None = None
    first: str | None = None  # first token of the current logical line
    line_start = 1
    last = ""  # last significant token of the current logical line
    pending_header: _Block | None = None
    fstrings = 0
    try:
        for kind, value, start, end, _ in _tokens(text):
            if kind == tokenize.ENDMARKER:
                break
            if kind == tokenize.INDENT:
                if pending_header is not None:
                    stack.append(pending_header)
                    pending_header = None
                continue
            if kind == tokenize.DEDENT:
                if start[0] > len(lines):
                    break  # the tokenizer closing blocks at the end of the text
                if stack:
                    stack.pop()
                continue
            if kind in (tokenize.NL, tokenize.COMMENT):
                continue
            if kind == tokenize.NEWLINE:
                if partial and start[0] == len(lines):
                    break  # the tokenizer ending the unfinished last line: it has not ended
                if last == ":" and first in _HEADERS:
                    pending_header = _Block(first, _indent(lines[line_start - 1]))
                blocks, header = list(stack), pending_header
                first, last, cut = None, "", None
                continue
            if first is None:
                first, line_start = value, start[0]
                if value in _NOT_FOLLOWED and not stack and pending_header is None:
                    return None
            last = value
            if kind == _FSTRING_START:
                fstrings += 1
            elif kind == _FSTRING_END:
                fstrings -= 1
            elif kind == tokenize.OP and not fstrings:
                if value in _OPEN:
                    brackets.append(value)
                    separated.append(False)
                elif value in (")", "]", "}") and brackets:
                    brackets.pop()
                    separated.pop()
                    if at_paren and value == ")" and (not separated or separated[-1]):
                        cut = (end[0], end[1], tuple(brackets))
                elif value == "," and brackets:
                    separated[-1] = True
                    cut = (end[0], end[1], tuple(brackets))
    except (tokenize.TokenError, SyntaxError):
        pass  # text ending inside brackets or a string: what came before stands
    if first is None:
        # The text ends between logical lines (or on a line with no token yet): close the
        # open blocks after the last complete line.
        if partial:
            text, lines = text[: len(text) - len(lines[-1])], lines[:-1]
        return _closed(text, blocks, header), _end(lines)
    if cut is None:
        return None  # nothing complete on the unfinished logical line
    row, col, open_ = cut
    prefix = "".join(lines[: row - 1]) + lines[row - 1][:col]
    closers = "".join(_OPEN[b] for b in reversed(open_))
    if first in _HEADERS and first not in ("else", "try", "finally"):
        # A header continued over lines: end it, and give it a body.
        closers += ":"
        header = _Block(first, _indent(lines[line_start - 1]))
    else:
        header = None
    return _closed(prefix + closers + "\n", stack, header), (
        row,
        len(lines[row - 1][:col].encode()),
    )


def _closed(text: str, blocks: list[_Block], header: _Block | None) -> str:
    """``text`` with every open block ended: a header waiting for a body gets one, and a
    ``try`` still in its body gets a ``finally``."""
    parts = [text]
    if header is not None:
        inner = header.indent + " "
        if header.keyword == "match":
            parts.append(f"{inner}case _:\n{inner} pass\n")
        else:
            parts.append(f"{inner}pass\n")
        if header.keyword == "try":
            parts.append(f"{header.indent}finally:\n{inner}pass\n")
    for block in reversed(blocks):
        if block.keyword == "try":
            parts.append(f"{block.indent}finally:\n{block.indent} pass\n")
    return "".join(parts)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t\x0c"))]


def _end(lines: list[str]) -> tuple[int, int]:
    """(line, UTF-8 column) just past the text's last character."""
    if not lines:
        return (1, 0)
    return (len(lines), len(lines[-1].encode()))
