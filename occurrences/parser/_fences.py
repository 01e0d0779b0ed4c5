"""Streaming extraction of the code in a model's markdown answer.

Models wrap code actions in fences with prose around them. ``FenceExtractor`` turns the
markdown stream into the text of its first Python code block as it arrives, so the prefix
parser sees code while the model is still writing it.

Fences follow CommonMark: an opener is up to 3 spaces, then at least 3 backticks or tildes,
then an info string (a backtick fence's info string has no backtick); the closer is the same
character, at least as many, then only spaces or tabs; each content line loses up to the
opener's indentation; a block never closed runs to the end of the stream. Blocks in other
languages are skipped whole, so a ```` ```python ```` line quoted inside one does not open
anything. A block whose info string's first word is ``python``, ``py``, ``python3`` or
``py3`` (any case) is a Python block; ``block`` selects which one is the code: an index
from 0 (the default, the first) or ``"last"``. The Python blocks before the selected one
are skipped like other languages'. ``"last"`` is only known at the end of the stream, so
with it ``feed`` holds every Python block back and ``close`` returns the last one.

After ``close``, ``found`` says whether the selected block was there at all and ``cut``
whether it was still open (no closing fence) when the stream ended; ``complete`` turns
true as soon as the selected block's closing fence arrives (never, with ``"last"``).

Two decisions beyond CommonMark:

* ``lenient`` (the default) accepts openers and closers at any indentation, because models
  often indent fences by 4 spaces inside list items (strict CommonMark would read that as
  an indented code block holding literal backticks).
* A bare fence (no info string) is *not* Python by default: answers use bare blocks for
  output, shell sessions and data as often as for code, and the choice must be made when
  the opener arrives. ``bare=True`` accepts it for models prompted to use bare fences.

Text is held back only while it can still change meaning: a line before the block until
it ends (it may be the opener), and a code line only while it could still be the closer.
"""

from __future__ import annotations

import enum
import re
from typing import Final, Literal

_EOL = re.compile(r"\r\n|\r|\n")
_STRICT_OPENER = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_LENIENT_OPENER = re.compile(r"([ \t]*)(`{3,}|~{3,})(.*)")
PYTHON_INFO: Final = frozenset({"python", "py", "python3", "py3"})
"""Info-string first words (lower-cased) that mark a Python block."""


class _State(enum.Enum):
    SEEKING = "seeking"  # before the code block; lines are prose or other blocks' openers
    SKIPPING = "skipping"  # inside a block in another language
    CODE = "code"  # inside the Python block
    DONE = "done"  # the Python block closed; later text is ignored
    CLOSED = "closed"  # close() ran


class FenceExtractor:
    """Feeds markdown (or raw code) in, gives code text out, incrementally.

    ``mode="markdown"`` extracts the first Python fenced block; ``mode="raw"`` passes
    text through unchanged (for models that emit bare code). The concatenation of every
    ``feed`` result and the ``close`` result is the block's code, whatever the chunking.
    """

    __slots__ = (
        "_bare",
        "_block",
        "_char",
        "_current",
        "_cut",
        "_found",
        "_indent",
        "_last",
        "_length",
        "_lenient",
        "_passing",
        "_pending",
        "_raw",
        "_seen",
        "_state",
    )

    def __init__(
        self,
        mode: Literal["markdown", "raw"] = "markdown",
        *,
        lenient: bool = True,
        bare: bool = False,
        block: int | Literal["last"] = 0,
    ) -> None:
        if mode not in ("markdown", "raw"):
            raise ValueError(f"unknown fence mode {mode!r} (expected 'markdown' or 'raw')")
        if block != "last" and not (type(block) is int and block >= 0):
            raise ValueError(f"block is an index from 0 or 'last', not {block!r}")
        self._block = block
        self._seen = 0  # Python blocks opened so far
        self._found = mode == "raw"  # the selected block has opened
        self._cut = False  # close() came inside the selected block
        self._current: list[str] | None = [] if block == "last" else None  # "last": held text
        self._last = ""  # "last": the latest Python block that closed
        self._raw = mode == "raw"
        self._lenient = lenient
        self._bare = bare
        self._state = _State.SEEKING
        self._pending = ""  # the current line's text not yet consumed (never already emitted)
        self._passing = False  # the current code line is known content: emit as it arrives
        self._char = ""  # the open fence's character (` or ~)
        self._length = 0  # the open fence's length
        self._indent = 0  # the Python block opener's indentation, removed from its lines

    @property
    def done(self) -> bool:
        """The code is complete: the block closed (later text is ignored) or close() ran."""
        return self._state is _State.DONE or self._state is _State.CLOSED

    @property
    def complete(self) -> bool:
        """The selected block's closing fence has arrived (later text is ignored)."""
        return self._state is _State.DONE

    @property
    def found(self) -> bool:
        """The selected block has opened (always true in raw mode)."""
        return self._found

    @property
    def cut(self) -> bool:
        """``close()`` came while the selected block was open: its fence never closed."""
        return self._cut

    def feed(self, text: str) -> str:
        """Add streamed text; return the code text that became available.

        Raises ``RuntimeError`` after ``close()``.
        """
        if self._state is _State.CLOSED:
            raise RuntimeError("FenceExtractor.feed() after close()")
        if self._raw:
            return text
        if self._state is _State.DONE:
            return ""
        data = self._pending + text if self._pending else text
        self._pending = ""
        out: list[str] = []
        pos = 0
        size = len(data)
        while pos < size and self._state is not _State.DONE:
            m = _EOL.search(data, pos)
            if m is None or (m.end() == size and data[-1] == "\r"):
                self._partial(data[pos:], out)
                break
            start, pos = pos, m.end()
            if self._passing:
                self._passing = False
                if self._state is _State.CODE:
                    out.append(data[start:pos])
            else:
                self._line(data[start:pos], data[start : m.start()], out)
        if self._current is not None:
            self._current.extend(out)
            return ""
        return "".join(out)

    def close(self) -> str:
        """End of stream: the rest of the code (an unclosed block runs to the end)."""
        state, self._state = self._state, _State.CLOSED
        rest, self._pending = self._pending, ""
        if self._raw or state is not _State.CODE:
            return self._last if self._current is not None else ""
        closing = bool(rest) and not self._passing and self._closes(rest.rstrip("\r"))
        self._cut = not closing
        tail = "" if closing or not rest else rest if self._passing else self._dedent(rest)
        if self._current is not None:  # "last": the block open at the end is the last one
            return "".join(self._current) + tail
        return tail

    def _partial(self, rest: str, out: list[str]) -> None:
        """An unterminated line: pass on what is surely decided, hold the rest.

        Once a line can no longer be an opener (before the block) or a closer (inside a
        block), the rest of it is passed on as it arrives: emitted inside the Python block,
        dropped elsewhere. Nothing is ever re-examined, so long lines stay linear.
        """
        held = "\r" if rest.endswith("\r") else ""  # may be half of a "\r\n"
        body = rest[: len(rest) - len(held)]
        code = self._state is _State.CODE
        if not self._passing and self._decided(body):
            self._passing = True
            if code:
                body = self._dedent(body)
        if self._passing:
            if code:
                out.append(body)
            self._pending = held
        else:
            self._pending = rest

    def _decided(self, body: str) -> bool:
        """Whether no more text on this line can make it an opener (before the block) or a
        closer (inside a block)."""
        if self._state is _State.SEEKING:
            stripped = body.lstrip(" \t")
            if not stripped:
                return False
            if stripped[0] not in "`~":
                return True
            run = len(stripped) - len(stripped.lstrip(stripped[0]))
            return run < min(3, len(stripped))  # e.g. "`code` ...": too short for a fence
        stripped = body.lstrip(" \t")
        return bool(stripped.lstrip(self._char).strip(" \t"))

    def _line(self, line: str, body: str, out: list[str]) -> None:
        state = self._state
        if state is _State.CODE:
            if self._closes(body):
                self._block_closed(out)
            else:
                out.append(self._dedent(line))
        elif state is _State.SKIPPING:
            if self._closes(body):
                self._state = _State.SEEKING
        else:
            self._open(body)

    def _open(self, body: str) -> None:
        m = (_LENIENT_OPENER if self._lenient else _STRICT_OPENER).fullmatch(body)
        if m is None:
            return
        indent, fence, info = m.groups()
        if fence[0] == "`" and "`" in info:
            return  # not an opener: inline code such as ```x``` on a prose line
        self._char, self._length = fence[0], len(fence)
        words = info.split()
        language = words[0].lower() if words else ""
        python = language in PYTHON_INFO or (self._bare and not language)
        selected = python and (self._block == "last" or self._seen == self._block)
        self._seen += python
        if selected:
            self._state = _State.CODE
            self._found = True
            self._indent = len(indent.expandtabs(4))
            if self._current is not None:
                self._current.clear()
        else:
            self._state = _State.SKIPPING

    def _block_closed(self, out: list[str]) -> None:
        """The selected block's closing fence; with "last", the block is kept and seeking goes on."""
        if self._current is None:
            self._state = _State.DONE
            return
        self._current.extend(out)
        out.clear()
        self._last = "".join(self._current)
        self._current.clear()
        self._state = _State.SEEKING

    def _closes(self, body: str) -> bool:
        stripped = body.lstrip(" \t") if self._lenient else body.lstrip(" ")
        if not self._lenient and len(body) - len(stripped) > 3:
            return False
        run = len(stripped) - len(stripped.lstrip(self._char))
        return run >= self._length and not stripped[run:].strip(" \t")

    def _dedent(self, line: str) -> str:
        """Remove up to the opener's indentation from a content line.

        Columns as CommonMark counts them (a tab advances to the next multiple of 4); a
        tab only partly removed leaves its remaining columns as spaces.
        """
        limit = self._indent
        col = i = 0
        while col < limit and i < len(line) and line[i] in " \t":
            col = col + 1 if line[i] == " " else col + 4 - col % 4
            i += 1
        return " " * (col - limit) + line[i:] if col > limit else line[i:]
