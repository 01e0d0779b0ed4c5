"""Strict checks of plain values against the SDKs' request ``TypedDict``s.

pydantic's ``TypeAdapter`` ignores unknown keys of a ``TypedDict`` and validates the SDKs'
``Iterable[...]`` fields lazily, so it would accept a misspelt ``"descripton"`` or a bad
message deep in a list. ``check(T, value)`` walks ``T``'s annotations itself: every key
known, every required key present, literals equal, lists checked item by item, a union
accepted when one member accepts, a class only for its instances. It raises ``AssertionError`` with the path of the first
mismatch. Types it does not model (``object``, ``Dict[str, object]``) accept anything.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any, NotRequired, Required

from typing_extensions import is_typeddict


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) in (Required, NotRequired, typing.Annotated):
        tp = typing.get_args(tp)[0]
    return tp


def _total(typed_dict: Any, key: str) -> bool:
    """The totality of the class that declares ``key`` (a base's, when inherited)."""
    for base in getattr(typed_dict, "__orig_bases__", ()):
        if is_typeddict(base) and key in typing.get_type_hints(base):
            return _total(base, key)
    return bool(getattr(typed_dict, "__total__", True))


def _required(typed_dict: Any, key: str, hint: Any) -> bool:
    """Whether ``key`` is required: its ``Required``/``NotRequired`` wrapper, else the
    declaring class's totality (``__required_keys__`` cannot see the SDKs' ``Required``:
    their annotations are strings when the class is made)."""
    while typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    origin = typing.get_origin(hint)
    if origin is Required:
        return True
    if origin is NotRequired:
        return False
    return _total(typed_dict, key)


def check(tp: Any, value: Any, path: str = "$") -> None:
    """``value`` is a valid ``tp`` (see the module docstring); ``AssertionError`` if not."""
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    if tp is Any or tp is object:
        return
    if is_typeddict(tp):
        assert isinstance(value, dict), (
            f"{path}: expected a {tp.__name__} dict, got {type(value).__name__}"
        )
        hints = typing.get_type_hints(tp, include_extras=True)
        unknown = set(value) - set(hints)
        assert not unknown, f"{path}: {tp.__name__} has no keys {sorted(unknown)}"
        missing = {key for key, hint in hints.items() if _required(tp, key, hint)} - set(value)
        assert not missing, f"{path}: {tp.__name__} lacks required keys {sorted(missing)}"
        for key, item in value.items():
            check(hints[key], item, f"{path}.{key}")
        return
    if origin in (typing.Union, types.UnionType):
        failures = []
        for member in typing.get_args(tp):
            try:
                check(member, value, path)
                return
            except AssertionError as exc:
                failures.append(str(exc))
        raise AssertionError(
            f"{path}: no member of the union accepts it:\n  " + "\n  ".join(failures)
        )
    if origin is typing.Literal:
        assert value in typing.get_args(tp), (
            f"{path}: {value!r} is not one of {typing.get_args(tp)}"
        )
        return
    if tp is type(None):
        assert value is None, f"{path}: expected None, got {value!r}"
        return
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence, typing.List):  # noqa: UP006
        assert isinstance(value, list | tuple), (
            f"{path}: expected a list, got {type(value).__name__}"
        )
        (item_type,) = typing.get_args(tp) or (Any,)
        for n, item in enumerate(value):
            check(item_type, item, f"{path}[{n}]")
        return
    if origin in (dict, collections.abc.Mapping, typing.Dict):  # noqa: UP006
        assert isinstance(value, dict), f"{path}: expected a dict, got {type(value).__name__}"
        return
    if tp in (str, int, float, bool):
        ok = isinstance(value, tp) and not (tp in (int, float) and isinstance(value, bool))
        assert ok or (tp is float and type(value) is int), (
            f"{path}: expected {tp.__name__}, got {value!r}"
        )
        return
    if isinstance(tp, type):  # a class (an SDK response model in a param union): only its instances
        assert isinstance(value, tp), (
            f"{path}: expected a {tp.__name__}, got {type(value).__name__}"
        )
    # Anything else (a TypeVar, ...) is not modelled: accepted.
