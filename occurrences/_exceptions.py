"""Exceptions of the source side.

    OccurrencesError
    └── SealError (also a SyntaxError)    the sealed source does not parse

(A stream that gives no program is the Host's business: ``pysolate.streams.StreamError``.)

``NotKnown`` is deliberately *not* in this tree: it is the argument evaluator's ordinary
"cannot compute this exactly" signal, not a failure.
"""

from __future__ import annotations


class OccurrencesError(Exception):
    """Root of every error raised by the ``occurrences`` package."""


class SealError(OccurrencesError, SyntaxError):
    """The complete source does not parse.

    Carries the same ``msg``, ``lineno``, ``offset``, ``end_lineno``, ``end_offset`` and
    ``text`` that CPython's ``ast.parse`` gives for the whole source, so callers can report
    it exactly as the interpreter would.
    """

    @classmethod
    def from_syntax_error(cls, exc: SyntaxError) -> SealError:
        err = cls(
            exc.msg,
            (exc.filename, exc.lineno, exc.offset, exc.text, exc.end_lineno, exc.end_offset),
        )
        err.__cause__ = exc
        return err

    @classmethod
    def from_limit(cls, exc: RecursionError | MemoryError) -> SealError:
        """The source is nested past CPython's parser or compiler (``parser._depth``): the
        rejection keeps CPython's own class (the cause) and message; the parser's stack
        overflow, a ``MemoryError`` without one, gets a message that says so."""
        err = cls(str(exc) or "the source is nested too deeply for CPython's parser")
        err.__cause__ = exc
        return err


class NotKnown(Exception):
    """The evaluator cannot compute a value exactly in the Host (unknown, unsafe or too big)."""
