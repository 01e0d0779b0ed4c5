"""ArgumentDecoder: the streamed decode of one JSON string argument equals ``json.loads``.

The properties: for any program, any JSON encoding of the arguments (ASCII escapes or
not, other keys before and after, any whitespace) and any chunking, the concatenated
output equals ``json.loads(arguments)[argument]`` character for character; for any text
at all, the decoder raises ``ToolArgumentsError`` exactly when ``json.loads`` fails, the
argument is missing, not a string, or given twice.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysolate.streams import ArgumentDecoder, ToolArgumentsError


def decode(text: str, cuts: list[int] | tuple[int, ...] = (), argument: str = "code") -> str:
    decoder = ArgumentDecoder(argument)
    out, pos = [], 0
    for cut in [*sorted(cuts), len(text)]:
        out.append(decoder.feed(text[pos:cut]))
        pos = cut
    out.append(decoder.close())
    assert decoder.complete
    return "".join(out)


def expected(text: str, argument: str = "code") -> str | None:
    """What the decoder must give, or None where it must raise."""
    pairs: list[tuple[str, object]] = []
    try:
        json.loads(text, object_pairs_hook=lambda p: pairs.extend(p) or dict(p))
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get(argument), str):
        return None
    top = [k for k, _ in pairs if k == argument]
    return value[argument] if len(top) == 1 else None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
programs = st.text(
    alphabet=st.characters(
        codec=None, exclude_categories=()
    ),  # any code point, lone surrogates too
    max_size=200,
) | st.sampled_from(["x = docs.search('a')\nx\n", 'print("\\u00e9\\n")\n', "\ud83d\ude00 = '\"'\n"])


@st.composite
def encoded_arguments(draw: st.DrawFn) -> tuple[str, str, list[int]]:
    program = draw(programs)
    before = draw(
        st.dictionaries(st.text(max_size=6).filter(lambda k: k != "code"), json_values, max_size=2)
    )
    after = draw(
        st.dictionaries(st.text(max_size=6).filter(lambda k: k != "code"), json_values, max_size=2)
    )
    after = {k: v for k, v in after.items() if k not in before}
    obj = {**before, "code": program, **after}
    text = json.dumps(
        obj,
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.none() | st.integers(0, 3)),
        separators=draw(st.sampled_from([None, (",", ":"), (" , ", " :  ")])),
    )
    cuts = draw(st.lists(st.integers(0, len(text)), max_size=12))
    return text, program, cuts


@settings(max_examples=400, deadline=None)
@given(encoded_arguments())
def test_random_programs_and_chunkings_decode_equal_to_json_loads(
    case: tuple[str, str, list[int]],
) -> None:
    text, program, cuts = case
    decoded = decode(text, cuts)
    assert decoded == json.loads(text)["code"]
    if not any("\ud800" <= ch <= "\udfff" for ch in program):  # else a lone pair may join
        assert decoded == program


def _mutations() -> st.SearchStrategy[str]:
    base = st.sampled_from(
        [
            '{"code": "a\\ud83d\\ude00b"}',
            '{"x": [1, {"y": null}], "code": "\\u0041\\n", "z": -1.5e3}',
            '{"code": "\\ud800\\ud800\\udc00", "n": NaN}',
            ' {"code" : "x"} ',
        ]
    )
    return st.tuples(
        base,
        st.integers(0, 60),
        st.sampled_from(['"', "\\", "u", "}", "{", ",", ":", "1", " ", "x", "\x01", ""]),
        st.booleans(),
    ).map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1] + (1 if t[3] else 0) :])


@settings(max_examples=600, deadline=None)
@given(_mutations(), st.lists(st.integers(0, 70), max_size=6))
def test_any_text_decodes_as_json_loads_or_is_refused(text: str, cuts: list[int]) -> None:
    want = expected(text)
    cuts = [c for c in cuts if c <= len(text)]
    if want is None:
        with pytest.raises(ToolArgumentsError):
            decode(text, cuts)
    else:
        assert decode(text, cuts) == want


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("", "end before the JSON is complete", id="empty"),
        pytest.param("[]", "not a JSON object", id="array"),
        pytest.param('{"code": 1}', "'code' argument is not a string", id="number"),
        pytest.param('{"code": null}', "'code' argument is not a string", id="null"),
        pytest.param('{"x": 1}', "have no 'code' argument", id="missing"),
        pytest.param('{"code": "a"', "end before the JSON is complete", id="unfinished"),
        pytest.param('{"code": "a"} x', "extra data", id="extra"),
        pytest.param('{"code": "a\x01"}', "control character", id="control"),
        pytest.param('{"code": "\\x"}', "invalid escape", id="escape"),
        pytest.param('{"code": "\\u12G4"}', "invalid \\\\uXXXX", id="hex"),
        pytest.param('{"code": "a", "code": "b"}', "twice", id="duplicate"),
        pytest.param('{"a": 01, "code": "x"}', "invalid value '01'", id="leading_zero"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_error(text: str, problem: str) -> None:
    with pytest.raises(ToolArgumentsError, match=problem):
        decode(text)


def test_characters_come_out_as_soon_as_they_are_decided() -> None:
    decoder = ArgumentDecoder("code")
    assert decoder.feed('{"other": "x", "co') == ""
    assert decoder.feed('de": "a = 1\\') == "a = 1"  # the escape is not decided yet
    assert decoder.feed("n\\ud83d") == "\n"  # a high surrogate waits for its low half
    assert decoder.feed("\\ude00") == "\U0001f600"
    assert decoder.feed('b"') == "b"
    assert decoder.found and not decoder.complete
    assert decoder.feed("}") == ""
    assert decoder.complete and decoder.close() == ""


def test_a_nested_key_named_like_the_argument_is_not_it() -> None:
    assert decode('{"meta": {"code": "no"}, "code": "yes"}') == "yes"
    with pytest.raises(ToolArgumentsError, match="no 'code'"):
        decode('{"meta": {"code": "no"}}')


def test_another_argument_name() -> None:
    assert decode('{"code": 1, "source": "x"}', argument="source") == "x"
