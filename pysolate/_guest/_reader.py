"""Reading a frame's tagged values, in bounded steps.

The tagged-value half of ``_stepped`` (which reads the frame around them), on the JSON
tokens of ``_json_tokens``, in the same bounded steps.

A tagged value is read by the tagged grammar directly and built once (no JSON tree first),
with the bounds of plain data enforced as it is read (``occurrences.plain``: ``MAX_DEPTH``,
``MAX_ITEMS``, ``MAX_VALUE_ITEMS``, ``MAX_EQUAL_HASHES``; a dict's keys are checked before
the dict is built), so work and memory stay linear in the frame. With ``render`` on, the
reader also writes the value's canonical tagged text, as ``to_tagged`` + the broker's
encoder would (pieces appended to ``out``, joined or digested once per argument: no
container is built for it, so decoding a frame of many small items does not feed the
cyclic garbage collector a second tree). The common item — a short compact scalar, a
compact container head — is read by one regular-expression match.
"""

from __future__ import annotations

import hashlib
import json.decoder
import json.encoder
import re
from typing import Any

from occurrences import KEY_INLINE_CHARS, KeyPiece
from occurrences.plain import (
    INT_BOUND,
    MAX_DEPTH,
    MAX_EQUAL_HASHES,
    MAX_ITEMS,
    MAX_VALUE_ITEMS,
    NotPlain,
    Uncrossable,
    _check_text,
    _nan,
    check_keys,
    nan_text,
)

from ._json_tokens import STEP_UNITS, UNIT_CHARS, WS, TokenReader
from ._json_tokens import STRING_CHUNK as STRING_CHUNK
from ._json_tokens import Steps as Steps
from ._json_tokens import malformed as malformed

_SCALAR = re.compile(r'\["(?:([ifsy])","([^"\\\x00-\x1f]{0,512}+)"|b",(true|false)|(n)")\]([,\]]?)')
"""A compact tagged scalar whose body is at most 512 characters without an escape, and the
``,`` or ``]`` after it: what an honest Guest writes for most items."""

_CONTAINER = re.compile(r'\["([tld])",\[')
_OPEN = re.compile(WS + r"\[")
_CLOSE = re.compile(WS + r"\]")
_CANONICAL_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,40}+)")
_ESCAPE = (
    json.encoder.encode_basestring
)  # the broker's own escaping (``_compact``: ensure_ascii=False)
_HEADS = {"t": '["t",[', "l": '["l",[', "d": '["d",['}
_KINDS = {"t": "tuple", "l": "list", "d": "dict"}


class Reader(TokenReader):
    """A frame's text read from ``pos`` on (``TokenReader``), and its tagged values."""

    __slots__ = ()

    def tagged(self, depth: int, left: list[int], kind: str | None = None) -> Steps:
        """The value of the tagged value at the next token (or at ``kind``, already read), as
        ``from_tagged`` decodes it and ``to_tagged`` refuses it; its canonical text goes to
        ``out`` when rendering. ``left``: items the value may still hold."""
        if depth > MAX_DEPTH:
            raise NotPlain(f"value nested deeper than {MAX_DEPTH}")
        if kind is None:
            kind, _ = self.tok()
        if kind != "[":
            raise malformed()
        if self.tok()[0] != "s":
            raise malformed()
        tag = yield from self.string()
        kind, token = self.tok()
        if kind == "]":
            if tag == "n":
                if self.render:
                    self.out.append('["n"]')
                return None
            raise malformed()
        if kind != ",":
            raise malformed()
        kind, token = self.tok()
        value: object
        if tag == "b" and kind == "l" and token in ("true", "false"):
            value = token == "true"
            if self.render:
                self.out.append(f'["b",{token}]')
        elif kind == "s" and tag in ("i", "f", "s", "y"):
            body = yield from self.string()
            value = yield from self._scalar(tag, body, depth)
        elif kind == "[" and tag in ("t", "l", "d"):
            value = yield from self.items(tag, depth, left)
        else:
            raise malformed()
        if self.tok()[0] != "]":
            raise malformed()
        return value

    def _scalar(self, tag: str, body: str, depth: int) -> Steps:
        # An argument (depth 1) past KEY_INLINE_CHARS is keyed by its content's digest
        # (``key_piece``): its text is not needed.
        render = self.render and not (depth == 1 and len(body) > KEY_INLINE_CHARS)
        try:
            if tag == "s":
                _check_text(body)  # the broker keys what was decoded without walking it again
                if render:
                    yield from self._escaped(body)
                return body
            if tag == "i":
                self.spend(len(body) // UNIT_CHARS)
                number = int(body)
                if not -INT_BOUND < number < INT_BOUND:
                    raise Uncrossable("int with more than 4300 digits")
                if self.render:
                    digits = (
                        body if _CANONICAL_INT.fullmatch(body) and body != "-0" else str(number)
                    )
                    self.out.append(f'["i","{digits}"]')
                return number
            if tag == "f":
                real = _nan(body) if body.startswith("nan") else float.fromhex(body)
                if self.render:
                    self.out.append(f'["f","{real.hex() if real == real else nan_text(real)}"]')
                return real
            data = yield from self._hex(body)
            if render:
                canonical = len(body) == 2 * len(data) and (
                    body.islower() or body.isdigit() or not body
                )
                if canonical:
                    self.out.extend(('["y","', body, '"]'))
                else:
                    yield from self._pieces('["y","', data.hex(), '"]')
            return data
        except NotPlain:
            raise
        except (ValueError, OverflowError) as exc:  # float.fromhex past the double range
            raise malformed(str(exc)) from None

    def _escaped(self, body: str) -> Steps:
        """``["s",<body escaped as the broker's encoder escapes it>]`` into ``out``, a chunk at
        a time (escaping is per character, so the chunks' escapes join into the whole's)."""
        if len(body) <= STRING_CHUNK:
            self.out.append(f'["s",{_ESCAPE(body)}]')
            return
        self.out.append('["s","')
        for start in range(0, len(body), STRING_CHUNK):
            self.out.append(_ESCAPE(body[start : start + STRING_CHUNK])[1:-1])
            self.spend(STRING_CHUNK // UNIT_CHARS)
            if self.units >= STEP_UNITS:
                self.units = 0
                yield
        self.out.append('"]')

    def _pieces(self, head: str, body: str, tail: str) -> Steps:
        self.out.extend((head, body, tail))
        self.spend(len(body) // UNIT_CHARS)
        if self.units >= STEP_UNITS:
            self.units = 0
            yield

    def _hex(self, body: str) -> Steps:
        """``bytes.fromhex(body)``, a piece at a time when it has no whitespace."""
        if len(body) <= STRING_CHUNK or not body.isalnum():
            self.spend(len(body) // UNIT_CHARS)
            return bytes.fromhex(body)
        pieces = []
        for start in range(0, len(body), STRING_CHUNK):
            pieces.append(bytes.fromhex(body[start : start + STRING_CHUNK]))  # STRING_CHUNK is even
            self.spend(STRING_CHUNK // UNIT_CHARS)
            if self.units >= STEP_UNITS:
                self.units = 0
                yield
        return b"".join(pieces)

    def items(self, tag: str, depth: int, left: list[int]) -> Steps:
        """The tuple, list or dict whose body's ``[`` was just read (``depth``: its own)."""
        text, inner, render, out = self.text, depth + 1, self.render, self.out
        items: list[Any] = []
        if render:
            out.append(_HEADS[tag])
        if text[self.pos : self.pos + 1] == "]" or _CLOSE.match(text, self.pos):
            self.pos = text.index("]", self.pos) + 1
        else:
            while True:
                if len(items) == MAX_ITEMS:
                    raise Uncrossable(f"{_KINDS[tag]} of more than {MAX_ITEMS} items")
                left[0] -= 1
                if left[0] < 0:
                    raise Uncrossable(f"value of more than {MAX_VALUE_ITEMS} items")
                if inner > MAX_DEPTH:
                    raise NotPlain(f"value nested deeper than {MAX_DEPTH}")
                if tag == "d":
                    opened = _OPEN.match(text, self.pos)
                    if opened is None:
                        raise malformed()
                    self.pos = opened.end()
                    if render:
                        out.append("[")
                    key = self.fast() or (yield from self.general(inner, left))
                    if key[1] != ",":
                        raise malformed()
                    if render:
                        out.append(",")
                    value = self.fast() or (yield from self.general(inner, left))
                    if value[1] != "]":
                        raise malformed()
                    if render:
                        out.append("]")
                    items.append((key[0], value[0]))
                    sep = self.sep()
                else:
                    item = self.fast() or (yield from self.general(inner, left))
                    items.append(item[0])
                    sep = item[1]
                if self.units >= STEP_UNITS:
                    self.units = 0
                    yield
                if sep == "]":
                    break
                if sep != ",":
                    raise malformed()
                if render:
                    out.append(",")
        if render:
            out.append("]]")
        if tag == "t":
            return tuple(items)
        if tag == "l":
            return items
        try:
            if len(items) > MAX_EQUAL_HASHES:
                check_keys(
                    [key for key, _ in items]
                )  # colliding keys: NotPlain, refused at the call
            return dict(items)
        except TypeError as exc:  # but a list or dict as a key, which no plain value is: malformed
            raise exc if isinstance(exc, NotPlain) else malformed("unhashable dict key") from None

    def item(self, depth: int, left: list[int]) -> Steps:
        """``(value, the "," or "]" after it)`` of the item at ``pos``."""
        return self.fast() or (yield from self.general(depth, left))

    def general(self, depth: int, left: list[int]) -> Steps:
        """``tagged``'s value and the separator after it; a compact container's head and
        tail are read by one match each."""
        head = _CONTAINER.match(self.text, self.pos)
        if head is None:
            value = yield from self.tagged(depth, left)
            return value, self.sep()
        self.pos = head.end()
        self.tokens += 1
        self.units += 1
        value = yield from self.items(head.group(1), depth, left)
        if self.sep() != "]":
            raise malformed()
        return value, self.sep()

    def fast(self) -> tuple[object, str] | None:
        """``(value, the "," or "]" after it)`` of a short compact scalar at ``pos``, read by
        one match; None for anything else (``general`` reads it, with the same result)."""
        m = _SCALAR.match(self.text, self.pos)
        if m is None:
            return None
        self.pos = m.end()
        self.tokens += 1
        self.units += 1
        tag, body, flag, null, sep = m.groups()
        if not sep:
            sep = self.sep()
        render = self.render
        if null is not None:
            if render:
                self.out.append('["n"]')
            return None, sep
        if flag is not None:
            if render:
                self.out.append(f'["b",{flag}]')
            return flag == "true", sep
        try:
            if tag == "s":
                _check_text(body)
                if render:
                    self.out.append(f'["s",{_ESCAPE(body)}]')
                return body, sep
            if tag == "i":
                number = int(body)
                if render:
                    self.out.append(f'["i","{number}"]')
                return number, sep
            if tag == "f":
                real = _nan(body) if body.startswith("nan") else float.fromhex(body)
                if render:
                    self.out.append(f'["f","{real.hex() if real == real else nan_text(real)}"]')
                return real, sep
            data = bytes.fromhex(body)
            if render:
                self.out.append(f'["y","{data.hex()}"]')
            return data, sep
        except NotPlain:
            raise
        except (ValueError, OverflowError) as exc:  # float.fromhex past the double range
            raise malformed(str(exc)) from None

    # -- call keys ---------------------------------------------------------------------------

    def key_piece(self, value: object, pieces: list[str]) -> Steps:
        """The call-key text of one argument ``value`` whose canonical text is ``pieces``:
        what ``occurrences._callkey.argument_text`` makes of it, hashed a chunk at a time."""
        kind = type(value)
        if kind is int:
            return KeyPiece("".join(pieces))
        if kind is str or kind is bytes:
            body_length = len(value) if kind is str else 2 * len(value)  # type: ignore[arg-type]
            if body_length > KEY_INLINE_CHARS:
                digest = hashlib.sha256()
                for start in range(0, len(value), STRING_CHUNK):  # type: ignore[arg-type]
                    chunk = value[start : start + STRING_CHUNK]  # type: ignore[index]
                    digest.update(
                        chunk.encode("utf-8") if kind is str else chunk.hex().encode("ascii")
                    )
                    self.spend(STRING_CHUNK // UNIT_CHARS)
                    if self.units >= STEP_UNITS:
                        self.units = 0
                        yield
                tag = "s" if kind is str else "y"
                return KeyPiece(f'["#","{tag}",{body_length},"{digest.hexdigest()}"]')
        length = sum(map(len, pieces))
        if length <= KEY_INLINE_CHARS:
            return KeyPiece("".join(pieces))
        digest = hashlib.sha256()
        for piece in pieces:
            digest.update(piece.encode("utf-8"))
            self.spend(len(piece) // UNIT_CHARS + 1)
            if self.units >= STEP_UNITS:
                self.units = 0
                yield
        return KeyPiece(f'["#","",{length},"{digest.hexdigest()}"]')
