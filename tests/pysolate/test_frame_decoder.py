"""The stepped frame decoder (``_guest._stepped``) is the inline one, in bounded, linear steps.

- On every frame, generated or mutated, the stepped decoder accepts exactly what the inline
  path accepts, with equal values, and the call-key text it writes is the broker's
  (``argument_text`` of ``to_tagged``); a value past a bound is refused by both.
- Adversarial shapes (colliding keys, deep nesting, huge counts, long escapes) cost work
  linear in the frame's size: counted in the decoder's own units, and as a time ratio
  across sizes with generous bounds; no step holds more than ``STEP_UNITS`` of them.
"""

from __future__ import annotations

import json
import math
import struct
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from occurrences._callkey import argument_text
from occurrences.plain import (
    MAX_EQUAL_HASHES,
    MAX_ITEMS,
    NotPlain,
    check_keys,
    from_tagged,
    own,
    to_tagged,
)
from pysolate._guest import _json_tokens, _reader, _stepped
from pysolate._guest._frames import Call, ProtocolViolation, RefusedCall, parse_guest_frame
from pysolate._guest.child._wire import encode_frame
from pysolate._tools._compact import compact

P = 2**61 - 1


def stepped(payload: bytes) -> tuple[object, int, int]:
    """``(frame or "violation", steps, units)`` of the stepped decoder."""
    steps = _stepped.frame_steps(payload)
    count = 0
    try:
        while True:
            next(steps)
            count += 1
    except StopIteration as stop:
        return stop.value, count, 0
    except ProtocolViolation:
        return "violation", count, 0


def inline(payload: bytes) -> object:
    try:
        return parse_guest_frame(payload)
    except ProtocolViolation:
        return "violation"


def verdict(frame: object) -> object:
    """What the broker makes of a decoded frame: the call's values once it has checked them
    (``own``: a lone surrogate or a bound refuses it then), or the refusal's message."""
    if isinstance(frame, RefusedCall):
        return ("refused", frame.capability, frame.method)
    if isinstance(frame, Call):
        try:
            own(frame.args)
            own(frame.kwargs)
        except NotPlain:
            return ("refused", frame.capability, frame.method)
        return ("call", frame.capability, frame.method, repr(frame.args), repr(frame.kwargs))
    return frame if isinstance(frame, str) else repr(frame)


def call_frame(args: tuple[object, ...], kwargs: dict[str, object] | None = None) -> bytes:
    """The frame the Guest child writes for ``t.f(*args, **kwargs)``."""
    message = {
        "t": "call",
        "capability": "t",
        "method": "f",
        "args": to_tagged(args),
        "kwargs": to_tagged(kwargs or {}),
    }
    return encode_frame(message)[4:]


def raw_call(args_text: bytes, kwargs_text: bytes = b'["d",[]]') -> bytes:
    return (
        b'{"t":"call","capability":"t","method":"f","args":'
        + args_text
        + b',"kwargs":'
        + kwargs_text
        + b"}"
    )


texts = st.one_of(
    st.text(max_size=8),
    st.sampled_from(['"', "\\", "\n", "\x00", "\x1f", "\u2028", "😀", "é" * 3, "\\u0041"]),
    st.text(
        alphabet=st.sampled_from(["a", '"', "\\", "\n", "😀", "é", "\x01"]),
        min_size=20,
        max_size=300,
    ),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**1000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [-0.0, math.nan, -math.nan, struct.unpack(">d", bytes.fromhex("7ff0000000000001"))[0]]
    ),
    texts,
    st.binary(max_size=40),
)
keys = st.one_of(
    st.none(), st.booleans(), st.integers(), texts, st.tuples(st.integers(), st.text(max_size=2))
)
plain = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=25,
)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strings, hex and digests in pieces of 64 characters, so every generated string is cut."""
    for module in (_json_tokens, _reader):  # strings are read in the one, values in the other
        monkeypatch.setattr(module, "STRING_CHUNK", 64)
        monkeypatch.setattr(module, "STEP_UNITS", 8)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    args=st.lists(plain, max_size=4).map(tuple),
    kwargs=st.dictionaries(st.text(max_size=3), plain, max_size=3),
)
def test_a_guest_frame_decodes_as_the_inline_path_does(
    small_chunks: None, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    payload = call_frame(args, kwargs)
    frame, _, _ = stepped(payload)
    assert verdict(frame) == verdict(inline(payload))
    assert isinstance(frame, Call) and frame.tagged is not None
    tagged_args, tagged_kwargs = frame.tagged
    assert [argument_text(t, compact) for t in tagged_args] == [
        argument_text(to_tagged(a), compact) for a in frame.args
    ]
    assert [(n, argument_text(t, compact)) for (_, n), t in tagged_kwargs] == [  # type: ignore[misc]
        (n, argument_text(to_tagged(v), compact)) for n, v in frame.kwargs.items()
    ]


def _mutations(payload: bytes, draw: Callable[..., object]) -> bytes:
    where = draw(st.integers(min_value=0, max_value=len(payload)))
    kind = draw(st.sampled_from(["drop", "insert", "space", "dup"]))
    if kind == "drop":
        return payload[:where] + payload[where + 1 :]
    if kind == "insert":
        byte = draw(
            st.sampled_from(
                [b"[", b"]", b",", b'"', b"\\", b"{", b"}", b"1", b"n", b" ", b"\x00", b"\xff"]
            )
        )
        return payload[:where] + byte + payload[where:]
    if kind == "space":
        return payload.replace(b",", b" , ", 1).replace(b"[", b"[ ", 1)
    return payload[:where] + payload[where : where + 7] + payload[where:]


@settings(
    max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=st.lists(plain, max_size=3).map(tuple), data=st.data())
def test_a_mutated_frame_is_never_accepted_where_the_inline_path_refuses_it(
    small_chunks: None, args: tuple[object, ...], data: st.DataObject
) -> None:
    """Hostile bytes: the two may name different errors, never accept different values."""
    payload = _mutations(call_frame(args), data.draw)
    got, want = verdict(stepped(payload)[0]), verdict(inline(payload))
    if got[0] == "call" or want[0] == "call":
        assert got == want


@pytest.mark.parametrize("body", [b"0x1p99999", b"-0x1.8p1024"])
def test_a_float_past_the_double_range_is_a_protocol_violation_both_ways(
    small_chunks: None, body: bytes
) -> None:
    """``float.fromhex`` raises ``OverflowError`` for it (hypothesis found the stepped
    decoder letting that out of the broker); both paths refuse the frame instead."""
    payload = raw_call(b'["t",[["f","' + body + b'"]]]')
    assert stepped(payload)[0] == "violation"
    assert inline(payload) == "violation"
    assert stepped(raw_call(b'["t",[["l",[["f","' + body + b'"]]]]]'))[0] == "violation"


@pytest.mark.parametrize("key", [b'["d",[]]', b'["l",[]]'])
def test_a_dict_keyed_by_a_dict_or_list_is_a_protocol_violation_both_ways(
    small_chunks: None, key: bytes
) -> None:
    """``dict(items)`` raised ``TypeError`` out of the stepped decoder for an unhashable key
    (hypothesis found it: a mutated frame); both paths refuse the frame instead."""
    payload = raw_call(b'["t",[["d",[[' + key + b',["n"]]]]]]')
    assert stepped(payload)[0] == "violation"
    assert inline(payload) == "violation"


@pytest.mark.parametrize("args", [b'["t",[ ]]', b'["t",[\n\t]]'])
def test_whitespace_in_an_empty_argument_list_is_json_both_ways(
    small_chunks: None, args: bytes
) -> None:
    """``[ ]`` is an empty JSON array: the stepped decoder refused a call whose empty
    arguments had a space inside (hypothesis found it: a mutated frame), the inline one
    accepted it."""
    for payload in (raw_call(args), raw_call(b'["t",[]]', args.replace(b'"t"', b'"d"'))):
        assert (
            verdict(stepped(payload)[0])
            == verdict(inline(payload))
            == ("call", "t", "f", "()", "{}")
        )


# -- adversarial shapes: refused, and in linear work ------------------------------------------------

SHAPES: dict[str, Callable[[int], bytes]] = {
    "int keys of hash 0": lambda n: raw_call(
        b'["t",[["d",[' + b",".join(b'[["i","%d"],["n"]]' % (k * P) for k in range(n)) + b"]]]]"
    ),
    "tuple keys of one hash": lambda n: raw_call(
        b'["t",[["d",['
        + b",".join(b'[["t",[["i","%d"]]],["n"]]' % (k * P) for k in range(n))
        + b"]]]]"
    ),
    "ints and floats of hash 1": lambda n: raw_call(
        b'["t",[["d",['
        + b",".join(
            [b'[["f","%s"],["n"]]' % float(2 ** (61 * j)).hex().encode() for j in range(1, 17)]
            + [b'[["i","%d"],["n"]]' % (1 + k * P) for k in range(1, n)]
        )
        + b"]]]]"
    ),
    "tiny lists": lambda n: raw_call(b'["t",[["l",[' + b",".join([b'["l",[]]'] * n) + b"]]]]"),
    "huge count of None": lambda n: raw_call(b'["t",[["l",[' + b",".join([b'["n"]'] * n) + b"]]]]"),
    "deep nesting": lambda n: raw_call(b'["t",[' + b'["l",[' * n + b'["n"]' + b"]]" * n + b"]]"),
    "escapes": lambda n: raw_call(b'["t",[["s","' + b"\\u0001" * n + b'"]]]'),
    "surrogate pairs": lambda n: raw_call(b'["t",[["s","' + b"\\ud83d\\ude00" * n + b'"]]]'),
    "long plain string": lambda n: raw_call(b'["t",[["s","' + b"a" * (8 * n) + b'"]]]'),
}
REFUSED = {
    "int keys of hash 0",
    "tuple keys of one hash",
    "ints and floats of hash 1",
    "tiny lists",
    "huge count of None",
    "deep nesting",
}


@pytest.mark.parametrize("shape", SHAPES)
def test_an_adversarial_frame_is_refused_or_decoded_whatever_its_size(shape: str) -> None:
    payload = SHAPES[shape](60_000)
    frame, _, _ = stepped(payload)
    if shape in REFUSED:
        assert isinstance(frame, RefusedCall | str), (
            frame
        )  # refused at the call, or a violation (deeper than JSON nests)
        if shape != "deep nesting":
            assert isinstance(frame, RefusedCall)
    else:
        assert isinstance(frame, Call)


def _work(payload: bytes) -> tuple[int, int, float]:
    """``(units of work, most units in one step, seconds)`` of decoding ``payload``."""
    decoder_units: list[int] = []
    original = _reader.Reader.__init__

    def counting(self: _reader.Reader, text: str, controls: bool = True) -> None:
        original(self, text, controls)
        decoder_units.append(0)
        self_ref.append(self)

    self_ref: list[_reader.Reader] = []
    _reader.Reader.__init__ = counting  # type: ignore[method-assign]
    try:
        steps = _stepped.frame_steps(payload)
        worst, last, t0 = 0, 0, time.process_time()
        try:
            while True:
                next(steps)
                tokens = self_ref[0].tokens if self_ref else 0
                worst, last = max(worst, tokens - last), tokens
        except (StopIteration, ProtocolViolation):
            pass
        seconds = time.process_time() - t0
    finally:
        _reader.Reader.__init__ = original  # type: ignore[method-assign]
    total = self_ref[0].tokens if self_ref else 0
    return total, max(worst, total - last), seconds


@pytest.mark.parametrize("shape", SHAPES)
def test_decoding_work_is_linear_in_the_frames_size(shape: str) -> None:
    """Units per byte stay flat from 2,000 to 40,000 repetitions (within 2x), time grows at
    most 40x for 20x the size (linear, with room for a noisy machine: quadratic is 400x),
    and no step does more than ``STEP_UNITS`` plus one item's worth. The small frame's time
    (about 0.2 ms) is the best of five and counted as at least 0.5 ms: below that the
    machine's noise alone gave a linear decoder a ratio of 40.4; a quadratic one takes
    seconds on the large frame (the bug this guards took 15 s)."""
    small, large = SHAPES[shape](2_000), SHAPES[shape](40_000)
    (units_small, _, time_small), (units_large, worst, time_large) = (
        min(_work(small) for _ in range(5)),
        min(_work(large) for _ in range(3)),
    )
    assert units_large / len(large) <= 2 * max(units_small / len(small), 1e-9)
    assert time_large <= 40 * max(time_small, 5e-4)
    assert worst <= _reader.STEP_UNITS + _reader.STRING_CHUNK // _reader.UNIT_CHARS + 64


def test_colliding_keys_are_refused_before_a_dict_is_built() -> None:
    """``check_keys`` counts hashes in a dict keyed by the hashes themselves: linear, so
    30,000 keys of hash 0 are refused in about the time 3,000 take (before the fix one
    frame of them froze the Host for 15-19 s)."""
    times = []
    for n in (3_000, 30_000):
        keys = [k * P for k in range(n)]
        t0 = time.process_time()
        with pytest.raises(NotPlain, match="keys of one hash"):
            check_keys(keys)
        times.append(time.process_time() - t0)
    assert times[1] <= 10 * max(times[0], 1e-4)  # it stops at the 33rd: no growth at all


@pytest.mark.parametrize(
    "value",
    [
        {k * P: 0 for k in range(MAX_EQUAL_HASHES + 1)},
        {(k * P,): 0 for k in range(MAX_EQUAL_HASHES + 1)},
        list(range(MAX_ITEMS + 1)),
        [[0] * (MAX_ITEMS - 1)] * 3,
    ],
    ids=["int keys", "tuple keys", "a long list", "many items in all"],
)
def test_every_path_refuses_a_value_past_a_bound(value: object) -> None:
    """``to_tagged`` (the child, the in-process Guest), ``own`` (the broker) and
    ``from_tagged`` and the stepped decoder (the Host's decoding) refuse it alike."""
    errors = []
    for refuse in (to_tagged, own):
        with pytest.raises(NotPlain) as got:
            refuse(value)
        errors.append(str(got.value))
    tagged = json.loads(compact(_unchecked_tagged(value)))
    with pytest.raises(NotPlain) as got:
        from_tagged(tagged)
    errors.append(str(got.value))
    frame, _, _ = stepped(raw_call(compact(["t", [tagged]]).encode()))
    assert isinstance(frame, RefusedCall)
    errors.append(str(frame.error))
    assert len(set(errors)) == 1, errors


def _unchecked_tagged(value: object) -> object:
    """``to_tagged`` without its bounds (what a hostile Guest can write)."""
    if isinstance(value, dict):
        return ["d", [[_unchecked_tagged(k), _unchecked_tagged(v)] for k, v in value.items()]]
    if isinstance(value, list | tuple):
        return ["l" if isinstance(value, list) else "t", [_unchecked_tagged(v) for v in value]]
    return to_tagged(value)
