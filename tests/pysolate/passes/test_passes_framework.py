"""The framework's gate: a rewrite runs only if its derived source re-parses, re-compiles,
keeps every statement's lines and adds no name the law did not declare."""

from __future__ import annotations

import ast

import pytest

from pysolate import Effect, RegistrationError, capability
from pysolate._tools._capability import capability_methods
from pysolate.passes import (
    Applied,
    BatchLaw,
    NotApplicable,
    ProjectionLaw,
    Rewrite,
    apply_source_passes,
)
from pysolate.passes._framework import Edit


class Fixed:
    """A pass that proposes a fixed rewrite (or raises)."""

    name = "fixed"

    def __init__(self, rewrite: Rewrite | Exception) -> None:
        self._rewrite = rewrite

    def rewrite(
        self, source: str, tree: ast.Module, capabilities: object
    ) -> Rewrite | NotApplicable:
        if isinstance(self._rewrite, Exception):
            raise self._rewrite
        return self._rewrite


SOURCE = "x = 1\ny = x + 1\ny"


def apply(rewrite: Rewrite | Exception) -> tuple[str, object]:
    result = apply_source_passes(SOURCE, ast.parse(SOURCE), [Fixed(rewrite)], {})
    return result.source, result.outcomes[0]


def test_a_valid_rewrite_is_applied_with_both_hashes() -> None:
    source, outcome = apply(Rewrite((Edit(10, 15, "2"),), law="test"))
    assert source == "x = 1\ny = 2\ny"
    assert isinstance(outcome, Applied) and outcome.law == "test"
    assert outcome.original_hash != outcome.derived_hash


@pytest.mark.parametrize(
    ("rewrite", "reason"),
    [
        (Rewrite((Edit(10, 15, "("),), law="t"), "does not compile"),
        (Rewrite((Edit(5, 6, ";"),), law="t"), "other lines"),  # joins line 1 and 2
        (Rewrite((Edit(10, 15, "z"),), law="t"), "introduces ['z']"),
        (Rewrite((Edit(10, 15, "x.real"),), law="t"), "introduces ['real']"),
        (Rewrite((Edit(0, 3, ""), Edit(2, 4, "")), law="t"), "overlapping"),
        (RuntimeError("bug"), "pass failed: RuntimeError: bug"),
    ],
)
def test_a_bad_rewrite_leaves_the_source_unchanged(
    rewrite: Rewrite | Exception, reason: str
) -> None:
    source, outcome = apply(rewrite)
    assert source == SOURCE
    assert isinstance(outcome, NotApplicable) and reason in outcome.reason


def test_declared_introductions_are_allowed() -> None:
    source, outcome = apply(Rewrite((Edit(10, 15, "z"),), law="t", introduces=frozenset({"z"})))
    assert isinstance(outcome, Applied) and source == "x = 1\ny = z\ny"


class _Reads:
    @capability(effect=Effect.IMMUTABLE_READ)
    async def many(self, paths: list[str]) -> list[str]:
        return paths

    @capability(effect=Effect.WRITE)
    async def put(self, paths: list[str]) -> None: ...


@pytest.mark.parametrize(
    ("decorate", "message"),
    [
        (
            dict(effect=Effect.IMMUTABLE_READ, batch=BatchLaw("put", "path", "1")),
            "pure or immutable_read",
        ),
        (
            dict(effect=Effect.LIVE_READ, batch=BatchLaw("many", "path", "1")),
            "pure or immutable_read",
        ),
        (
            dict(effect=Effect.IMMUTABLE_READ, batch=BatchLaw("missing", "path", "1")),
            "pure or immutable_read",
        ),
        (
            dict(effect=Effect.IMMUTABLE_READ, batch=BatchLaw("many", "nope", "1")),
            "no parameter 'nope'",
        ),
        (
            dict(effect=Effect.IMMUTABLE_READ, projection=ProjectionLaw("many", "limit", "1")),
            "no parameter 'limit'",
        ),
    ],
)
def test_laws_relate_only_read_only_methods_of_one_object(
    decorate: dict[str, object], message: str
) -> None:
    """A law never adds authority: both ends are pure/immutable_read methods of the object."""

    class Tool(_Reads):
        @capability(**decorate)  # type: ignore[call-overload]
        async def one(self, path: str) -> str:
            return path

    with pytest.raises(RegistrationError, match=message):
        capability_methods(Tool())


def test_a_law_must_be_a_law_object() -> None:
    with pytest.raises(RegistrationError, match="BatchLaw"):
        capability(effect=Effect.PURE, batch=("many", "path"))  # type: ignore[call-overload]
