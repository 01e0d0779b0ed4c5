"""``ArgumentDecoder``: one string argument of a JSON object, decoded while the JSON streams.

Agent frameworks send a code action as the JSON arguments of a tool call
(``{"code": "x = docs.search(\\"a\\")\\n..."}``), streamed as arbitrary slices of the JSON
text. The prefix parser needs the *decoded* program as it arrives, so this module decodes the
one argument incrementally, and validates the whole document on the way, so that its output
is exactly ``json.loads(arguments)[argument]``, character for character, or it raises
``ToolArgumentsError`` (the run is then ``rejected``; nothing ran).

It follows CPython's ``json`` decoder, not just RFC 8259, where the two differ:

* whitespace is ``' \\t\\n\\r'``; ``NaN``, ``Infinity`` and ``-Infinity`` are values;
* control characters below U+0020 inside a string are errors (``strict=True``);
* ``\\uXXXX`` takes exactly four hex digits; a high surrogate escape followed by a low
  surrogate escape is one character, any other surrogate escape stays a lone surrogate;
* raw (unescaped) surrogates in the text pass through unchanged.

One deliberate difference: ``json.loads`` keeps the *last* of duplicate keys, but the first
occurrence of the argument has already been streamed into the parser, so a second
occurrence of the argument key is an error instead of a silent switch of program.

Prior art: incremental JSON tokenizers such as ``jiter``'s partial mode and ``ijson``;
those build values, this one only keeps the structure it must check (a stack of
containers) and hands out one string's characters as soon as they are decided.
"""

from __future__ import annotations

import enum
import re
from typing import Final

from ._errors import ToolArgumentsError

_WHITESPACE: Final = " \t\n\r"
_PLAIN_RUN: Final = re.compile(r'[^"\\\x00-\x1f]+')
"""Characters a JSON string takes literally (neither quote, backslash nor control)."""
_LITERAL_CHARS: Final = frozenset("0123456789+-.eEtrufalsnNIiy")
_LITERAL: Final = re.compile(
    r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|NaN|Infinity|-Infinity"
)
_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


class _S(enum.Enum):
    VALUE = "value"  # a value must start (after ':' or ',' in an array, or at the top)
    VALUE_OR_CLOSE = "value or ]"  # just after '['
    KEY_OR_CLOSE = "key or }"  # just after '{'
    KEY = "key"  # after ',' in an object
    COLON = "colon"
    AFTER = "after value"  # a value ended inside a container: ',' or the closer
    STRING = "string"
    LITERAL = "literal"  # a number, true, false, null, NaN, Infinity
    END = "end"  # the top-level object closed; only whitespace may follow


class _Role(enum.Enum):
    KEY = "key"  # a top-level key: decoded to compare with the argument name
    ARGUMENT = "argument"  # the argument's value: decoded characters are emitted
    OTHER = "other"  # any other string: checked, not kept


class ArgumentDecoder:
    """Feed slices of a tool call's JSON arguments; get the argument's decoded text out.

    The concatenation of every ``feed`` result and the ``close`` result equals
    ``json.loads(text)[argument]`` for the concatenated ``text``, whatever the slicing, or
    one of the calls raises ``ToolArgumentsError``. ``found`` tells whether the argument's
    string has started; ``complete`` whether the whole document has been read (its
    top-level object closed).
    """

    __slots__ = (
        "_argument",
        "_cursor",
        "_escape",
        "_high",
        "_in_key",
        "_key",
        "_literal",
        "_offset",
        "_role",
        "_seen",
        "_stack",
        "_state",
        "found",
    )

    def __init__(self, argument: str) -> None:
        self._argument = argument
        self._state = _S.VALUE
        self._stack: list[str] = []  # open containers, "{" or "["; [] before the top object
        self._role = _Role.OTHER  # what the current string is
        self._in_key = False  # the current string is a property name (at any depth)
        self._key: list[str] = []  # the top-level key being decoded
        self._literal: list[str] = []  # the literal being read (validated when it ends)
        self._escape: str | None = None  # inside a string: "" after "\", "uXX.." while in \u
        self._high: str | None = None  # a decoded high surrogate waiting for its low half
        self._seen = False  # the argument key has appeared at the top level
        self._offset = 0  # characters fed before the current slice
        self._cursor = 0  # the position of the character being read, for error messages
        self.found = False

    @property
    def complete(self) -> bool:
        """The top-level object has closed (only whitespace may follow)."""
        return self._state is _S.END

    def feed(self, text: str) -> str:
        """Add a slice of the JSON text; return the argument characters now decided.

        Raises ``ToolArgumentsError`` as soon as the text cannot be valid arguments.
        """
        out: list[str] = []
        pos, size = 0, len(text)
        while pos < size:
            if self._state is _S.STRING:
                pos = self._string(text, pos, out)
            else:
                self._cursor = self._offset + pos
                self._structure(text[pos])
                pos += 1
        self._offset += size
        return "".join(out)

    def close(self) -> str:
        """End of the arguments: check the document is whole and has the argument.

        Raises ``ToolArgumentsError`` for an unfinished document, a missing argument, or
        an argument that is not a string.
        """
        self._cursor = self._offset
        if self._state is not _S.END:
            raise self._error("the arguments end before the JSON is complete")
        if not self._seen:
            raise ToolArgumentsError(
                f"the tool call's arguments have no {self._argument!r} argument"
            )
        return ""

    # -- structure ------------------------------------------------------------------------

    def _structure(self, ch: str) -> None:
        state = self._state
        if state is _S.LITERAL:
            if ch in _LITERAL_CHARS:
                self._literal.append(ch)
                return
            self._end_literal()
            state = self._state
        if ch in _WHITESPACE:
            return
        if state is _S.VALUE or state is _S.VALUE_OR_CLOSE:
            if state is _S.VALUE_OR_CLOSE and ch == "]":
                self._close_container(ch)
            else:
                self._value(ch)
        elif state is _S.KEY_OR_CLOSE or state is _S.KEY:
            if ch == '"':
                self._start_string(_Role.KEY if len(self._stack) == 1 else _Role.OTHER, key=True)
            elif ch == "}" and state is _S.KEY_OR_CLOSE:
                self._close_container(ch)
            else:
                raise self._error("expected a property name in double quotes")
        elif state is _S.COLON:
            if ch != ":":
                raise self._error("expected ':'")
            self._state = _S.VALUE
        elif state is _S.AFTER:
            if ch == ",":
                self._state = _S.KEY if self._stack[-1] == "{" else _S.VALUE
            elif ch in "}]":
                self._close_container(ch)
            else:
                raise self._error("expected ',' or the end of the container")
        else:  # END
            raise self._error("extra data after the arguments object")

    def _value(self, ch: str) -> None:
        argument = self._stack == ["{"] and self._role is _Role.ARGUMENT
        if not self._stack and ch != "{":
            raise self._error("the arguments are not a JSON object")
        if argument and ch != '"':
            raise ToolArgumentsError(f"the tool call's {self._argument!r} argument is not a string")
        if ch == "{" or ch == "[":
            self._stack.append(ch)
            self._state = _S.KEY_OR_CLOSE if ch == "{" else _S.VALUE_OR_CLOSE
        elif ch == '"':
            self._start_string(_Role.ARGUMENT if argument else _Role.OTHER)
        elif ch in _LITERAL_CHARS:
            self._literal = [ch]
            self._state = _S.LITERAL
        else:
            raise self._error("expected a value")
        if not argument:
            self._role = _Role.OTHER

    def _end_literal(self) -> None:
        if _LITERAL.fullmatch("".join(self._literal)) is None:
            raise self._error(f"invalid value {''.join(self._literal)!r}")
        self._literal = []
        self._value_done()

    def _close_container(self, ch: str) -> None:
        if (self._stack[-1] == "{") != (ch == "}"):
            raise self._error(f"unexpected {ch!r}")
        self._stack.pop()
        self._value_done()

    def _value_done(self) -> None:
        self._state = _S.AFTER if self._stack else _S.END

    # -- strings --------------------------------------------------------------------------

    def _start_string(self, role: _Role, *, key: bool = False) -> None:
        self._role = role
        self._in_key = key
        self._state = _S.STRING
        if role is _Role.ARGUMENT:
            self.found = True

    def _string(self, text: str, pos: int, out: list[str]) -> int:
        """Consume string characters from ``text[pos:]``; return where the string state ended
        (or ``len(text)``)."""
        sink = (
            out if self._role is _Role.ARGUMENT else self._key if self._role is _Role.KEY else None
        )
        size = len(text)
        while pos < size:
            if self._escape is not None:
                pos = self._escaped(text, pos, sink)
                continue
            ch = text[pos]
            if self._high is not None and ch != "\\":
                self._emit(sink, self._high)
                self._high = None
            m = _PLAIN_RUN.match(text, pos)
            if m is not None:
                if sink is not None:
                    sink.append(m.group())
                pos = m.end()
                continue
            pos += 1
            if ch == "\\":
                self._escape = ""
            elif ch == '"':
                self._end_string()
                return pos
            else:
                self._cursor = self._offset + pos - 1
                raise self._error("a control character inside a string")
        return pos

    def _escaped(self, text: str, pos: int, sink: list[str] | None) -> int:
        """Continue an escape sequence (``self._escape`` holds what followed the backslash)."""
        ch = text[pos]
        escape = self._escape
        assert escape is not None
        if escape == "":
            if ch == "u":
                self._escape = "u"
                return pos + 1
            if self._high is not None:
                self._emit(sink, self._high)
                self._high = None
            if ch not in _ESCAPES:
                self._cursor = self._offset + pos
                raise self._error(f"invalid escape '\\{ch}'")
            self._emit(sink, _ESCAPES[ch])
            self._escape = None
            return pos + 1
        if ch not in _HEX:
            self._cursor = self._offset + pos
            raise self._error("invalid \\uXXXX escape")
        escape += ch
        if len(escape) < 5:
            self._escape = escape
            return pos + 1
        self._escape = None
        unit = int(escape[1:], 16)
        high, self._high = self._high, None
        if high is not None:
            if 0xDC00 <= unit <= 0xDFFF:
                self._emit(sink, chr(0x10000 + ((ord(high) - 0xD800) << 10) + (unit - 0xDC00)))
                return pos + 1
            self._emit(sink, high)
        if 0xD800 <= unit <= 0xDBFF:
            self._high = chr(unit)  # held: the next escape may be its low half
        else:
            self._emit(sink, chr(unit))
        return pos + 1

    @staticmethod
    def _emit(sink: list[str] | None, text: str) -> None:
        if sink is not None:
            sink.append(text)

    def _end_string(self) -> None:
        if self._in_key and self._role is not _Role.KEY:
            self._state = _S.COLON
            return
        if self._role is _Role.KEY:
            key = "".join(self._key)
            self._key = []
            self._state = _S.COLON
            if key == self._argument:
                if self._seen:
                    raise ToolArgumentsError(
                        f"the tool call's arguments give {self._argument!r} twice "
                        "(the first one was already being run)"
                    )
                self._seen = True
                self._role = _Role.ARGUMENT
            else:
                self._role = _Role.OTHER
            return
        self._role = _Role.OTHER
        self._value_done()

    def _error(self, problem: str) -> ToolArgumentsError:
        return ToolArgumentsError(
            f"the tool call's arguments are not valid JSON: {problem} (at character {self._cursor})"
        )
