"""Binding a call to its method's signature, precomputed once per method.

``inspect.Signature.bind`` + ``apply_defaults`` is the reference: it is what calling the
method would do, and its ``TypeError`` messages are what the program sees for a call that
does not fit. It is also about 5 µs per call, on a path (every Guest call) whose whole
budget is tens of microseconds. ``Binder`` does the common case itself — a signature of
plain positional and keyword parameters, arguments that fit — and hands anything else
(``*args``/``**kwargs`` parameters, a missing or unexpected argument, a duplicate) to the
reference, so every error, and every odd signature, is exactly the reference's.

What it returns is what ``BoundArguments`` would hold after ``apply_defaults``:
``arguments`` in parameter order, ``args`` the values of the positional parameters,
``kwargs`` those of the keyword-only ones (``tests/pysolate/test_binding.py`` checks this
against the reference on generated signatures and calls).

Call keys are made of the bound arguments (``occurrences.canonical_arguments``: their
tagged form, sorted by name). ``Binder.key_text`` builds the same text from tagged forms
the caller already has (``occurrences.plain.own`` makes both a copy and the tagged form
in one walk), so no argument is walked twice.
"""

from __future__ import annotations

import inspect
import json.encoder
from collections.abc import Mapping

from occurrences import KEY_INLINE_CHARS, argument_text, canonical_arguments, fresh_copy
from occurrences.plain import INT_BOUND, to_tagged

from ._compact import compact

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_SIMPLE = (*_POSITIONAL, inspect.Parameter.KEYWORD_ONLY)


_json_text = json.encoder.encode_basestring
"""A str as compact JSON text (``ensure_ascii=False``): the escaping ``compact`` uses."""

_SHORT_STR = KEY_INLINE_CHARS // 6
"""Longest str whose tagged text is within ``KEY_INLINE_CHARS`` however it escapes."""


class Binder:
    """Binds calls to one signature as ``Signature.bind`` + ``apply_defaults`` would."""

    __slots__ = (
        "_by_keyword",
        "_defaults",
        "_keyword_only",
        "_order",
        "_positional",
        "_positional_slots",
        "_signature",
        "_simple",
        "_slot_texts",
        "_sorted",
        "_tagged_defaults",
    )

    def __init__(self, signature: inspect.Signature) -> None:
        params = list(signature.parameters.values())
        self._signature = signature
        # Only plain parameters are bound here; anything else goes to the reference.
        self._simple = all(p.kind in _SIMPLE for p in params)
        self._order = tuple(p.name for p in params)
        self._positional = tuple(p.name for p in params if p.kind in _POSITIONAL)
        self._keyword_only = tuple(
            p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY
        )
        self._by_keyword = frozenset(
            p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY
        )
        self._defaults = {
            p.name: p.default for p in params if p.default is not inspect.Parameter.empty
        }
        # Defaults are plain (checked at registration); tagging a non-plain one is left to
        # the reference path (``key_text`` falls back when a tag is missing).
        tagged: dict[str, object] = {}
        for name, default in self._defaults.items():
            try:
                tagged[name] = to_tagged(default)
            except (TypeError, ValueError):
                continue
        self._tagged_defaults = tagged
        self._sorted = tuple(sorted(self._order))
        # When every parameter is positional, a call giving them all positionally binds to
        # ``args`` as they are; its key pairs each name's tag with the argument at its index.
        self._positional_slots: tuple[tuple[list[str], int], ...] | None = (
            tuple((["s", name], self._order.index(name)) for name in self._sorted)
            if self._simple and len(self._positional) == len(self._order)
            else None
        )
        # The same pairs as text: each name's ``[["s",name],`` and its argument's index.
        self._slot_texts: tuple[tuple[str, int], ...] | None = (
            None
            if self._positional_slots is None
            else tuple((f'[["s",{_json_text(tag[1])}],', i) for tag, i in self._positional_slots)
        )

    def bind_scalars(self, args: tuple[object, ...]) -> tuple[dict[str, object], str] | None:
        """``(arguments, key text)`` of a call giving every parameter positionally as an
        ``int`` or a ``str`` that can cross (the common call), or None for any other call.

        What ``bind`` and ``key_text`` give for it (``arguments`` in parameter order, the
        call's own ``args`` as its ``args``), with the key text written directly: the
        compact JSON of an int's tag ``["i","<digits>"]`` needs no escaping, a str's
        ``["s",...]`` is the encoder's own string escaping (``json.encoder.encode_basestring``,
        what ``compact`` calls for every str). None also for a value that would fail to
        cross (a lone surrogate, an over-long int): the caller's general path raises for it.
        """
        slots = self._slot_texts
        if slots is None or len(args) != len(slots):
            return None
        texts: list[str] = []
        for prefix, i in slots:
            value = args[i]
            if type(value) is int:
                if not -INT_BOUND < value < INT_BOUND:
                    return None
                texts.append(f'{prefix}["i","{value}"]]')
            elif type(value) is str:
                if not value.isascii():
                    try:
                        value.encode("utf-8")
                    except UnicodeEncodeError:
                        return None
                if len(value) > _SHORT_STR:  # possibly past KEY_INLINE_CHARS: maybe a digest
                    texts.append(f"{prefix}{argument_text(['s', value], compact)}]")
                else:
                    texts.append(f'{prefix}["s",{_json_text(value)}]]')
            else:
                return None
        # Lengths equal (above); ``zip``'s ``strict`` keyword alone costs 0.16 µs, a third of this dict.
        return dict(zip(self._order, args)), f'["d",[{",".join(texts)}]]'  # noqa: B905

    def bind(
        self, args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> tuple[dict[str, object], tuple[object, ...], dict[str, object]]:
        """``(arguments, args, kwargs)`` as bound and defaulted by the reference.

        Defaults are fresh copies (a receipt never shares the method's own default).
        Raises ``TypeError`` (the reference's own) when the call does not fit.
        """
        if self._positional_slots is not None and not kwargs and len(args) == len(self._order):
            return dict(zip(self._order, args, strict=True)), args, {}
        if self._simple and len(args) <= len(self._positional):
            given = dict(zip(self._positional, args, strict=False))
            fits = True
            for name, value in kwargs.items():
                if name in given or name not in self._by_keyword:
                    fits = False
                    break
                given[name] = value
            if fits:
                arguments: dict[str, object] = {}
                for name in self._order:
                    if name in given:
                        arguments[name] = given[name]
                    elif name in self._defaults:
                        arguments[name] = fresh_copy(self._defaults[name])
                    else:
                        fits = False
                        break
                if fits:
                    return (
                        arguments,
                        tuple([arguments[name] for name in self._positional]),
                        {name: arguments[name] for name in self._keyword_only},
                    )
        bound = self._signature.bind(*args, **kwargs)
        given_names = set(bound.arguments)
        bound.apply_defaults()
        for name in bound.arguments:
            if name not in given_names:
                bound.arguments[name] = fresh_copy(bound.arguments[name])
        return dict(bound.arguments), tuple(bound.args), dict(bound.kwargs)

    def key_text(
        self,
        arguments: Mapping[str, object],
        tagged_args: list[object],
        tagged_kwargs: list[list[object]],
    ) -> str:
        """``canonical_arguments(arguments)``, from the tagged forms of the call as made.

        ``tagged_args`` are the tagged positional arguments, ``tagged_kwargs`` the
        ``[tagged name, tagged value]`` pairs of the keyword ones (the bodies of
        ``to_tagged(args)`` and ``to_tagged(kwargs)``), of the call ``arguments`` was
        bound from.
        """
        if not self._simple:
            return canonical_arguments(arguments)
        slots = self._slot_texts
        if slots is not None and not tagged_kwargs and len(tagged_args) == len(slots):
            return f'["d",[{",".join([f"{prefix}{argument_text(tagged_args[i], compact)}]" for prefix, i in slots])}]]'
        tags: dict[str, object] = dict(zip(self._positional, tagged_args, strict=False))
        for pair in tagged_kwargs:
            name_tag, value_tag = pair
            assert isinstance(name_tag, list)
            tags[name_tag[1]] = value_tag
        body = []
        for name in self._sorted:
            tag = tags.get(name)
            if tag is None:
                tag = self._tagged_defaults.get(name)
                if tag is None:
                    return canonical_arguments(arguments)
            body.append(f"[{compact(['s', name])},{argument_text(tag, compact)}]")
        return f'["d",[{",".join(body)}]]'
