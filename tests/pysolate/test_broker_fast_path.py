"""The broker's cheaper path is exact: every shortcut equals what it replaced.

- ``plain.own`` is ``(fresh_copy(v), to_tagged(v))`` in one walk, for every value (NaN,
  -0.0, big ints, nesting) and fails exactly where ``to_tagged`` fails, with the same
  error (lone surrogates, ints past ``MAX_INT_DIGITS``, non-plain types, depth);
- a frame payload decodes to the same value (or the same failure) with the UTF-8 fast path
  as with ``json.loads`` of the bytes, for arbitrary bytes;
- an async tool is awaited with the same results, errors, timeouts and cancellation
  whether it finishes at once or suspends, under asyncio and trio.
"""

from __future__ import annotations

import json
import math

import anyio
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from occurrences.plain import MAX_DEPTH, NotPlain, fresh_copy, from_tagged, own, to_tagged
from pysolate._calls._execute import _awaited, _may_suspend
from pysolate._guest._frames import (
    _GUEST_FRAME,
    Call,
    CallFrame,
    ProtocolViolation,
    _call_fields,
    _common_call,
    _text,
    parse_guest_frame,
)
from pysolate._guest.child._wire import encode_frame

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**1000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, math.nan, math.inf]),
    st.text(),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "\U0010ffff"]),
    st.binary(max_size=8),
)
keys = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=4),
    st.tuples(st.integers(), st.text(max_size=2)),
)
plain = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=20,
)


def containers(value: object) -> list[object]:
    """Every list and dict inside ``value`` (tuples are walked, never shared-checked)."""
    found: list[object] = []
    if isinstance(value, list | dict):
        found.append(value)
    items = (
        value.items()
        if isinstance(value, dict)
        else value
        if isinstance(value, list | tuple)
        else ()
    )
    for item in items:
        found += containers(item)
    return found


@settings(max_examples=400, deadline=None)
@given(plain)
def test_own_is_a_fresh_copy_and_the_tagged_form_in_one_walk(value: object) -> None:
    try:
        expected = to_tagged(value)
    except NotPlain as exc:  # cannot cross (a lone surrogate, too many digits): the same error
        with pytest.raises(type(exc)) as got:
            own(value)
        assert str(got.value) == str(exc)
        return
    copy, tagged = own(value)
    assert tagged == expected
    assert tagged == to_tagged(value)
    assert json.dumps(tagged) == json.dumps(to_tagged(value))  # NaN-proof, type-exact text
    assert repr(copy) == repr(fresh_copy(value))
    assert {id(c) for c in containers(copy)}.isdisjoint(id(c) for c in containers(value))


@pytest.mark.parametrize(
    "value",
    [
        object(),
        [1, {2, 3}],
        {"a": bytearray(b"x")},
        (1, [True, 1.5j]),
        {(): [frozenset()]},
        True.__class__.__mro__,
    ],
)
def test_own_refuses_what_to_tagged_refuses_with_the_same_message(value: object) -> None:
    with pytest.raises(NotPlain) as expected:
        to_tagged(value)
    with pytest.raises(NotPlain) as got:
        own(value)
    assert str(got.value) == str(expected.value)


def test_own_refuses_depth_and_huge_ints_like_to_tagged() -> None:
    deep: object = 0
    for _ in range(MAX_DEPTH + 2):
        deep = [deep]
    for value in (deep, 10**5000):
        with pytest.raises((NotPlain, ValueError)) as expected:
            to_tagged(value)
        with pytest.raises(expected.type):
            own(value)


def reference_decode(payload: bytes) -> object:
    try:
        return ("ok", json.loads(payload))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc).__name__)


def fast_decode(payload: bytes) -> object:
    try:
        return ("ok", json.loads(_text(payload)))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc).__name__)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=24),
        st.binary(max_size=24).map(lambda b: b"{" + b),
        st.sampled_from(
            [
                b"{",
                b"{}",
                b'{"a":1}',
                b"{\x00\x00\x00",
                b'{"\xed\xa0\x80":1}',
                "{\ufeff}".encode(),
                b"\xef\xbb\xbf{}",
                b"{\xff}",
            ]
        ),
    )
)
def test_frame_text_fast_path_decodes_any_bytes_as_json_loads_does(payload: bytes) -> None:
    got, expected = fast_decode(payload), reference_decode(payload)
    assert repr(got) == repr(expected)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(plain, max_size=3).map(tuple), st.dictionaries(st.text(max_size=3), plain, max_size=3)
)
def test_a_call_frame_round_trips_every_plain_value(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    try:
        to_tagged((args, kwargs))
    except NotPlain:
        assume(False)  # cannot cross: the Guest refuses it before it is framed
    frame = encode_frame(
        {
            "t": "call",
            "capability": "c",
            "method": "m",
            "args": to_tagged(args),
            "kwargs": to_tagged(kwargs),
        }
    )
    call = parse_guest_frame(frame[4:])
    assert not isinstance(call, ProtocolViolation)
    assert repr((call.args, call.kwargs)) == repr((args, kwargs))  # type: ignore[union-attr]


# -- awaiting async tools -------------------------------------------------------------------

backends = pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])


async def at_once(x: int) -> int:
    return x


async def after(seconds: float, x: int) -> int:
    await anyio.sleep(seconds)
    return x


async def fails_at_once() -> int:
    raise KeyError("k")


async def fails_later() -> int:
    await anyio.sleep(0)
    raise KeyError("k")


async def own_scope(seconds: float) -> str:
    """A tool that enters a cancel scope in its first step (nesting must hold)."""
    with anyio.move_on_after(seconds):
        await anyio.sleep(10)
    return "moved on"


@backends
@pytest.mark.anyio
async def test_awaited_results_errors_and_timeouts(anyio_backend: str) -> None:
    assert await _awaited(at_once(1), 5) == (True, 1)
    assert await _awaited(after(0.01, 2), 5) == (True, 2)
    assert await _awaited(after(5, 3), 0.02) == (False, None)
    assert await _awaited(own_scope(0.01), 5) == (True, "moved on")
    assert await _awaited(own_scope(5), 0.02) == (False, None)
    for failing in (fails_at_once, fails_later):
        with pytest.raises(KeyError):
            await _awaited(failing(), 5)


async def sync_scope(x: int) -> int:
    """No await point, but a cancel scope entered and left within the one step."""
    with anyio.CancelScope():
        return x


async def awaits_in_a_comprehension(xs: list[int]) -> list[int]:
    return [await at_once(x) for x in xs]


async def iterates(xs: object) -> None:
    async for _ in xs:  # type: ignore[attr-defined]
        pass


async def enters(cm: object) -> None:
    async with cm:  # type: ignore[attr-defined]
        pass


def test_only_coroutines_without_an_await_point_cannot_suspend() -> None:
    for fn in (at_once, fails_at_once, sync_scope):
        assert not _may_suspend(fn.__code__), fn
    for fn in (after, fails_later, own_scope, awaits_in_a_comprehension, iterates, enters):
        assert _may_suspend(fn.__code__), fn


@backends
@pytest.mark.anyio
async def test_a_scope_only_for_a_tool_that_can_suspend(anyio_backend: str) -> None:
    """A tool without an await point runs its one step without a cancel scope (nothing
    could interrupt it); every other tool's first step runs inside one."""
    made: list[object] = []
    backend = type(anyio.CancelScope())

    def counted() -> anyio.CancelScope:
        scope = backend()
        made.append(scope)
        return scope

    assert await _awaited(at_once(1), 5, counted) == (True, 1)
    assert await _awaited(sync_scope(2), 5, counted) == (True, 2)
    with pytest.raises(KeyError):
        await _awaited(fails_at_once(), 5, counted)
    assert made == []
    assert await _awaited(after(0, 3), 5, counted) == (True, 3)
    assert await _awaited(awaits_in_a_comprehension([4]), 5, counted) == (True, [4])
    assert len(made) == 2


@backends
@pytest.mark.anyio
async def test_the_callers_cancellation_reaches_a_suspended_tool(anyio_backend: str) -> None:
    seen: list[str] = []

    async def tool() -> None:
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise

    with anyio.move_on_after(0.02) as outer:
        await _awaited(tool(), 5)
    assert outer.cancelled_caught and seen == ["cancelled"]


json_like = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
field_values = st.one_of(
    json_like,
    st.sampled_from(["call", "ready", "done", "x" * 200, "x" * 201, "tools"]),
    st.lists(json_like, max_size=2),
)


@settings(max_examples=600, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["t", "capability", "method", "args", "kwargs", "extra"]),
        field_values,
        min_size=4,
    ).map(lambda d: {**d, "t": "call"} if len(d) % 2 else d)
)
@example({"t": "call", "capability": "c", "method": "m", "args": ["t", []], "kwargs": ["d", []]})
@example({"t": "call", "capability": "c" * 201, "method": "m", "args": [], "kwargs": []})
@example({"t": "call", "capability": "c", "method": "m", "args": (), "kwargs": []})
@example({"t": "ready", "capability": "c", "method": "m", "args": [], "kwargs": []})
def test_the_call_frame_shortcut_agrees_with_the_model(raw: dict[str, object]) -> None:
    try:
        model = _GUEST_FRAME.validate_python(raw, strict=True)
    except ValidationError:
        model = None
    fields = _call_fields(raw)
    if isinstance(model, CallFrame):
        assert fields == (model.capability, model.method, model.args, model.kwargs)
    else:
        assert fields is None


def reference_parse(payload: bytes) -> str:
    """What the general path makes of a frame (json.loads, the model, from_tagged), as text."""
    try:
        frame = _GUEST_FRAME.validate_python(json.loads(payload), strict=True)
    except (ValueError, RecursionError):
        return "violation"
    if not isinstance(frame, CallFrame):
        return f"not a call: {type(frame).__name__}"
    try:
        args, kwargs = from_tagged(frame.args), from_tagged(frame.kwargs)
    except (ValueError, RecursionError):
        return "violation"
    if (
        type(args) is not tuple
        or type(kwargs) is not dict
        or any(type(k) is not str for k in kwargs)
    ):
        return "violation"
    return repr(Call(frame.capability, frame.method, args, kwargs))


def parsed(payload: bytes) -> str:
    try:
        frame = parse_guest_frame(payload)
    except ProtocolViolation:
        return "violation"
    return repr(frame) if isinstance(frame, Call) else f"not a call: {type(frame).__name__}"


def to_tagged_or_none(value: object) -> object:
    try:
        return to_tagged(value)
    except NotPlain:
        return ["n"]


names = st.one_of(
    st.sampled_from(["tools", "echo", "", "a" * 200, "a" * 201, "é", "a b", 'a"', "a\\"]),
    st.text(max_size=6),
)
int_bodies = st.one_of(
    st.integers().map(str),
    st.sampled_from(
        [
            "-0",
            "007",
            "+1",
            " 1",
            "1_0",
            "",
            "-",
            "1e3",
            "٣",
            "9" * 4300,
            "9" * 4301,
            "-" + "9" * 4301,
        ]
    ),
)
str_bodies = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["\ud800", "a\udfffb", '"', "\\", "\x00", "\x1f", "\x7f", "\u2028"]),
)
items = st.one_of(
    int_bodies.map(lambda body: ["i", body]),
    str_bodies.map(lambda body: ["s", body]),
    plain.map(to_tagged_or_none),
)


def frame_bytes(message: dict[str, object], ascii_only: bool) -> bytes:
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=ascii_only)
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=1500, deadline=None)
@given(
    capability=names,
    method=names,
    args=st.lists(items, max_size=4),
    kwargs=st.one_of(
        st.just([]),
        st.lists(st.tuples(str_bodies, items).map(lambda p: [["s", p[0]], p[1]]), max_size=2),
    ),
    ascii_only=st.booleans(),
    cut=st.integers(min_value=0, max_value=3),
)
@example(capability="tools", method="echo", args=[["i", "7"]], kwargs=[], ascii_only=False, cut=0)
@example(capability="a" * 201, method="echo", args=[], kwargs=[], ascii_only=False, cut=0)
@example(capability="tools", method="a" * 201, args=[], kwargs=[], ascii_only=False, cut=0)
@example(
    capability="tools",
    method="echo",
    args=[["i", "9" * 4301], ["s", "\ud800"]],
    kwargs=[],
    ascii_only=False,
    cut=0,
)
def test_the_common_call_shortcut_parses_as_the_general_path(
    capability: str,
    method: str,
    args: list[object],
    kwargs: list[object],
    ascii_only: bool,
    cut: int,
) -> None:
    payload = frame_bytes(
        {
            "t": "call",
            "capability": capability,
            "method": method,
            "args": ["t", args],
            "kwargs": ["d", kwargs],
        },
        ascii_only,
    )
    # Near misses too: a byte dropped, an extra field, whitespace.
    payload = [
        payload,
        payload[:-2] + payload[-1:],
        payload[:-1] + b',"x":1}',
        payload.replace(b",", b", ", 1),
    ][cut]
    assert parsed(payload) == reference_parse(payload)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(min_value=-(10**100), max_value=10**100), st.text(max_size=5)),
        max_size=4,
    ).map(tuple)
)
def test_the_guests_own_frames_of_ints_and_plain_strs_take_the_shortcut(
    args: tuple[object, ...],
) -> None:
    """The shortcut is taken for what the child writes for such calls (else it saves nothing)."""
    assume(
        all(not isinstance(a, str) or not any(c in '"\\' or c < " " for c in a) for a in args)
    )  # escaped in JSON
    frame = encode_frame(
        {
            "t": "call",
            "capability": "tools",
            "method": "echo",
            "args": to_tagged(args),
            "kwargs": to_tagged({}),
        }
    )
    call = _common_call(frame[4:])
    assert call is not None and repr(call) == repr(Call("tools", "echo", args, {}))
