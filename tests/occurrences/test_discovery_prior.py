"""Discovery from the globals earlier turns of a session left (``PriorGlobals``).

Known plain values are used like values the program computed; opaque names are unknown
code, never the builtin of the same name; mutable prior values may share structure with
one another, so mutating one forgets them all.
"""

from __future__ import annotations

import ast

from occurrences import Discovery, Effect, MethodSpec, Occurrence, OccurrenceId, PriorGlobals

CAPS = {
    "docs": {"search": MethodSpec(Effect.PURE, "1")},
    "workspace": {"read_text": MethodSpec(Effect.IMMUTABLE_READ, "1")},
}


class Sink:
    """Records each occurrence's evaluated arguments (``UNKNOWN`` when never computable)."""

    def __init__(self) -> None:
        self.records: dict[OccurrenceId, object] = {}

    def discovered(self, occurrence: Occurrence) -> None:
        self.records[occurrence.id] = "?"

    def arguments_known(
        self, oid: OccurrenceId, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        self.records[oid] = args

    def arguments_unknown(self, oid: OccurrenceId) -> None:
        self.records[oid] = "UNKNOWN"

    def control_changed(self, oid: OccurrenceId, discardable: bool, dead: bool) -> None:
        pass


def show(
    src: str, known: dict[str, object] | None = None, opaque: frozenset[str] = frozenset()
) -> list[str]:
    sink = Sink()
    Discovery(CAPS, sink, PriorGlobals(known or {}, opaque)).add_statements(ast.parse(src).body)
    return [
        f"{oid.site.capability}.{oid.site.method}@{oid.site.lineno} {args}"
        for oid, args in sink.records.items()
    ]


def test_a_known_list_from_an_earlier_turn_expands_a_loop() -> None:
    assert show("for p in paths:\n    workspace.read_text(p)", {"paths": ["a", "b"]}) == [
        "workspace.read_text@2 ('a',)",
        "workspace.read_text@2 ('b',)",
    ]


def test_without_the_prior_value_the_loop_is_not_expanded() -> None:
    assert (
        show("for p in paths:\n    workspace.read_text(p)") == []
    )  # followed for its effects only


def test_known_scalars_compute_arguments() -> None:
    assert show("docs.search(prefix + str(n * 2))", {"prefix": "q", "n": 21}) == [
        "docs.search@1 ('q42',)"
    ]


def test_an_opaque_name_shadows_the_builtin() -> None:
    assert show("docs.search(str(len('ab')))", opaque=frozenset({"len"})) == [
        "docs.search@1 UNKNOWN"
    ]
    assert show("docs.search(str(len('ab')))") == ["docs.search@1 ('2',)"]


def test_calling_an_opaque_value_is_unknown_code() -> None:
    """After an opaque call nothing mutable is known: the loop over ``paths`` is not expanded."""
    lines = show(
        "f()\nfor p in paths:\n    workspace.read_text(p)", {"paths": ["a"]}, frozenset({"f"})
    )
    assert lines == []


def test_mutating_one_prior_value_forgets_every_mutable_prior_value() -> None:
    """``a`` and ``b`` may be one list (``b = a`` in an earlier turn): appending to one
    forgets both; an immutable prior value stays known."""
    src = "a.append('z')\nfor p in b:\n    workspace.read_text(p)\nworkspace.read_text(t[0])"
    assert show(src, {"a": ["x"], "b": ["x"], "t": ("k",)}) == ["workspace.read_text@4 ('k',)"]
    assert show(
        src.replace("a.append", "c.append"), {"a": ["x"], "b": ["x"], "c": ["y"], "t": ("k",)}
    ) == ["workspace.read_text@4 ('k',)"]


def test_a_prior_value_rebinding_a_capability_name_wins() -> None:
    assert show("docs.search('q')", {"docs": 5}) == []


def test_prior_values_are_copied() -> None:
    paths = ["a"]
    show("paths.append('b')", {"paths": paths})
    assert paths == ["a"]
