"""The exact, incremental complete-prefix parser.

While a program streams in, Pysolate needs the top-level statements that no later text can
change, as exactly the AST nodes ``ast.parse(final_source)`` will hold. Asking ``codeop``
"does this compile yet" answers a different question (``if x: a = 1`` compiles, yet an
``else`` may follow), and re-parsing the prefix per chunk is quadratic. Instead:

* ``LineScanner`` consumes each complete physical line once and says where logical lines
  end (outside strings, f-string frames, brackets and backslash continuations).
* Top-level statements are cut into *groups* at lines that begin, at column 0, a new
  logical line whose first token cannot continue the group: not ``elif``/``else``/
  ``except``/``finally``, and not anything after a decorator line. Blank and comment lines
  never cut (they join the next group when nothing precedes them). A cut is only made where
  it is certain; when in doubt (a line opening with a form feed or a backslash) lines are
  merged into the group, which is always safe.
* A group that is one column-0 logical line of simple statements is final as soon as that
  logical line has ended (its terminator has arrived outside every string, bracket and
  continuation): after the NEWLINE token nothing can join it. An indented line would be an
  ``unexpected indent`` of the whole source, a continuation keyword a syntax error, a string
  on the next line is a statement of its own (implicit concatenation needs a bracket).
  Headers of compound statements (``if``, ``def``, ..., and ``match`` when it is one) and
  decorators still need their next line; a trailing ``\r`` still waits for a possible ``\n``.
* Each finished group is parsed once with ``ast.parse`` on its own text, at its line
  (``_lines.parse_at``). Groups start at line starts, so columns (UTF-8 byte offsets
  within a line) need no shift. The last group is only parsed at ``close()`` unless it is
  simple and complete.

If any group fails to parse, the whole source cannot parse either: the parser stops
producing snapshots, and ``close()`` parses the whole source once to raise CPython's exact
error. The same single whole-source parse settles any other doubt at the end of the stream
(text ending inside a string, a bracket or a continuation).

Warnings the compiler emits while parsing groups (``SyntaxWarning`` for invalid escapes)
are suppressed: their line numbers would be group-relative, and the Guest compiles the
sealed source itself, where they surface correctly.
"""

from __future__ import annotations

import ast
import enum
import re
from dataclasses import dataclass
from typing import Final

from .._exceptions import SealError
from ..depth import LIMIT_ERRORS
from ._lines import parse_at
from ._pending import Pending, pending
from ._scanner import LineScanner
from ._snapshot import Snapshot

_EOL = re.compile(r"\r\n|\r|\n")
_WORD = re.compile(r"\w*")
_EXIT = re.compile(r"\b(?:break|continue|return|raise)\b")
"""A line that may leave a loop or the program: it can end what encloses earlier calls
(``break`` after a loop's call leaves the later iterations unreachable), so it is parsed
provisionally though it brings no ``)`` (in a string or comment it only costs a parse)."""
_CONTINUATIONS: Final = ("elif", "else", "except", "finally")
_HEADERS: Final = frozenset({"if", "for", "while", "with", "try", "def", "class", "async"})
"""First tokens of a column-0 logical line that is a compound statement's header (never
final at its newline). ``match`` may be one too: it is tried, and waits if it is not simple."""
_COMPOUND: Final = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Match,
    *((ast.TryStar,) if hasattr(ast, "TryStar") else ()),
)
_BLANK: Final = " \t\x0c"
_NOT_A_CUT: Final = frozenset(" \t\x0c\\#\r\n")
"""First characters of a line that never start a new group: indentation (a form feed can
reset the column to 0, so it is treated as indentation too), a backslash continuation inside
indentation, comments and blank lines."""


@dataclass(frozen=True, slots=True)
class ParserStatistics:
    """What a ``PrefixParser`` has done so far (for tests and benchmarks)."""

    statements: int  # accepted statements
    groups: int  # groups parsed on their own (each exactly once)
    at_newline: int  # of those, simple groups accepted as soon as their logical line ended
    whole_parses: int  # 1 when close() had to parse the whole source (error or doubt), else 0


class _Phase(enum.Enum):
    OPEN = "open"  # accepting text and producing snapshots
    DOOMED = "doomed"  # some group failed to parse: the final source cannot parse
    CLOSED = "closed"  # sealed; no more text


class PrefixParser:
    """Turns streamed source text into growing snapshots of final top-level statements.

    ``feed`` costs time proportional to its text plus one ``ast.parse`` of each group it
    finishes; nothing is rescanned. ``close`` parses the last group, or, when the stream is
    in error or in doubt, the whole source once.
    """

    __slots__ = (
        "_after_decorator",
        "_at_newline",
        "_candidate",
        "_changed",
        "_code",
        "_decided",
        "_end",
        "_exit_at",
        "_found",
        "_group",
        "_group_len",
        "_group_line",
        "_groups",
        "_last_pending",
        "_parts",
        "_pending_at",
        "_phase",
        "_scanner",
        "_start",
        "_statements",
        "_tail",
        "_whole_parses",
    )

    def __init__(self) -> None:
        self._parts: list[str] = []  # every fed chunk; joined (and compacted) on demand
        self._phase = _Phase.OPEN
        self._scanner = LineScanner()
        self._tail: list[str] = []  # the current physical line, not yet terminated
        self._decided = False  # the tail line's group decision is made
        self._group: list[str] = []  # complete lines of the unfinished group
        self._group_len = 0  # characters in _group
        self._group_line = 1  # 1-based line number where the unfinished group starts
        self._after_decorator = False  # the group's last column-0 logical line began with '@'
        self._code = False  # the unfinished group holds a line that is not blank or a comment
        # The logical line being scanned starts a new group at column 0 (at _group[_start],
        # after blank or comment lines) and may be simple statements: try it at its end.
        self._candidate = False
        self._start = 0
        self._at_newline = 0  # groups accepted at the end of their logical line
        self._pending_at = (
            0,
            0,
            0,
        )  # (group line, complete lines, tail used) of the last pending() parse
        self._changed = False  # feed() changed what pending() reads since it last looked
        # (group line, ")" in the text it used, complete lines it used) of the last provisional parse found
        self._found = (0, 0, 0)
        # the last provisional parse found, of group ``_found[0]``
        self._last_pending: Pending | None = None
        self._exit_at = (0, 0)  # (group line, complete lines) up to the group's last ``_EXIT`` line
        self._statements: list[ast.stmt] = []  # accepted statements; append-only
        self._end = 0  # characters covered by _statements (the groups parsed so far)
        self._groups = 0  # groups parsed successfully
        self._whole_parses = 0  # whole-source parses at close (errors and doubt)

    @property
    def source(self) -> str:
        """All text fed so far."""
        parts = self._parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0] if parts else ""

    @property
    def closed(self) -> bool:
        return self._phase is _Phase.CLOSED

    def statistics(self) -> ParserStatistics:
        """Counters for tests and benchmarks."""
        return ParserStatistics(
            statements=len(self._statements),
            groups=self._groups,
            at_newline=self._at_newline,
            whole_parses=self._whole_parses,
        )

    def feed(self, text: str) -> Snapshot | None:
        """Add streamed text; return a new snapshot if the accepted prefix grew.

        Raises ``RuntimeError`` after ``close()``. Never raises for bad source: errors are
        reported by ``close()``.
        """
        if self._phase is not _Phase.OPEN:
            if self._phase is _Phase.CLOSED:
                raise RuntimeError("PrefixParser.feed() after close()")
            self._parts.append(text)
            return None
        if not text:
            return None
        self._parts.append(text)
        if "\0" in text:
            self._phase = _Phase.DOOMED  # CPython rejects any source holding a NUL
            return None
        tail = self._tail
        before = len(self._statements)
        if "\n" in text or "\r" in text or (tail and tail[-1][-1] == "\r"):
            self._changed = True
            self._lines("".join(tail) + text if tail else text)
            if not self._decided and tail and self._phase is _Phase.OPEN:
                self._decide_tail()
        else:
            tail.append(text)  # the common case: text inside one line
            if self._decided:
                # Only a "," or ")" moves the furthest cut pending() takes from the tail.
                if "," in text or ")" in text:
                    self._changed = True
                return None
            self._changed = True
            self._decide_tail()
        if len(self._statements) == before:
            return None
        return Snapshot.view(self._statements, before, self._end, self._source_text)

    def pending(self, *, at_paren: bool = True) -> Pending | None:
        """A provisional parse of the unfinished statement (``occurrences.parser._pending``), when
        it gained complete lines, or its unfinished line a ``,`` or ``)``, since the last call;
        None otherwise, or when nothing can be taken from it. For discovery only: none of it
        is accepted, and it may change.

        The unfinished line counts once it is known to belong to the group (``_decided``: a
        column-0 ``e``... may still become ``else``). Its last ``,`` or ``)`` marks the furthest
        cut it can offer, so text streaming inside an element costs no re-parse.
        ``at_paren=False``: a ``)`` is no cut (see ``_pending``).

        Two cheap refusals keep the per-chunk cost low. Text that streamed inside an element
        (no line end, ``,`` or ``)``) changes nothing here, so it is not even looked at. And
        a call is complete only at its ``)``: when the text holds no ``)`` beyond those of the
        model's text the last provisional parse of this group used (up to its ``limit``),
        every call it could offer ends there, so that parse already offered it, at the same
        position. Such text (a header, ``else:``, a plain assignment, a ``,`` after a literal)
        is not parsed again, and that parse's occurrences stay. What it could still change
        is only how those calls are enclosed (a rebinding in a loop body), which
        provisional occurrences never promise: they are discardable early work, claimed
        only by exact key. The exception is a complete line that may leave (``_EXIT``: a
        ``break`` after a loop's calls): it is parsed, so that the work it makes
        unreachable (the later iterations) is released at once (``EventGraph``).
        """
        if self._phase is not _Phase.OPEN or not self._changed:
            return None
        self._changed = False
        tail = "".join(self._tail) if self._decided else ""
        if len(self._tail) > 1:
            self._tail[:] = [tail]
        mark = max(tail.rfind(","), tail.rfind(")"))
        if (
            mark < 0
            or self._group_len + mark >= MAX_TAIL_PENDING_CHARS
            or not _ends_a_call(tail, mark)
        ):
            mark = -1  # the tail offers nothing a complete line would not offer sooner or as well
        tail = tail[: mark + 1]
        at = (self._group_line, len(self._group), len(tail))
        if at == self._pending_at or not (self._code or tail.strip(_BLANK)):
            return None
        self._pending_at = at
        text = "".join(self._group) + tail
        parens = text.count(")")  # also those in strings and comments: never too few
        line, seen, used = self._found
        if line != self._group_line:
            seen = used = 0
        exits = self._exit_at[1] if self._exit_at[0] == self._group_line else 0
        if parens <= seen and exits <= used:
            return None
        reuse = self._last_pending if line == self._group_line else None
        found = pending(text, at_paren=at_paren, line=self._group_line, reuse=reuse)
        if found is not None:
            self._last_pending = found
            row, col = found.limit
            self._found = (
                self._group_line,
                _parens_before(text, (row - self._group_line + 1, col)),
                len(self._group),
            )
        return found

    def close(self) -> Snapshot:
        """Seal the stream: the whole source's statements, exactly as ``ast.parse`` gives them.

        Raises ``SealError`` (a ``SyntaxError`` with CPython's message and position) when
        the whole source does not parse, and ``RuntimeError`` if already closed.
        """
        if self._phase is _Phase.CLOSED:
            raise RuntimeError("PrefixParser.close() called twice")
        doomed = self._phase is _Phase.DOOMED
        self._phase = _Phase.CLOSED
        before = len(self._statements)
        if not doomed:
            last = "".join(self._tail)
            self._tail.clear()
            if last:
                self._scanner.scan(last)
                self._group.append(last)
                self._group_len += len(last)
            if self._scanner.between and self._parse_group():
                return Snapshot.view(self._statements, before, self._end, self._source_text)
        return self._whole(before)

    def _source_text(self) -> str:
        return self.source

    def _whole(self, accepted: int) -> Snapshot:
        """Parse the whole source once: the exact error, or (should the scanner ever be in
        doubt on valid source) the exact statements, the first ``accepted`` of which were
        already reported."""
        self._whole_parses += 1
        source = self.source
        try:
            module = _parse(source)
        except SyntaxError as exc:
            raise SealError.from_syntax_error(exc) from exc
        except LIMIT_ERRORS as exc:  # nested past CPython's limits: its verdict, at a fixed depth
            raise SealError.from_limit(exc) from exc
        except (ValueError, UnicodeError) as exc:
            # NUL bytes (a ValueError on some 3.11 releases) and lone surrogates.
            raise SealError(str(exc)) from exc
        self._statements = list(module.body)  # a new list: earlier snapshots keep theirs
        self._end = len(source)
        return Snapshot(module.body, source, min(accepted, len(module.body)))

    def _lines(self, text: str) -> None:
        """Consume every complete physical line of ``text``; keep the rest as the tail."""
        self._tail.clear()
        pos = 0
        size = len(text)
        search = _EOL.search  # not a whole-line pattern: that rescans a long tail per position
        scanner = self._scanner
        while (m := search(text, pos)) is not None:
            end = m.end()
            if end == size and text[-1] == "\r":
                break  # may be half of a "\r\n" split across chunks
            line = text[pos:end]
            if not self._decided and scanner.between:
                self._decide(line, complete=True)
                if self._phase is not _Phase.OPEN:
                    return
            self._group.append(line)
            self._group_len += end - pos
            if _EXIT.search(line) is not None:
                self._exit_at = (self._group_line, len(self._group))
            if not self._code and line.lstrip(_BLANK)[:1] not in ("", "#", "\r", "\n"):
                self._code = True
            scanner.scan(line)
            between = scanner.between
            self._decided = not between  # only logical-line starts need a decision
            if between and self._candidate:
                self._candidate = False
                self._accept_simple()
                if self._phase is not _Phase.OPEN:
                    return
            pos = end
        if pos < size:
            self._tail.append(text[pos:])

    def _decide_tail(self) -> None:
        head = "".join(self._tail)
        if len(self._tail) > 1:
            self._tail[:] = [head]
        self._decide(head[:9], complete=False)

    def _decide(self, head: str, complete: bool) -> None:
        """Decide whether the line starting with ``head`` starts a new group.

        Called only at the start of a logical line. Leaves ``_decided`` false when the
        first token is still a possible prefix of a continuation keyword.
        """
        first = head[0]
        if first in _NOT_A_CUT:
            self._decided = True
            return
        if self._after_decorator:
            continues = True
        elif first == "e" or first == "f":
            word = _WORD.match(head)
            assert word is not None
            token = word.group()
            if word.end() == len(head) and not complete:
                if any(k.startswith(token) for k in _CONTINUATIONS):
                    return  # the first token may still become a continuation keyword
                continues = False
            else:
                continues = token in _CONTINUATIONS
        else:
            continues = False
        self._decided = True
        self._after_decorator = first == "@"
        if not continues and self._code:
            self._parse_group()
        self._candidate = not continues and first != "@"
        self._start = len(self._group)

    def _accept_simple(self) -> None:
        """The candidate logical line has ended: accept its group now if it is simple
        statements (see the module docstring); a compound header waits for its cut."""
        line = self._group[self._start]
        word = _WORD.match(line)
        assert word is not None
        token = word.group()
        if token in _HEADERS:
            return
        try:
            module = parse_at("".join(self._group), self._group_line)
        except Exception:
            if token != "match":
                # Nothing later can join a complete simple line: the source cannot parse.
                self._phase = _Phase.DOOMED
            return
        if any(isinstance(s, _COMPOUND) for s in module.body):
            return
        self._accept(module.body)
        self._at_newline += 1

    def _parse_group(self) -> bool:
        """Parse the finished group and accept its statements; on failure, doom the stream."""
        text = "".join(self._group)
        try:
            module = parse_at(text, self._group_line)
        except Exception:
            self._phase = _Phase.DOOMED
            return False
        self._accept(module.body)
        return True

    def _accept(self, body: list[ast.stmt]) -> None:
        """Accept the statements of the finished group (parsed at its line: ``parse_at``)."""
        self._statements.extend(body)
        self._groups += 1
        self._end += self._group_len
        self._group_line += len(self._group)
        self._group.clear()
        self._group_len = 0
        self._code = False


MAX_TAIL_PENDING_CHARS: Final = 4_000
"""Longest unfinished statement whose line still streaming is parsed provisionally (at a
``,`` or ``)``: several times per line). Longer ones are parsed at their line ends only,
which bounds the re-parsing (about 3 ms per parse at 4,000 characters)."""


def _parens_before(text: str, limit: tuple[int, int]) -> int:
    """How many ``)`` ``text`` holds before ``limit`` (line, UTF-8 column; lines end as the
    tokenizer ends them)."""
    row, col = limit
    start = _line_start(text, row)
    # (A lone surrogate after the limit is no error here: the source will not compile.)
    return text.count(")", 0, start) + text[start:].encode("utf-8", "surrogatepass")[:col].count(
        b")"
    )


def _line_start(text: str, row: int) -> int:
    """Where line ``row`` (1-based) of ``text`` starts. The limit is on one of the last
    lines, so without ``\r`` it is found from the end, in time for those lines only (a long
    block's every line was a walk over all its lines before)."""
    if row <= 1:
        return 0
    if "\r" not in text:
        back = text.count("\n") - (row - 1)  # line ends after the one that starts ``row``
        if back < 0:
            return len(text)
        end = len(text)
        for _ in range(back + 1):
            end = text.rfind("\n", 0, end)
        return end + 1
    for number, m in enumerate(_EOL.finditer(text), 2):
        if number == row:
            return m.end()
    return len(text)


def _ends_a_call(tail: str, mark: int) -> bool:
    """Whether the ``,`` or ``)`` at ``mark`` may end a call: a ``)``, or a ``,`` right
    after one (``1,`` or ``x,`` completes no call, so re-parsing for it would find nothing new)."""
    return tail[mark] == ")" or tail[:mark].rstrip(_BLANK).endswith(")")


def _parse(source: str) -> ast.Module:
    """The whole source, parsed (``parse_at`` its first line)."""
    return parse_at(source, 1)
