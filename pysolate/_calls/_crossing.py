"""What may cross the broker, checked in one place for both lanes and both Guests.

Every value that crosses between the program, the Host and a tool — a call's arguments and
keyword names, a tool's result, a tool's error — is checked here before anything keys,
hashes, encodes, traces or stores it, so a value that cannot cross fails the same way
whichever lane (early or formal) and whichever Guest (subprocess or in-process) meets it:

- **arguments** (``check_arguments``): plain data that can cross (``occurrences.plain``:
  exact plain types, valid Unicode text, ints within ``MAX_INT_DIGITS``). Otherwise the
  program gets ``_guest_errors.arguments_not_plain`` at the call — ``TypeError`` for a
  wrong type, ``ValueError`` for a lone surrogate or an over-long int — and no tool runs.
  The Guests raise it themselves, before the call leaves the program; the Host checks
  again (a Guest is untrusted) and the speculative lane never keys such a call
  (``Host.root_key_for`` returns None, so it waits for the program's own call).
- **results** (``checked_result``): plain, crossable and at most ``MAX_RESULT_CHARS`` of
  tagged text; a result that cannot cross is a ``ToolError`` named ``InvalidResult`` at
  the call, an oversized one a ``ValueError``.
- **errors** (``failure_from``): whatever a tool raises, ``BaseException`` included
  (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``, its own ``CancelledError``),
  becomes a ``ToolFailure`` the program sees at the call; its message is made valid text
  and its args kept only when they can cross. Only the *caller's* cancellation
  (``caller_cancelled``) is not a tool failure: it propagates unchanged.

Prior art: pydantic/monty — only plain data crosses, and the Guest cannot construct the
Host's errors.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Callable, Mapping

import anyio

from occurrences import NotPlain, check_plain, fresh_copy, tool_name
from occurrences.plain import INT_BOUND, MAX_INT_DIGITS, MAX_ITEMS, own, to_tagged

from .._backend import caller_cancelled, raised_by_trio
from .._guest_api import ToolFailure
from .._guest_errors import arguments_not_plain
from .._tools._compact import compact

MAX_RESULT_CHARS = 8 * 1024 * 1024
"""Largest result, in characters of its tagged wire form; bigger is an error in the program."""

_SCALARS = frozenset({type(None), bool, int, float, str, bytes})
"""The exact plain scalar types: ``to_tagged`` tags them without walking anything."""

INVALID_RESULT = "InvalidResult"
"""``ToolError.type_name`` of a result that cannot cross (not plain, a lone surrogate, an
over-long int)."""


def check_arguments(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    """Raise what the program sees for a call whose arguments cannot cross (see above).

    Positional arguments are checked before keyword ones (names included), exactly as the
    subprocess Guest encodes them, so every path reports the same first offender.
    """
    try:
        check_plain(args)
        check_plain(kwargs)
    except NotPlain as exc:
        raise arguments_not_plain(capability, method, exc) from None


DECODED: contextvars.ContextVar[tuple[object, object, list[object], list[object]] | None] = (
    contextvars.ContextVar("pysolate_decoded_arguments", default=None)
)
"""``(args, kwargs, tagged args, tagged kwargs)`` of the Guest call being answered, when the
frame decoder made the tagged forms while it built the values (``_guest._stepped``: a large
frame) and checked them as ``own`` would: ``owned_arguments`` of those very objects returns
them as they are. The decoded values are the broker's own (nothing else holds them), so no
copy is needed either; any other arguments are walked as usual."""


def owned_arguments(
    capability: str, method: str, args: tuple[object, ...], kwargs: Mapping[str, object]
) -> tuple[tuple[object, ...], list[object], dict[str, object], list[list[object]]]:
    """``check_arguments``, and the broker's own copies with their tagged forms, in one walk.

    ``(args copy, tagged args, kwargs copy, tagged kwargs)``: the tagged lists are the
    bodies of ``to_tagged(args)`` / ``to_tagged(kwargs)`` (what the call key is made of).
    Raises exactly what ``check_arguments`` raises, for the same first offender
    (``plain.own`` walks in ``to_tagged``'s order and tags scalars with it).

    The common call, scalars only and no keywords, is tagged item by item by ``to_tagged``
    itself (what ``own`` does for a scalar) and keeps its tuple: immutable, of immutable
    items, so sharing it shares nothing that can change.
    """
    decoded = DECODED.get()
    if decoded is not None and decoded[0] is args and decoded[1] is kwargs:
        assert type(args) is tuple and type(kwargs) is dict
        return args, decoded[2], kwargs, decoded[3]  # type: ignore[return-value]
    if not kwargs and type(args) is tuple and len(args) <= MAX_ITEMS:
        tags: list[object] = []
        for value in args:
            if type(value) not in _SCALARS:
                break
            try:
                tags.append(to_tagged(value))
            except NotPlain as exc:
                raise arguments_not_plain(capability, method, exc) from None
        else:
            return args, tags, {}, []
    try:
        own_args, tagged_args = own(args)
        if kwargs:
            own_kwargs, tagged_kwargs = own(kwargs if type(kwargs) is dict else dict(kwargs))
        else:  # what ``own({})`` gives, without the walk
            own_kwargs, tagged_kwargs = {}, ["d", []]
    except NotPlain as exc:
        raise arguments_not_plain(capability, method, exc) from None
    assert type(own_args) is tuple and type(own_kwargs) is dict
    assert isinstance(tagged_args, list) and isinstance(tagged_kwargs, list)
    positional, pairs = tagged_args[1], tagged_kwargs[1]
    assert isinstance(positional, list) and isinstance(pairs, list)
    return own_args, positional, own_kwargs, pairs


def checked_result(capability: str, method: str, raw: object) -> object:
    """A fresh copy of a tool's result ``raw``; ``ToolFailure`` when it cannot cross.

    One walk (``plain.own``) checks, copies and tags it; its size is that of the tagged
    text (``plain.dumps``, without walking the value again), which is only encoded when
    its bound (``_size_bound``) does not already show it small enough. ``None``, a bool, an
    int or a float is immutable (its own copy) and only needs ``to_tagged``'s check.
    """
    t = type(raw)
    if (
        t is int or t is bool or raw is None or t is float
    ) and _NUMBER_CHARS <= MAX_RESULT_CHARS:  # immutable
        if (
            t is int and -INT_BOUND < raw < INT_BOUND
        ):  # to_tagged's own check of an int, without its call
            return raw
        try:
            to_tagged(raw)  # an int past MAX_INT_DIGITS cannot cross
        except NotPlain as exc:
            raise invalid_result(capability, method, exc) from None
        return raw
    try:
        value, tagged = own(raw)
    except NotPlain as exc:
        raise invalid_result(capability, method, exc) from None
    if _size_bound(raw) <= MAX_RESULT_CHARS:
        return value
    size = len(compact(tagged))
    if size > MAX_RESULT_CHARS:
        raise ToolFailure(
            "ValueError",
            f"{tool_name(capability, method)} returned {size} characters (limit {MAX_RESULT_CHARS})",
        )
    return value


_TEXT_WORST = 6
"""Most characters one character of a ``str`` takes in JSON text (``\\u001f``)."""

_SCALAR_CHARS = 16
"""More than the tagged text of any scalar takes besides its body (``["f","`` ... ``"]``)."""

_NUMBER_CHARS = _SCALAR_CHARS + MAX_INT_DIGITS + 1
"""``_size_bound`` of any ``None``, ``bool``, ``int`` or ``float`` (an int's, the largest)."""


def _size_bound(raw: object) -> float:
    """An upper bound of the tagged text's length of the plain value ``raw``, known without
    encoding it: a scalar's is its tag plus its body (an int's digits, a float's hex, a
    string's escaped characters, two hex digits a byte); a container's is not computed
    (``inf``: it is encoded and measured)."""
    t = type(raw)
    if t is int:
        return _NUMBER_CHARS
    if t is str:
        return _SCALAR_CHARS + _TEXT_WORST * len(raw)  # type: ignore[arg-type]
    if t is bytes:
        return _SCALAR_CHARS + 2 * len(raw)  # type: ignore[arg-type]
    if raw is None or t is bool or t is float:
        return _SCALAR_CHARS + 32
    return math.inf


def invalid_result(capability: str, method: str, reason: object) -> ToolFailure:
    """The failure of a call whose result cannot cross (a ``ToolError`` in the program)."""
    return ToolFailure(
        INVALID_RESULT,
        f"{tool_name(capability, method)} returned a value that cannot cross: {reason}",
    )


def failure_from(exc: BaseException) -> ToolFailure:
    """The ``ToolFailure`` the program sees for an exception a tool raised.

    Any ``BaseException`` but the caller's cancellation (the callers check
    ``caller_cancelled`` first). A builtin ``Exception`` keeps its class in the program
    (``_guest_errors.rebuild_exception``); any other class, ``SystemExit`` and
    ``CancelledError`` included, becomes a ``ToolError`` carrying its name.
    """
    if isinstance(exc, _RaisedInThread):
        exc = exc.exc
    if isinstance(exc, ToolFailure):
        return exc
    args: tuple[object, ...] = exc.args
    if isinstance(exc, OSError) and exc.filename is not None:
        # OSError keeps the file names out of .args; its constructor takes them back.
        args = (exc.errno, exc.strerror, exc.filename, None, exc.filename2)
    try:
        check_plain(args)
    except NotPlain:
        args = ()
    try:
        message = str(exc)
    except Exception:
        message = f"<{type(exc).__name__} with unprintable message>"
    return ToolFailure(valid_text(type(exc).__name__), valid_text(message), args)


class _RaisedInThread(Exception):
    """Carries a non-``Exception`` a sync tool raised out of its worker thread: anyio's
    thread machinery treats a raw ``GeneratorExit`` or ``SystemExit`` as its own end."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(exc)
        self.exc = exc


def in_thread(work: Callable[[], object]) -> Callable[[], object]:
    """``work`` made safe to hand to a worker thread: whatever it raises comes back as an
    ``Exception`` that ``failure_from`` unwraps."""

    def run() -> object:
        try:
            return work()
        except Exception:
            raise
        except BaseException as exc:
            raise _RaisedInThread(exc) from None

    return run


def valid_text(text: str) -> str:
    """``text`` with any lone surrogate written as its ``\\udXXX`` escape: valid Unicode."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def is_tool_exception(exc: BaseException) -> bool:
    """Whether ``exc``, caught around a tool call, is the tool's own failure: anything but
    the caller's cancellation and a real interrupt of the Host process."""
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return not caller_cancelled()
    return not (isinstance(exc, KeyboardInterrupt) and raised_by_trio(exc))


def plain_or_repr(value: tuple[object, ...] | dict[str, object]) -> object:
    """A copy of call arguments for a receipt; non-plain ones (a refused call's) as their repr."""
    if isinstance(value, tuple):
        return tuple(_plain_or_repr_item(v) for v in value)
    return {k: _plain_or_repr_item(v) for k, v in value.items()}


def _plain_or_repr_item(value: object) -> object:
    try:
        check_plain(value)
    except NotPlain:
        return repr(value)
    return fresh_copy(value)
