"""The broker's encoders built once are exact: the same text as the reference encoder.

- ``_compact.compact`` and ``_wire.encode_frame`` give exactly what
  ``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode``
  gives (frames: UTF-8 with lone surrogates passed through) for every tagged plain value
  and every message made of them, and raise the same errors for what JSON cannot hold;
- ``_crossing._size_bound`` never undercounts: it is at least the length of the tagged text
  of any plain scalar (NaN, -0.0, the longest ints, control characters), so skipping the
  size encode for a scalar can never let an oversized result through;
- the binder's shortcut for all-positional calls keys exactly as ``canonical_arguments``.
"""

from __future__ import annotations

import inspect
import json
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from occurrences import canonical_arguments
from occurrences.plain import MAX_INT_DIGITS, own, to_tagged
from pysolate._calls._crossing import _size_bound
from pysolate._guest.child._wire import HEADER, encode_frame
from pysolate._tools._binding import Binder
from pysolate._tools._compact import compact

REFERENCE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**1000),
    st.sampled_from([10**MAX_INT_DIGITS - 1, -(10**MAX_INT_DIGITS - 1)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, math.nan, math.inf, -math.inf, 5e-324, -1.7976931348623157e308]),
    st.text(),
    st.text(alphabet=st.characters(max_codepoint=0x20)),
    st.sampled_from(["\x00", "\x1f" * 7, '"\\', "\u2028\U0010ffff"]),
    st.binary(max_size=16),
)
plain = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=4),
    ),
    max_leaves=20,
)
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
        st.sampled_from(["\ud800", "a\udfffb"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(plain)
def test_compact_is_the_reference_text_of_every_tagged_value(value: object) -> None:
    try:
        tagged = to_tagged(value)
    except (TypeError, ValueError):
        return  # not crossable: never encoded
    assert compact(tagged) == REFERENCE.encode(tagged)


@settings(max_examples=300, deadline=None)
@given(json_values)
@example("\ud800")
@example({"t": "result", "id": 1, "value": ["s", "\udfff"]})
def test_compact_and_frames_match_the_reference_for_any_json_value(value: object) -> None:
    assert compact(value) == REFERENCE.encode(value)
    message = {"t": "result", "id": 3, "value": value}
    payload = REFERENCE.encode(message).encode("utf-8", "surrogatepass")
    assert encode_frame(message) == HEADER.pack(len(payload)) + payload


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, [1, -math.inf], {"x": object()}, [b"bytes"], {(1,): 2}]
)
def test_compact_and_frames_raise_what_the_reference_raises(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)) as reference:
        REFERENCE.encode(bad)
    with pytest.raises(reference.type) as ours:
        compact(bad)
    assert str(ours.value) == str(reference.value)
    with pytest.raises(reference.type) as framed:
        encode_frame({"t": "result", "value": bad})
    with pytest.raises(reference.type) as reference_framed:
        REFERENCE.encode({"t": "result", "value": bad})
    assert str(framed.value) == str(reference_framed.value)


def test_compact_is_reusable_after_an_error() -> None:
    with pytest.raises(TypeError):
        compact([["s", "x"], {1j: 2}])
    value = [["l", [["s", "a"]]]]
    assert compact(value) == REFERENCE.encode(value)


@settings(max_examples=500, deadline=None)
@given(scalars)
@example(-(10**MAX_INT_DIGITS - 1))
@example("\x00" * 50)
@example(-1.7976931348623157e308)
def test_the_size_bound_of_a_scalar_is_never_below_its_tagged_text(value: object) -> None:
    try:
        _, tagged = own(value)
    except (TypeError, ValueError):
        return  # refused before any size is taken
    assert _size_bound(value) >= len(compact(tagged))


@given(plain)
def test_containers_have_no_bound_and_are_measured(value: object) -> None:
    if type(value) in (list, tuple, dict):
        assert _size_bound(value) == math.inf


def _f(a: object, b: object, c: object = 3) -> None: ...


def _g(z: object, a: object, /, m: object) -> None: ...


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([_f, _g]), st.lists(plain, min_size=3, max_size=3))
def test_the_all_positional_shortcut_keys_and_binds_as_the_reference(
    fn: object, values: list[object]
) -> None:
    signature = inspect.signature(fn)  # type: ignore[arg-type]
    binder = Binder(signature)
    args = tuple(values)
    try:
        own_args, tagged = own(args)
    except (TypeError, ValueError):
        return
    assert isinstance(own_args, tuple) and isinstance(tagged, list)
    arguments, bound_args, bound_kwargs = binder.bind(own_args, {})
    reference = signature.bind(*own_args)
    reference.apply_defaults()
    assert (arguments, bound_args, bound_kwargs) == (
        dict(reference.arguments),
        reference.args,
        reference.kwargs,
    )
    assert list(arguments) == list(reference.arguments)
    assert binder.key_text(arguments, tagged[1], []) == canonical_arguments(arguments)
