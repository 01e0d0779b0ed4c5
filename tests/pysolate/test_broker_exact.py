"""The broker's per-call shortcuts (issue 18, item 2) give exactly what they replace.

- a frame's text is decoded by the JSON scanner directly as ``json.loads`` decodes it, for
  any text (values, errors, trailing data);
- a call's tagged arguments decode as ``from_tagged`` decodes them, values and errors
  (messages included), for valid forms of every plain value and for arbitrary JSON-like
  garbage;
- the arguments of a call of scalars only are checked, copied and tagged as ``own`` does
  (the same first offender, the same error);
- a scalar result is checked as the one-walk path checks it (huge ints, NaN, a lowered
  ``MAX_RESULT_CHARS``).
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from occurrences.plain import MAX_INT_DIGITS, NotPlain, from_tagged, own, to_tagged
from pysolate._calls import _crossing
from pysolate._calls._crossing import checked_result, owned_arguments
from pysolate._guest._frames import _arguments, _loads
from pysolate._guest_api import ToolFailure

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**1000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, math.nan, math.inf]),
    st.sampled_from([MAX_INT_DIGITS - 1, MAX_INT_DIGITS]).map(
        lambda digits: 10**digits
    ),  # the last int that crosses, the first that does not
    st.text(),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "\U0010ffff"]),
    st.binary(max_size=8),
)
plain = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=4),
    ),
    max_leaves=12,
)
"""Plain values, and values of plain types that cannot cross (lone surrogates, huge ints)."""

json_like = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=3),
        st.sampled_from(
            [
                "i",
                "s",
                "t",
                "d",
                "f",
                "n",
                "1_0",
                " 7",
                "x",
                "\u0661",
                "-0",
                "9" * (MAX_INT_DIGITS + 1),
            ]
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=8,
)
"""What ``json.loads`` can hand the decoder: anything, tag-like strings included."""


def outcome(fn: object, *args: object) -> tuple[str, str]:
    """``repr`` of what ``fn(*args)`` returns, or the type and message of what it raises."""
    try:
        return ("ok", repr(fn(*args)))  # type: ignore[operator]
    except Exception as exc:  # the property compares failures too
        return (type(exc).__name__, str(exc))


def reference_arguments(tagged_args: object, tagged_kwargs: object) -> tuple[object, object]:
    return from_tagged(tagged_args), from_tagged(tagged_kwargs)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.text(max_size=30),
        st.text(max_size=30).map(lambda t: "{" + t),
        st.builds(json.dumps, json_like).map(lambda t: "{" + t),
    )
)
@example('{"a": 1}')
@example('{"a": 1}  ')
@example('{"a": 1} x')
@example('{"a": NaN, "b": -Infinity}')
@example('{"a": "\\ud800"}')
@example("{" * 5000 + "}" * 5000)
@example('{"a": 1}{"b": 2}')
def test_the_scanner_decodes_any_text_as_json_loads(text: str) -> None:
    assert outcome(_loads, text) == outcome(json.loads, text)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(plain, max_size=4).map(tuple), st.dictionaries(st.text(max_size=3), plain, max_size=2)
)
def test_valid_call_arguments_decode_as_from_tagged(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    try:
        tagged = (to_tagged(args), to_tagged(kwargs))
    except NotPlain:
        tagged = (["t", [["s", "\ud800"]]], ["d", []])  # what a hostile Guest can still send
    assert outcome(_arguments, *tagged) == outcome(reference_arguments, *tagged)


@settings(max_examples=800, deadline=None)
@given(
    st.one_of(json_like, st.lists(json_like, max_size=3).map(lambda body: ["t", body])),
    st.one_of(
        st.just(["d", []]), json_like, st.lists(json_like, max_size=2).map(lambda body: ["d", body])
    ),
)
@example(["t", [["i", "7"], ["s", "a"]]], ["d", []])
@example(["t", [["i", "x"]]], ["d", []])
@example(["t", [["i", "9" * (MAX_INT_DIGITS + 1)]]], ["d", []])
@example(["t", [["i", 7]]], ["d", []])
@example(["t", [["i", "1", "2"]]], ["d", []])
@example(["t", [["s", "a"], ["l", []]]], ["d", []])
@example(["t", []], ["d", [[["s", "k"], ["i", "1"]]]])
@example(["t", [], 3], ["d", []])
@example(["l", []], ["d", []])
def test_any_tagged_arguments_decode_as_from_tagged(
    tagged_args: object, tagged_kwargs: object
) -> None:
    assert outcome(_arguments, tagged_args, tagged_kwargs) == outcome(
        reference_arguments, tagged_args, tagged_kwargs
    )


def reference_owned(args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[object, ...]:
    """``owned_arguments`` as the one walk of ``own`` makes it."""
    own_args, tagged_args = own(args)
    own_kwargs, tagged_kwargs = own(kwargs)
    return own_args, tagged_args[1], own_kwargs, tagged_kwargs[1]  # type: ignore[index]


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(st.lists(scalars, max_size=4), st.lists(plain, max_size=3)).map(tuple),
    st.sampled_from([{}, {"k": 1}]),
)
@example((1, "\ud800", 10 ** (MAX_INT_DIGITS + 1)), {})
@example((10 ** (MAX_INT_DIGITS + 1), "\ud800"), {})
@example((1, object()), {})
@example((True, None, -0.0, math.nan, b"\x00"), {})
def test_scalar_arguments_are_owned_as_own_owns_them(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    def fast() -> tuple[object, ...]:
        return owned_arguments("c", "m", args, kwargs)

    def reference() -> tuple[object, ...]:
        try:
            return reference_owned(args, kwargs)
        except NotPlain as exc:  # the program's error for it, as owned_arguments raises it
            raise _crossing.arguments_not_plain("c", "m", exc) from None

    got, expected = outcome(fast), outcome(reference)
    assert got == expected
    if got[0] == "ok":
        own_args, _, own_kwargs, _ = fast()
        assert own_kwargs is not kwargs
        assert all(type(v) in _crossing._SCALARS for v in own_args) or own_args is not args


@pytest.mark.parametrize("limit", [_crossing.MAX_RESULT_CHARS, 100, 10])
@pytest.mark.parametrize(
    "raw",
    [
        None,
        True,
        False,
        0,
        -1,
        10**200,
        10**MAX_INT_DIGITS - 1,
        10**MAX_INT_DIGITS,
        -(10**5000),
        1.5,
        -0.0,
        math.nan,
        math.inf,
    ],
    ids=lambda raw: (
        f"{type(raw).__name__}-{len(str(abs(raw))) if type(raw) is int and raw > 10**9 else raw}"
        if type(raw) is not int or abs(raw) < 10**4000
        else "int-huge"
    ),
)
def test_a_scalar_result_is_checked_as_the_one_walk_checks_it(
    raw: object, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_crossing, "MAX_RESULT_CHARS", limit)

    def reference() -> object:
        try:
            value, tagged = own(raw)
        except NotPlain as exc:
            raise _crossing.invalid_result("c", "m", exc) from None
        size = len(json.dumps(tagged, separators=(",", ":")))
        if size > limit:
            raise ToolFailure("ValueError", f"c.m returned {size} characters (limit {limit})")
        return value

    assert outcome(checked_result, "c", "m", raw) == outcome(reference)
