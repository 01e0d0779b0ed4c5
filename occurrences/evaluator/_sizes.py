"""Result sizes estimated *before* the work, for the operations that can amplify their inputs.

``x ** y``, a format width of ``{:999999999}``, a ``%``-format with many conversions: each
is cheap to write and can build a huge value. The evaluator asks these estimates first and
refuses (``NotKnown``) when the result would exceed a ``Limits`` bound, so the real
operation only ever runs on inputs whose result is known to be small. They mirror
CPython's own parsing of the same specs, so an estimate never undercounts.
"""

from __future__ import annotations

import re
from typing import Any

from .._exceptions import NotKnown
from ._budget import Budget, Limits

_SPEC_NUMBER = re.compile(r"\d+")


def spec_width(spec: object, limits: Limits) -> int:
    """The total of the widths/precisions in a format spec; NotKnown if any is huge."""
    if type(spec) is not str:
        raise NotKnown("format spec is not a str")
    if spec.endswith("n"):
        raise NotKnown("the 'n' format follows the process locale")
    total = 0
    for digits in _SPEC_NUMBER.findall(spec):
        if len(digits) > 9:
            raise NotKnown("format width too large")
        total += int(digits)
    if total > limits.max_str_len:
        raise NotKnown("format width too large")
    return total


def check_format_spec(spec: object, limits: Limits) -> None:
    """Refuse a format spec whose width or precision would build an oversized string."""
    spec_width(spec, limits)


def percent_format_cost(fmt: str | bytes, limits: Limits) -> tuple[int, int]:
    """(total of widths and precisions, number of conversions) of a ``%``-format.

    Mirrors CPython's own scan (``unicode_format_arg_parse``): a ``(key)`` may nest
    parentheses, then flags, width, ``.precision``, and one more character. A ``*`` width
    comes from the arguments and is refused.
    """
    text = fmt.decode("latin-1") if type(fmt) is bytes else fmt
    assert isinstance(text, str)
    n = len(text)
    total = specs = 0
    i = text.find("%")
    while i >= 0:
        i += 1
        specs += 1
        if i < n and text[i] == "(":
            depth = 1
            i += 1
            while i < n and depth:
                depth += (text[i] == "(") - (text[i] == ")")
                i += 1
        while i < n and text[i] in "-+ #0":
            i += 1
        for is_precision in (False, True):
            if is_precision:
                if i >= n or text[i] != ".":
                    break
                i += 1
            if i < n and text[i] == "*":
                raise NotKnown("'*' width in % format")
            start = i
            while i < n and "0" <= text[i] <= "9":
                i += 1
            if i - start > 9:
                raise NotKnown("format width too large")
            total += int(text[start:i] or 0)
        if total > limits.max_str_len:
            raise NotKnown("format width too large")
        i = text.find("%", i + 1)
    return total, specs


def check_power(b: Budget, base: Any, exp: Any) -> None:
    """Refuse ``base ** exp`` (ints) whose result would exceed the int bound."""
    if type(base) in (int, bool) and type(exp) in (int, bool) and exp >= 0 and abs(base) > 1:
        limit = b.limits.max_int_bits
        if exp > limit or (base.bit_length() - 1) * exp > limit:
            raise NotKnown("power too large")
