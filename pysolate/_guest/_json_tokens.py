"""Reading a frame's JSON text a token at a time, in bounded steps: tokens and strings.

The JSON half of ``_reader`` (which reads the tagged values built of these tokens). Every
method that can take long is a generator that stops every ``STEP_UNITS`` units of work (a
token, or ``UNIT_CHARS`` characters of a string) so the caller can let the event loop run;
a long string is decoded ``STRING_CHUNK`` characters at a time by the C scanner, cut where
no escape spans the cut, so the work stays linear in the frame.
"""

from __future__ import annotations

import json.decoder
import re
from collections.abc import Generator
from typing import Any

from ._frames import ProtocolViolation

STEP_UNITS = 2048
"""Work between two chances for the loop to run: about a millisecond."""

UNIT_CHARS = 32
"""Characters of a string (or digits of an int) that count as one unit of work."""

STRING_CHUNK = 64 * 1024
"""Characters of one string (or hex digits of bytes) decoded, escaped or hashed at once."""

Steps = Generator[None, None, Any]

WS = r"[ \t\n\r]*+"
"""JSON's white space, possessively (a pattern prefix)."""
_TOKEN = re.compile(
    WS
    + r"(?:([\[\]{},:])|(\")|(-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][-+]?+[0-9]++)?+)|(true|false|null|NaN|Infinity|-Infinity))"
)
"""One JSON token: punctuation, a string's opening quote, a number, a literal (what the C
scanner accepts: ASCII digits, ``NaN`` and the infinities too)."""

_SPECIAL = re.compile(r'["\\\x00-\x1f]')
"""What ends a string's plain run: its closing quote, an escape, a control character."""

_SEP = re.compile(WS + r"([,\]])")

_UNITS = re.compile(
    r'(?:[^"\\\x00-\x1f]++|\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|["\\/bfnrt]))*+'
)
"""Whole pieces of a string's JSON text: plain runs and escapes (a surrogate pair as one)."""

_HIGH = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
_LOW = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_SCAN = json.decoder.scanstring  # type: ignore[attr-defined]  # the C scanstring, as json.loads uses it


def malformed(what: str = "") -> ProtocolViolation:
    return ProtocolViolation(f"malformed plain value{': ' + what if what else ''}")


class TokenReader:
    """A frame's JSON text read from ``pos`` on. ``tokens`` counts the work done (tests read
    it); ``out`` collects canonical text pieces while ``render`` is on (``_reader``)."""

    __slots__ = ("controls", "out", "pos", "render", "text", "tokens", "units")

    def __init__(self, text: str, controls: bool = True) -> None:
        self.text = text
        # the text may hold a control character (else strings need no check for one)
        self.controls = controls
        self.pos = 0
        self.units = 0  # work since the last step
        self.tokens = 0  # work in all
        self.render = False
        self.out: list[str] = []

    def tok(self) -> tuple[str, str | None]:
        """The next token: its punctuation, ``"s"`` (a string follows: ``string``), ``"n"``
        and a number's text, or ``"l"`` and a literal. ``ProtocolViolation`` otherwise."""
        m = _TOKEN.match(self.text, self.pos)
        if m is None:
            raise ProtocolViolation("frame is not JSON")
        self.pos = m.end()
        self.tokens += 1
        self.units += 1
        punct, quote, number, literal = m.groups()
        if punct is not None:
            return punct, None
        if quote is not None:
            return "s", None
        if number is not None:
            return "n", number
        return "l", literal

    def spend(self, units: int) -> None:
        self.units += units
        self.tokens += units

    def string(self) -> Steps:
        """The string whose opening quote was just read, as ``json`` decodes it."""
        text, start = self.text, self.pos
        pos, size = start, len(text)
        if (
            not self.controls
        ):  # no control character anywhere: the quote and a backslash, found in C
            quote = text.find('"', pos)
            if quote < 0:
                raise ProtocolViolation("frame is not JSON: a string does not end")
            backslash = text.find("\\", pos, quote)
            self.spend((quote - pos) // (8 * UNIT_CHARS))
            if backslash < 0:
                self.pos = quote + 1
                return text[start:quote]
            pos = backslash
        while True:
            end = min(size, pos + STRING_CHUNK)
            m = _SPECIAL.search(text, pos, end)
            if m is not None:
                break
            if end == size:
                raise ProtocolViolation("frame is not JSON: a string does not end")
            pos = end
            self.spend(STRING_CHUNK // UNIT_CHARS)
            if self.units >= STEP_UNITS:
                self.units = 0
                yield
        i = m.start()
        self.spend((i - pos) // UNIT_CHARS)
        if text[i] == '"':
            self.pos = i + 1
            return text[start:i]
        if text[i] != "\\":
            raise ProtocolViolation("frame is not JSON: a control character in a string")
        pieces: list[str] = [text[start:i]]
        a = i
        while True:
            cut = _clean_cut(text, a)
            try:
                if cut < 0:
                    value, end = _SCAN(text, a, True)
                    pieces.append(value)
                    self.spend((end - a) // UNIT_CHARS)
                    self.pos = end
                    return "".join(pieces)
                value, end = _SCAN(text[a:cut] + '"', 0, True)
            except ValueError:
                raise ProtocolViolation("frame is not JSON: a bad string") from None
            pieces.append(value)
            if end != cut - a + 1:  # the string ended inside this piece
                self.pos = a + end
                return "".join(pieces)
            a = cut
            self.spend(STRING_CHUNK // UNIT_CHARS)
            if self.units >= STEP_UNITS:
                self.units = 0
                yield

    def sep(self) -> str:
        """The ``,`` or ``]`` after an item."""
        pos = self.pos
        c = self.text[pos : pos + 1]
        if c == "," or c == "]":
            self.pos = pos + 1
        else:
            m = _SEP.match(self.text, pos)
            if m is None:
                raise malformed()
            self.pos = m.end()
            c = m.group(1)
        self.tokens += 1
        self.units += 1
        return c


def _clean_cut(text: str, start: int) -> int:
    """A position about ``STRING_CHUNK`` past ``start`` (where a string's escapes are read
    from) that no escape spans, a surrogate pair's two halves kept together; -1 when the
    rest of the string is short (it is decoded in one piece)."""
    target = start + STRING_CHUNK
    if target >= len(text):
        return -1
    end = _UNITS.match(text, start, target).end()  # type: ignore[union-attr]  # matches the empty string
    if end == start:
        return -1  # the string ends here, or is malformed: one piece says which
    high = end - 6
    if high >= start and _HIGH.fullmatch(text, high, end) and _LOW.match(text, end):
        # A pair that straddles ``target`` was read as its high half: cut before that half,
        # if it is an escape (an even run of backslashes before it, counted from ``start``,
        # which is an escape's boundary).
        run = high
        while run > start and text[run - 1] == "\\":
            run -= 1
        if (high - run) % 2 == 0:
            end = high
    return end if end > start else -1
