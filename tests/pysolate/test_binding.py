"""The precomputed binder binds exactly as ``inspect.Signature.bind`` + ``apply_defaults``,
and its key text is exactly ``canonical_arguments`` of what it bound."""

from __future__ import annotations

import inspect

from hypothesis import given, settings
from hypothesis import strategies as st

from occurrences import canonical_arguments
from occurrences.plain import to_tagged
from pysolate._tools._binding import Binder

P = inspect.Parameter
NAMES = ["a", "b", "c", "d", "e"]
KINDS = [
    P.POSITIONAL_ONLY,
    P.POSITIONAL_OR_KEYWORD,
    P.VAR_POSITIONAL,
    P.KEYWORD_ONLY,
    P.VAR_KEYWORD,
]
VALUES = st.one_of(
    st.integers(), st.text(max_size=3), st.none(), st.lists(st.integers(), max_size=2)
)


@st.composite
def signatures(draw: st.DrawFn) -> inspect.Signature:
    """Any valid signature over a few names: kinds in order, defaults where allowed."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=5))
    kinds = sorted(
        draw(st.lists(st.sampled_from(KINDS), min_size=len(names), max_size=len(names))),
        key=KINDS.index,
    )
    params: list[inspect.Parameter] = []
    seen_var: set[inspect._ParameterKind] = set()
    defaulted = False
    for name, kind in zip(names, kinds, strict=True):
        if kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            if kind in seen_var:
                continue
            seen_var.add(kind)
            params.append(P(name, kind))
            continue
        positional = kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
        # A positional parameter without a default may not follow one with a default.
        if draw(st.booleans()) or (positional and defaulted):
            params.append(P(name, kind, default=draw(VALUES)))
            defaulted = defaulted or positional
        else:
            params.append(P(name, kind))
    return inspect.Signature(params)


def reference(
    signature: inspect.Signature, args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        return ("TypeError", str(exc))
    bound.apply_defaults()
    return dict(bound.arguments), tuple(bound.args), dict(bound.kwargs)


def fast(binder: Binder, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    try:
        return binder.bind(args, kwargs)
    except TypeError as exc:
        return ("TypeError", str(exc))


@settings(max_examples=600, deadline=None)
@given(
    signature=signatures(),
    args=st.lists(VALUES, max_size=5).map(tuple),
    kwargs=st.dictionaries(st.sampled_from([*NAMES, "z"]), VALUES, max_size=4),
)
def test_binds_like_the_signature_and_keys_like_canonical_arguments(
    signature: inspect.Signature, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    binder = Binder(signature)
    expected = reference(signature, args, kwargs)
    got = fast(binder, args, kwargs)
    assert got == expected
    # Same types too (a tuple is not a list), and the same parameter order.
    assert repr(got) == repr(expected)
    if isinstance(got, tuple) and len(got) == 3:
        arguments = got[0]
        assert isinstance(arguments, dict)
        tagged_args = to_tagged(args)
        tagged_kwargs = to_tagged(kwargs)
        assert isinstance(tagged_args, list) and isinstance(tagged_kwargs, list)
        assert binder.key_text(arguments, tagged_args[1], tagged_kwargs[1]) == canonical_arguments(
            arguments
        )


def test_a_default_is_a_fresh_copy_never_the_methods_own() -> None:
    default: list[int] = [1]
    binder = Binder(inspect.Signature([P("x", P.POSITIONAL_OR_KEYWORD, default=default)]))
    arguments, args, _ = binder.bind((), {})
    assert arguments == {"x": [1]} and arguments["x"] is not default and args[0] is not default


def test_errors_are_the_signatures_own() -> None:
    def f(a: int, /, b: int, *, c: int = 3) -> None: ...

    signature = inspect.signature(f)
    binder = Binder(signature)
    for args, kwargs in [
        ((), {}),
        ((1, 2, 3), {}),
        ((1,), {"a": 1, "b": 2}),
        ((1, 2), {"b": 2}),
        ((1, 2), {"z": 0}),
    ]:
        assert fast(binder, args, kwargs) == reference(signature, args, kwargs)
        assert fast(binder, args, kwargs)[0] == "TypeError"  # type: ignore[index]


crossing_scalars = st.one_of(
    st.integers(),
    st.integers(min_value=10**4299, max_value=10**4300 + 5).map(lambda n: n * st_sign(n)),
    st.text(max_size=4),
    st.sampled_from(["\ud800", "a\udfffb", '"\\\n\x00\x1f\u2028', "\U0010ffff", "é"]),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
)


def st_sign(n: int) -> int:
    return -1 if n % 2 else 1


@settings(max_examples=600, deadline=None)
@given(
    names=st.lists(st.sampled_from([*NAMES, "é", "ñ_x"]), unique=True, max_size=4), data=st.data()
)
def test_scalar_calls_bind_and_key_like_the_general_path(
    names: list[str], data: st.DataObject
) -> None:
    """``bind_scalars`` is ``bind`` + ``key_text`` for the calls it takes (every parameter
    given positionally, each an int or a str that can cross), and takes exactly those."""
    signature = inspect.Signature([P(name, P.POSITIONAL_OR_KEYWORD) for name in names])
    binder = Binder(signature)
    args = tuple(
        data.draw(
            st.lists(crossing_scalars, min_size=max(len(names) - 1, 0), max_size=len(names) + 1)
        )
    )
    got = binder.bind_scalars(args)
    takes = len(args) == len(names) and all(_crosses(v) for v in args)
    assert (got is not None) == takes
    if got is not None:
        arguments, text = got
        bound, _, _ = binder.bind(args, {})
        assert repr(arguments) == repr(bound)
        assert text == canonical_arguments(arguments)


def _crosses(value: object) -> bool:
    if type(value) is int:
        return -(10**4300) < value < 10**4300  # type: ignore[operator]
    if type(value) is str:
        try:
            value.encode("utf-8")  # type: ignore[union-attr]
        except UnicodeEncodeError:
            return False
        return True
    return False


def test_scalar_calls_of_other_signatures_take_the_general_path() -> None:
    def f(a: int, *, b: int = 1) -> None: ...

    def g(*args: int) -> None: ...

    for fn in (f, g):
        assert Binder(inspect.signature(fn)).bind_scalars((1,)) is None
