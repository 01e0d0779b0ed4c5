"""The precomputed binder binds exactly as ``inspect.Signature.bind`` + ``apply_defaults``,
and its key text is exactly ``canonical_arguments`` of what it bound."""

from __future__ import annotations

import inspect

from hypothesis import given, settings
from hypothesis import strategies as st

from occurrences import canonical_arguments
from occurrences._plain import to_tagged
from pysolate._binding import Binder

P = inspect.Parameter
NAMES = ["a", "b", "c", "d", "e"]
KINDS = [P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD, P.VAR_POSITIONAL, P.KEYWORD_ONLY, P.VAR_KEYWORD]
VALUES = st.one_of(st.integers(), st.text(max_size=3), st.none(), st.lists(st.integers(), max_size=2))


@st.composite
def signatures(draw: st.DrawFn) -> inspect.Signature:
    """Any valid signature over a few names: kinds in order, defaults where allowed."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=5))
    kinds = sorted(draw(st.lists(st.sampled_from(KINDS), min_size=len(names), max_size=len(names))), key=KINDS.index)
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


def reference(signature: inspect.Signature, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
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
        assert binder.key_text(arguments, tagged_args[1], tagged_kwargs[1]) == canonical_arguments(arguments)


def test_a_default_is_a_fresh_copy_never_the_methods_own() -> None:
    default: list[int] = [1]
    binder = Binder(inspect.Signature([P("x", P.POSITIONAL_OR_KEYWORD, default=default)]))
    arguments, args, _ = binder.bind((), {})
    assert arguments == {"x": [1]} and arguments["x"] is not default and args[0] is not default


def test_errors_are_the_signatures_own() -> None:
    def f(a: int, /, b: int, *, c: int = 3) -> None: ...

    signature = inspect.signature(f)
    binder = Binder(signature)
    for args, kwargs in [((), {}), ((1, 2, 3), {}), ((1,), {"a": 1, "b": 2}), ((1, 2), {"b": 2}), ((1, 2), {"z": 0})]:
        assert fast(binder, args, kwargs) == reference(signature, args, kwargs)
        assert fast(binder, args, kwargs)[0] == "TypeError"  # type: ignore[index]
