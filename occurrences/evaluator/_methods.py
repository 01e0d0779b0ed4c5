"""The whitelisted methods of plain values, each bounded before the real method runs.

(exact receiver type, method name) -> handler(budget, receiver, args, kwargs). The
receiver's type is checked exactly by the caller, so the real method is the one CPython
would call. Methods whose cost is linear in the receiver run as they are; those that can
amplify (padding, ``replace``, ``join``, ``split``, ``str.format``) estimate their result
first; those that find elements by ``is``-then-``==`` refuse a NaN (``Budget.nan_free``).
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

from .._exceptions import NotKnown
from ._budget import Budget
from ._builtins import no_kwargs, plain_args
from ._sizes import spec_width

MethodHandler = Callable[[Budget, object, tuple[Any, ...], dict[str, Any]], object]
METHODS: dict[tuple[type, str], MethodHandler] = {}

_LINEAR_STR = [
    "capitalize", "casefold", "lower", "upper", "swapcase", "title", "strip", "lstrip",
    "rstrip", "partition", "rpartition", "startswith", "endswith", "find", "rfind", "index",
    "rindex", "count", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
    "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
    "removeprefix", "removesuffix",
]  # fmt: skip
_LINEAR_BYTES = [
    "capitalize", "lower", "upper", "swapcase", "title", "strip", "lstrip", "rstrip",
    "partition", "rpartition", "startswith", "endswith", "find", "rfind", "index", "rindex",
    "count", "isalnum", "isalpha", "isascii", "isdigit", "islower", "isspace", "istitle",
    "isupper", "removeprefix", "removesuffix", "hex",
]  # fmt: skip
_ENCODINGS = frozenset({"utf-8", "utf8", "ascii", "latin-1", "latin1"})
_ERRORS = frozenset({"strict", "ignore", "replace"})
"""Codecs with a built-in fast path: no codec-registry lookup, no import in the Host."""


def call_method(
    b: Budget, receiver: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> object:
    """Call the whitelisted method ``name`` of ``receiver``; NotKnown otherwise."""
    handler = METHODS.get((type(receiver), name))
    if handler is None:
        raise NotKnown(f"{type(receiver).__name__}.{name} is not whitelisted")
    if name != "join":  # join takes an iterable, which may be an internal iterator
        plain_args(b, args, kwargs)
    return b.check(handler(b, receiver, args, kwargs))


def _linear(owner: type, name: str) -> None:
    method = getattr(owner, name)

    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        return method(receiver, *args, **kwargs)

    METHODS[(owner, name)] = handler


for _n in _LINEAR_STR:
    _linear(str, _n)
for _n in _LINEAR_BYTES:
    _linear(bytes, _n)
for _owner, _names in ((list, ("copy",)), (dict, ("keys", "values", "items", "copy")),
                       (int, ("bit_length", "bit_count")), (bool, ("bit_length", "bit_count")),
                       (float, ("is_integer", "hex"))):  # fmt: skip
    for _n in _names:
        _linear(_owner, _n)
del _owner, _names, _n


def _by_identity(owner: type, name: str) -> None:
    """Methods that find elements with ``is``-then-``==`` (see ``Budget.nan_free``)."""
    method = getattr(owner, name)

    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        b.nan_free(receiver, *args)
        return method(receiver, *args, **kwargs)

    METHODS[(owner, name)] = handler


_IDENTITY_METHODS: tuple[tuple[type, str], ...] = (
    (list, "index"),
    (list, "count"),
    (tuple, "index"),
    (tuple, "count"),
    (dict, "get"),
)
for _container_type, _name in _IDENTITY_METHODS:
    _by_identity(_container_type, _name)
del _container_type, _name


def _max_len(b: Budget, receiver: Any) -> int:
    return b.limits.max_str_len if type(receiver) is str else b.limits.max_bytes_len


def _padded(owner: type, name: str) -> None:
    method = getattr(owner, name)

    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        if args and type(args[0]) in (int, bool) and args[0] > _max_len(b, receiver):
            raise NotKnown("padding width too large")
        return method(receiver, *args, **kwargs)

    METHODS[(owner, name)] = handler


for _text_type in (str, bytes):
    for _n in ("center", "ljust", "rjust", "zfill"):
        _padded(_text_type, _n)
del _text_type, _n


def _replace(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    if kwargs or not 2 <= len(args) <= 3 or any(type(a) is not type(receiver) for a in args[:2]):
        raise NotKnown("replace() arguments")
    old, new = args[0], args[1]
    count = args[2] if len(args) == 3 else -1
    if type(count) not in (int, bool):
        raise NotKnown("replace() count is not an int")
    n = len(receiver) + 1 if not old else receiver.count(old)
    if count >= 0:
        n = min(n, count)
    if len(receiver) + n * (len(new) - len(old)) > _max_len(b, receiver):
        raise NotKnown("replace() result too long")
    return receiver.replace(old, new, count)


def _expandtabs(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    size = kwargs.get("tabsize", args[0] if args else 8)
    if type(size) not in (int, bool):
        raise NotKnown("expandtabs() tabsize is not an int")
    tab = "\t" if type(receiver) is str else b"\t"
    if len(receiver) + receiver.count(tab) * max(size, 0) > _max_len(b, receiver):
        raise NotKnown("expandtabs() result too long")
    return receiver.expandtabs(*args, **kwargs)


def _join(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    no_kwargs(kwargs)
    (iterable,) = args
    parts: Any = b.items(iterable)
    if any(type(p) is not type(receiver) for p in parts):
        raise NotKnown("join() of non-string items")
    total: int = sum(len(p) for p in parts) + len(receiver) * max(len(parts) - 1, 0)
    if total > _max_len(b, receiver):
        raise NotKnown("join() result too long")
    return receiver.join(parts)


def _split(method_name: str) -> MethodHandler:
    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        if len(args) > 2 or set(kwargs) - {"sep", "maxsplit"}:
            raise NotKnown(f"{method_name}() arguments")
        sep = kwargs.get("sep", args[0] if args else None)
        maxsplit = kwargs.get("maxsplit", args[1] if len(args) > 1 else -1)
        if type(maxsplit) not in (int, bool):
            raise NotKnown(f"{method_name}() maxsplit is not an int")
        # Split at most `cap` times: fewer parts than that means the split was complete,
        # so the result equals the unbounded one without ever building a huge list.
        cap = b.limits.max_container_len - 1
        bounded = maxsplit < 0 or maxsplit > cap
        parts = getattr(receiver, method_name)(sep, cap if bounded else maxsplit)
        if bounded and len(parts) > cap:
            raise NotKnown(f"{method_name}() gives too many parts")
        return parts

    return handler


_LINE_BREAKS: dict[type, Any] = {str: "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", bytes: b"\n\r"}


def _splitlines(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    breaks = _LINE_BREAKS[type(receiver)]
    if (
        sum(receiver.count(breaks[i : i + 1]) for i in range(len(breaks)))
        >= b.limits.max_container_len
    ):
        raise NotKnown("splitlines() gives too many lines")
    return receiver.splitlines(*args, **kwargs)


_FORMATTER = string.Formatter()  # its parse() is str.format's own C parser


def _str_format(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    """``str.format`` with plain field names only: ``{0.attr}`` and ``{0[k]}`` walk objects."""
    widths = fields = 0
    for _literal, field, spec, _conversion in _FORMATTER.parse(receiver):
        if field is None:
            continue
        if not (field == "" or (field.isascii() and field.isdigit()) or field.isidentifier()):
            raise NotKnown("format field with attribute or item access")
        if "{" in (spec or "") or "}" in (spec or ""):
            raise NotKnown("nested replacement field in a format spec")
        widths += spec_width(spec, b.limits)
        fields += 1
    largest = max((b.size(a) for a in (*args, *kwargs.values())), default=0)
    for a in (*args, *kwargs.values()):
        b.printable(a)
    if len(receiver) + widths + fields * largest > b.limits.max_str_len:
        raise NotKnown("format() result too long")
    return receiver.format(*args, **kwargs)


def _codec(method_name: str) -> MethodHandler:
    def handler(b: Budget, receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        if set(kwargs) - {"encoding", "errors"} or len(args) > 2:
            raise NotKnown(f"{method_name}() arguments")
        encoding = kwargs.get("encoding", args[0] if args else "utf-8")
        errors = kwargs.get("errors", args[1] if len(args) > 1 else "strict")
        if encoding not in _ENCODINGS or errors not in _ERRORS:
            raise NotKnown(f"{method_name}() with codec {encoding!r}/{errors!r} is not evaluated")
        return getattr(receiver, method_name)(encoding, errors)

    return handler


for _text_type in (str, bytes):
    METHODS[(_text_type, "replace")] = _replace
    METHODS[(_text_type, "expandtabs")] = _expandtabs
    METHODS[(_text_type, "join")] = _join
    METHODS[(_text_type, "split")] = _split("split")
    METHODS[(_text_type, "rsplit")] = _split("rsplit")
    METHODS[(_text_type, "splitlines")] = _splitlines
del _text_type
METHODS[(str, "format")] = _str_format
METHODS[(str, "encode")] = _codec("encode")
METHODS[(bytes, "decode")] = _codec("decode")
