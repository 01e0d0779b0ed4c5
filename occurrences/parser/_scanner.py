"""A resumable lexical scanner that tells where CPython's logical lines end.

The prefix parser needs one fact per physical line: after this line, is the tokenizer
*between* logical lines (outside every string, bracket and backslash continuation)? Python's
``tokenize`` cannot answer it incrementally (it pulls lines and treats ``""`` as EOF, and its
3.11 and 3.12+ versions disagree on partial input), and re-tokenizing the unfinished tail on
every chunk is quadratic. So this scanner keeps the little state that matters and consumes
each complete physical line exactly once, jumping between the few characters that can
change the state with precompiled regular expressions.

It models the C tokenizer only as far as *valid* source needs: on invalid source it may
disagree with CPython, which is harmless because the parser then fails to parse a group and
falls back to one ``ast.parse`` of the whole source for the exact error.

Python 3.12+ (PEP 701) lexes f-strings as nested frames: a replacement field is code (it
may hold any quote, comments, and newlines even in a single-quoted f-string), and a format
spec is literal text in which ``{`` always opens a nested field. Before 3.12 an f-string is
an ordinary string token, which is how this scanner treats it there.
"""

from __future__ import annotations

import re
import sys
from typing import Final

PEP701: Final = sys.version_info >= (3, 12)
"""Whether f-strings are lexed as nested frames (3.12+) rather than as one string token."""

_CODE = re.compile(r"[\"'#\\()\[\]{}]")
_FIELD = re.compile(r"[\"'#\\()\[\]{}:]")
_PREFIXES: Final = frozenset({"", "r", "u", "b", "br", "rb", "f", "fr", "rf"})
_TERMINATORS: Final = frozenset({"\n", "\r\n", "\r"})

# Modes of the context stack (the base code mode is the empty stack).
_STR, _FSTR, _FIELD_MODE, _SPEC = range(4)


def _body_pattern(quote: str, triple: bool, fstring: bool) -> re.Pattern[str]:
    """Characters that can end or escape inside a string body of this kind."""
    chars = "\\\\" + quote + ("{}" if fstring else "") + ("" if triple else "\r\n")
    return re.compile(f"[{chars}]")


_BODY: Final = {
    (q, t, f): _body_pattern(q, t, f) for q in "'\"" for t in (False, True) for f in (False, True)
}


class _Context:
    """One open string, f-string literal, replacement field or format spec."""

    __slots__ = ("depth", "fstring", "kind", "pattern", "quote", "raw", "triple")

    def __init__(self, kind: int, quote: str = "", triple: bool = False, raw: bool = False) -> None:
        self.kind = kind
        self.quote = quote
        self.triple = triple
        self.raw = raw
        self.fstring = kind in (_FSTR, _SPEC)
        self.depth = 0  # brackets opened inside a replacement field (kind _FIELD_MODE only)
        self.pattern = _BODY[(quote or "'", triple, self.fstring)]


class LineScanner:
    """Consumes complete physical lines; reports whether a logical line has just ended.

    ``between`` is true when the next character starts a new logical line: no string,
    f-string frame or bracket is open and the last line did not end in a backslash
    continuation. At the end of the stream, false means the text stops inside a token or
    a logical line, which CPython rejects.
    """

    __slots__ = ("_continued", "_depth", "_stack")

    def __init__(self) -> None:
        self._depth = 0  # open brackets in base code mode; never negative
        self._stack: list[_Context] = []  # innermost open context last
        self._continued = False  # the last line ended in a backslash continuation

    @property
    def between(self) -> bool:
        return not self._stack and self._depth == 0 and not self._continued

    def scan(self, line: str) -> None:
        """Advance over one physical line (with its terminator, unless it is the last)."""
        self._continued = False
        pos = 0
        end = len(line)
        stack = self._stack
        while pos < end:
            if not stack:
                pos = self._code(line, pos, None)
                continue
            top = stack[-1]
            if top.kind == _FIELD_MODE:
                pos = self._code(line, pos, top)
            else:
                pos = self._string(line, pos, top)

    def _code(self, line: str, pos: int, field: _Context | None) -> int:
        m = (_FIELD if field is not None else _CODE).search(line, pos)
        if m is None:
            return len(line)
        i = m.start()
        c = line[i]
        if c == '"' or c == "'":
            return self._open_string(line, i, c)
        if c == "#":
            return len(line)
        if c == "\\":
            if line[i + 1 :] in _TERMINATORS:
                self._continued = field is None
                return len(line)
            return i + 1
        if c in "([{":
            if field is None:
                self._depth += 1
            else:
                field.depth += 1
            return i + 1
        if field is None:
            if self._depth:
                self._depth -= 1
            return i + 1
        if field.depth:
            if c != ":":
                field.depth -= 1
        elif c == ":":
            # A top-level ':' in a replacement field starts its format spec.
            self._stack[-1] = _Context(_SPEC, self._frame().quote, self._frame().triple)
        elif c == "}":
            self._stack.pop()
        return i + 1

    def _frame(self) -> _Context:
        """The innermost f-string literal frame (the one whose quote ends it)."""
        for ctx in reversed(self._stack):
            if ctx.kind == _FSTR:
                return ctx
        raise AssertionError("replacement field outside an f-string")

    def _open_string(self, line: str, i: int, quote: str) -> int:
        start = i
        while start and (line[start - 1].isalnum() or line[start - 1] == "_"):
            start -= 1
        prefix = line[start:i].lower()
        if prefix not in _PREFIXES:
            prefix = ""  # a name such as ``xr`` followed by a plain string
        triple = line.startswith(quote * 3, i)
        kind = _FSTR if PEP701 and "f" in prefix else _STR
        self._stack.append(_Context(kind, quote, triple, "r" in prefix))
        return i + (3 if triple else 1)

    def _string(self, line: str, pos: int, ctx: _Context) -> int:
        """Scan inside a string, f-string literal part or format spec."""
        m = ctx.pattern.search(line, pos)
        if m is None:
            return len(line)
        i = m.start()
        c = line[i]
        if c == "\\":
            nxt = line[i + 1 : i + 2]
            if ctx.fstring and nxt in ("{", "}") and nxt:
                return i + 1  # the brace keeps its meaning after a backslash
            if ctx.kind == _FSTR and not ctx.raw and nxt == "N" and line[i + 2 : i + 3] == "{":
                close = line.find("}", i + 3)  # \N{NAME}: these braces are not a field
                return len(line) if close < 0 else close + 1
            if line.startswith("\r\n", i + 1):
                return i + 3
            return i + 2
        if c == ctx.quote:
            if not ctx.triple:
                self._close_string(ctx)
                return i + 1
            if line.startswith(c * 3, i):
                self._close_string(ctx)
                return i + 3
            return i + 1
        if c == "{":
            if ctx.kind == _FSTR and line.startswith("{", i + 1):
                return i + 2
            self._stack.append(_Context(_FIELD_MODE))
            return i + 1
        if c == "}":
            if ctx.kind == _SPEC:
                self._stack.pop()
                return i + 1
            return i + 2 if line.startswith("}", i + 1) else i + 1
        # A line terminator inside a single-quoted body.
        if ctx.kind == _SPEC:
            # 3.12+: a newline ends the format spec and resumes the field's code.
            self._stack[-1] = _Context(_FIELD_MODE)
            return i
        self._close_string(ctx)  # unterminated: CPython rejects it; the group parse will too
        return len(line)

    def _close_string(self, ctx: _Context) -> None:
        """End the string ``ctx`` belongs to (for a spec: its whole f-string)."""
        stack = self._stack
        if ctx.kind == _SPEC:
            while stack and stack[-1].kind != _FSTR:
                stack.pop()
        if stack:
            stack.pop()
