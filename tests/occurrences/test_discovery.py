"""Occurrence discovery, pyflakes-style: a source snippet and the occurrences it must yield.

Each test names one rule. ``show`` renders what discovery reported as compact lines:
``cap.method@line[path] <args>`` where ``<args>`` is the evaluated argument tuple (plus
keywords), ``?`` while blocked on results, ``UNKNOWN`` when it can never be computed;
then flags: ``post`` (not pre-write), ``disc`` (discardable), ``dead``, ``deps=lines``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import pytest

import occurrences.discovery._effects
from occurrences import Discovery, Effect, MethodSpec, Occurrence, OccurrenceId
from occurrences.discovery._control import (
    MAX_CALL_DEPTH,
    MAX_EXPANSIONS,
    MAX_ITERATIONS,
    NON_MUTATING_METHODS,
)

CAPS = {
    "docs": {
        "search": MethodSpec(Effect.PURE, "1"),
        "get": MethodSpec(Effect.PURE, "1"),
        "now": MethodSpec(Effect.LIVE_READ, "1"),
    },
    "workspace": {
        "read_text": MethodSpec(Effect.IMMUTABLE_READ, "1"),
        "list_dir": MethodSpec(Effect.IMMUTABLE_READ, "1"),
        "write_text": MethodSpec(Effect.WRITE, "1"),
    },
}


@dataclass
class Record:
    occurrence: Occurrence
    arguments: object = "?"
    discardable: bool = False
    dead: bool = False


class Sink:
    def __init__(self) -> None:
        self.records: dict[OccurrenceId, Record] = {}

    def discovered(self, occurrence: Occurrence) -> None:
        self.records[occurrence.id] = Record(
            occurrence, discardable=occurrence.discardable, dead=occurrence.dead
        )

    def arguments_known(
        self, oid: OccurrenceId, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        self.records[oid].arguments = (
            (*args, *(f"{k}={v!r}" for k, v in kwargs.items())) if kwargs else args
        )

    def arguments_unknown(self, oid: OccurrenceId) -> None:
        self.records[oid].arguments = "UNKNOWN"

    def control_changed(self, oid: OccurrenceId, discardable: bool, dead: bool) -> None:
        self.records[oid].discardable, self.records[oid].dead = discardable, dead


class Run:
    def __init__(self, src: str) -> None:
        self.sink = Sink()
        self.discovery = Discovery(CAPS, self.sink)
        self.discovery.add_statements(ast.parse(src).body)

    def oid(self, lineno: int, path: tuple[object, ...] = ()) -> OccurrenceId:
        (found,) = [o for o in self.sink.records if o.site.lineno == lineno and o.path == path]
        return found

    def complete(self, lineno: int, value: object) -> Run:
        self.discovery.result_known(self.oid(lineno), value)
        return self

    def fail(self, lineno: int) -> Run:
        self.discovery.result_unknown(self.oid(lineno))
        return self

    def show(self) -> list[str]:
        lines = []
        for oid, rec in self.sink.records.items():
            o = rec.occurrence
            path = "" if not oid.path else "[" + ",".join(map(str, oid.path)) + "]"
            text = (
                f"{oid.site.capability}.{oid.site.method}@{oid.site.lineno}{path} {rec.arguments}"
            )
            flags = [
                *(["post"] if not o.pre_write else []),
                *(["disc"] if rec.discardable else []),
                *(["dead"] if rec.dead else []),
            ]
            deps = sorted({d.site.lineno for d in o.data_deps})
            if deps:
                flags.append("deps=" + ",".join(map(str, deps)))
            lines.append(" ".join([text, *flags]))
        return lines


def show(src: str) -> list[str]:
    return Run(src).show()


# -- call sites and capability trust -------------------------------------------------------


def test_capability_calls_are_found_and_other_calls_are_not() -> None:
    assert show(
        'print(len("ab"))\nx = docs.search("q")\n"s".upper()\nworkspace.read_text("a")\n'
    ) == [
        "docs.search@2 ('q',)",
        "workspace.read_text@4 ('a',)",
    ]


def test_call_sites_inside_expressions_and_nested_calls() -> None:
    assert show(
        'y = [docs.search("a"), 1 + len(docs.get(k="b"))]\ndocs.get(docs.search("c"))\n'
    ) == [
        "docs.search@1 ('a',)",
        "docs.get@1 (\"k='b'\",)",
        "docs.search@2 ('c',)",
        "docs.get@2 ? deps=2",
    ]


def test_site_identity_is_the_source_position() -> None:
    run = Run('x = 1\ny = docs.search(  "a" )\n')
    (oid,) = run.sink.records
    assert oid.site.position == (2, 4, 2, 23)
    assert oid.site.control == () and oid.path == ()


def test_aliases_of_capability_and_method_are_followed() -> None:
    assert show('ws = workspace\nread = workspace.read_text\nws.read_text("a")\nread("b")\n') == [
        "workspace.read_text@3 ('a',)",
        "workspace.read_text@4 ('b',)",
    ]


def test_rebinding_a_capability_name_stops_trusting_it_but_not_earlier_aliases() -> None:
    assert show(
        'ws = workspace\nworkspace = make()\nworkspace.read_text("a")\nws.read_text("b")\n'
    ) == [
        "workspace.read_text@4 ('b',)",
    ]


def test_deleting_a_capability_name_stops_trusting_it() -> None:
    assert show('del docs\ndocs.search("a")\n') == []


def test_shadowing_by_import_for_target_and_def_stops_trusting_it() -> None:
    assert show('import docs\ndocs.search("a")\n') == []
    assert show('for docs in [1]:\n    pass\ndocs.search("a")\n') == []
    assert show('def docs(): pass\ndocs.search("a")\n') == []


def test_global_declaration_of_a_capability_stops_trusting_it() -> None:
    assert (
        show('def f():\n    global workspace\n    workspace = 1\nworkspace.read_text("a")\n') == []
    )


def test_passing_a_capability_to_unknown_code_stops_trusting_it_and_all_aliases() -> None:
    src = 'ws = workspace\nr = workspace.read_text\nhelper(workspace)\nws.read_text("a")\ndocs.get(1)\n'
    assert show(src) == ["docs.get@5 (1,)"]
    # Calling an alias that is no longer trusted is calling unknown code.
    assert show('r = workspace.read_text\nhelper(r)\nr("b")\ndocs.get(1)\n') == [
        "docs.get@4 (1,) post"
    ]


def test_putting_a_capability_in_a_container_is_an_escape() -> None:
    assert show('tools = [docs]\ndocs.search("a")\n') == []


def test_assigning_an_attribute_of_a_capability_stops_trusting_it() -> None:
    assert show('docs.search = len\ndocs.search("a")\n') == []


def test_reading_an_attribute_of_a_capability_is_not_an_escape() -> None:
    assert show('n = docs.name\ndocs.search("a")\n') == ["docs.search@2 ('a',)"]


# -- argument values and what makes them unknown --------------------------------------------


def test_arguments_from_earlier_bindings_fstrings_and_unpacking() -> None:
    src = 'base = "src"\na, (b, c) = 1, ("x", "y")\nname = f"{base}/{b}{a + 1}.py"\nworkspace.read_text(name, c)\n'
    assert show(src) == ["workspace.read_text@4 ('src/x2.py', 'y')"]


def test_unknown_value_makes_arguments_unknown() -> None:
    assert show("x = compute()\ndocs.search(x)\n") == ["docs.search@2 UNKNOWN"]


def test_item_assignment_makes_containers_unknown() -> None:
    assert show('cfg = {"k": 1}\ncfg["k"] = 2\ndocs.get(cfg)\n') == ["docs.get@3 UNKNOWN"]


def test_mutating_method_makes_containers_unknown() -> None:
    assert show('cfg = {"k": 1}\ncfg.update(k=2)\ndocs.get(cfg)\n') == ["docs.get@3 UNKNOWN"]
    assert show("items = [1]\nitems.append(2)\ndocs.get(items)\n") == ["docs.get@3 UNKNOWN"]


def test_mutation_through_an_alias_makes_every_container_unknown() -> None:
    assert show("a = [[1]]\nb = a[0]\na[0].append(2)\ndocs.get(b)\n") == ["docs.get@4 UNKNOWN"]


def test_non_mutating_methods_and_immutable_values_stay_known() -> None:
    src = 'items = ["b", "a"]\nn = items.count("a")\ns = "x"\ns.upper()\ndocs.get(items, n, s)\n'
    assert show(src) == ["docs.get@5 (['b', 'a'], 1, 'x')"]


def test_augmented_assignment_is_exact_on_immutables_and_unknown_on_containers() -> None:
    assert show("n = 1\nn += 2\ndocs.get(n)\n") == ["docs.get@3 (3,)"]
    assert show("xs = [1]\nxs += [2]\ndocs.get(xs)\n") == ["docs.get@3 UNKNOWN"]


def test_a_call_to_program_code_that_receives_a_container_makes_it_unknown() -> None:
    assert show("items = [1]\ndef f(x):\n    x.append(2)\nf(items)\ndocs.get(items)\n") == [
        "docs.get@5 UNKNOWN"
    ]


def test_a_called_function_with_global_write_makes_the_name_unknown() -> None:
    src = "n = 1\ndef bump():\n    global n\n    n = n + 1\nbump()\nn = n\ndocs.get(n)\n"
    assert show(src) == ["docs.get@7 UNKNOWN post"], "and bump() is code not followed"


def test_shadowed_builtin_is_not_the_builtin() -> None:
    assert show('len = something()\ndocs.get(len("ab"))\n') == ["docs.get@2 UNKNOWN post"]


# -- data edges ------------------------------------------------------------------------------


def test_a_result_is_a_data_edge_and_arguments_follow_when_it_arrives() -> None:
    run = Run('r = docs.search("q")\ntop = r[0]\ndocs.get(top.upper())\n')
    assert run.show()[1] == "docs.get@3 ? deps=1"
    run.complete(1, ["ab", "cd"])
    assert run.show()[1] == "docs.get@3 ('AB',) deps=1"


def test_unpacking_a_result() -> None:
    run = Run('a, b = docs.search("q")\ndocs.get(b)\n').complete(1, ["x", "y"])
    assert run.show()[1] == "docs.get@2 ('y',) deps=1"
    run = Run('a, b = docs.search("q")\ndocs.get(b)\n').complete(1, ["x", "y", "z"])
    assert run.show()[1] == "docs.get@2 UNKNOWN deps=1"


def test_a_failed_result_leaves_dependents_unknown() -> None:
    assert (
        Run('r = docs.search("q")\ndocs.get(r)\n').fail(1).show()[1] == "docs.get@2 UNKNOWN deps=1"
    )


def test_non_speculable_results_are_unknown_without_an_edge() -> None:
    assert show("t = docs.now()\ndocs.get(t)\n") == ["docs.now@1 ()", "docs.get@2 UNKNOWN"]


# -- views ------------------------------------------------------------------------------------


def test_a_write_or_unknown_method_puts_later_reads_of_that_capability_on_a_new_view() -> None:
    assert show('workspace.write_text("a", "b")\nworkspace.read_text("a")\ndocs.get(1)\n') == [
        "workspace.write_text@1 ('a', 'b')",
        "workspace.read_text@2 ('a',) post",
        "docs.get@3 (1,)",
    ]
    assert show("docs.mystery()\ndocs.get(1)\n") == ["docs.mystery@1 ()", "docs.get@2 (1,) post"]


def test_unknown_code_puts_every_capability_on_a_new_view() -> None:
    assert show('exec("x")\ndocs.get(1)\nworkspace.read_text("a")\n') == [
        "docs.get@2 (1,) post",
        "workspace.read_text@3 ('a',) post",
    ]


def test_passing_a_function_to_a_builtin_is_unknown_code() -> None:
    assert show("def k(v):\n    return v\nxs = sorted([2, 1], key=k)\ndocs.get(1)\n") == [
        "docs.get@4 (1,) post"
    ]
    assert show("xs = sorted([2, 1], key=lambda v: helper(v))\ndocs.get(1)\n") == [
        "docs.get@2 (1,) post"
    ]
    assert show("xs = sorted([2, 1], key=lambda v: docs.get(v))\ndocs.get(1)\n") == [
        "docs.get@2 (1,) post"
    ]
    assert show("f = lambda v: v.append(1)\nxs = list(map(f, [[1]]))\ndocs.get(1)\n") == [
        "docs.get@3 (1,) post"
    ]


def test_a_lambda_that_only_computes_is_not_unknown_code() -> None:
    src = 'names = ["b", "A"]\nkey = lambda s: s.lower()\nordered = sorted(names, key=key)\nlast = max(names, key=lambda s: (len(s), s))\ndocs.get(last)\n'
    assert show(src) == ["docs.get@5 ('b',)"]


# -- loops -----------------------------------------------------------------------------------


def test_for_over_a_known_list_expands_one_occurrence_per_iteration() -> None:
    run = Run('for i, f in enumerate(["a", "b"]):\n    workspace.read_text(f, i)\n')
    assert run.show() == ["workspace.read_text@2[0] ('a', 0)", "workspace.read_text@2[1] ('b', 1)"]
    oid = run.oid(2, (1,))
    assert [frame.kind.value for frame in oid.site.control] == ["for"]


def test_nested_loops_have_a_path_of_indices() -> None:
    assert show('for a in "xy":\n    for b in range(2):\n        docs.get(a, b)\n') == [
        "docs.get@3[0,0] ('x', 0)",
        "docs.get@3[0,1] ('x', 1)",
        "docs.get@3[1,0] ('y', 0)",
        "docs.get@3[1,1] ('y', 1)",
    ]


def test_for_over_a_result_expands_when_the_result_arrives() -> None:
    run = Run('for f in workspace.list_dir("."):\n    workspace.read_text(f)\n')
    assert run.show() == ["workspace.list_dir@1 ('.',)"]
    run.complete(1, ["a", "b"])
    assert run.show()[1:] == ["workspace.read_text@2[0] ('a',)", "workspace.read_text@2[1] ('b',)"]


def test_too_long_or_unknown_iterables_are_not_expanded() -> None:
    assert show(f"for i in range({MAX_ITERATIONS + 1}):\n    docs.get(i)\n") == []
    assert show('for i in {"a", "b"}:\n    docs.get(i)\n') == [], "str set order is not knowable"
    assert show("for i in stuff():\n    docs.get(i)\n") == []


def test_while_loops_are_not_expanded_but_their_writes_count() -> None:
    src = 'while cond():\n    docs.get(1)\n    workspace.write_text("a", "b")\nworkspace.read_text("a")\n'
    assert show(src) == ["workspace.read_text@4 ('a',) post"]


def test_names_assigned_in_a_loop_body_are_unknown_after_it() -> None:
    src = "x = 0\nfor i in [1, 2]:\n    x = i\ndocs.get(x, i)\n"
    assert show(src)[-1] == "docs.get@4 UNKNOWN"


def test_an_empty_known_loop_changes_nothing() -> None:
    assert show("x = 0\nfor i in []:\n    x = 1\ndocs.get(x)\n") == ["docs.get@4 (0,)"]


def test_break_and_continue_under_known_conditions_are_followed_exactly() -> None:
    src = 'for f in "abc":\n    if f == "a":\n        continue\n    docs.get(f)\n    if f == "b":\n        break\nelse:\n    docs.search("none")\n'
    assert show(src) == ["docs.get@4[1] ('b',)"]


def test_a_loop_that_may_break_makes_what_follows_discardable() -> None:
    src = (
        'for f in ["a", "b"]:\n    docs.get(f)\n    if ask(f):\n        break\n    docs.search(f)\n'
    )
    assert show(src) == [
        "docs.get@2[0] ('a',)",
        "docs.search@5[0] ('a',) disc",
        "docs.get@2[1] ('b',) disc",
        "docs.search@5[1] ('b',) disc",
    ]


def test_a_write_in_an_earlier_iteration_puts_later_reads_on_a_new_view() -> None:
    src = 'for f in ["a", "b"]:\n    workspace.read_text(f)\n    workspace.write_text(f, "x")\n'
    assert show(src) == [
        "workspace.read_text@2[0] ('a',)",
        "workspace.write_text@3[0] ('a', 'x')",
        "workspace.read_text@2[1] ('b',) post",
        "workspace.write_text@3[1] ('b', 'x') post",
    ]


def test_a_write_in_a_deferred_loop_moves_later_reads_now() -> None:
    src = 'for f in workspace.list_dir("."):\n    workspace.write_text(f, "x")\nworkspace.read_text("a")\n'
    assert show(src)[-1] == "workspace.read_text@3 ('a',) post"


def test_comprehension_expands_per_element_and_filters_exactly() -> None:
    run = Run('pages = [docs.get(p) for p in ["a", "b", "c"] if p != "b"]\n')
    assert run.show() == ["docs.get@1[0] ('a',)", "docs.get@1[2] ('c',)"]
    assert run.oid(1, (0,)).site.control[0].kind.value == "comprehension"


def test_comprehension_over_a_result_expands_when_it_arrives() -> None:
    run = Run('texts = {f: workspace.read_text(f) for f in workspace.list_dir("src")}\n')
    run.complete(1, ["x.py"])
    assert run.show() == ["workspace.list_dir@1 ('src',)", "workspace.read_text@1[0] ('x.py',)"]


def test_comprehension_variable_does_not_leak() -> None:
    assert (
        show('f = "keep"\n[docs.get(f) for f in ["a"]]\ndocs.search(f)\n')[-1]
        == "docs.search@3 ('keep',)"
    )


# -- branches --------------------------------------------------------------------------------


def test_a_known_condition_follows_only_the_live_branch() -> None:
    src = 'debug = False\nif debug:\n    docs.get("dbg")\nelse:\n    x = "prod"\n    docs.get(x)\ndocs.search(x)\n'
    assert show(src) == ["docs.get@6 ('prod',)", "docs.search@7 ('prod',)"]


def test_an_unknown_condition_makes_both_branches_discardable_and_their_names_unknown() -> None:
    src = 'x = "a"\nif ask():\n    docs.get("yes")\n    x = "b"\nelse:\n    docs.get("no")\ndocs.search(x)\n'
    assert show(src) == [
        "docs.get@3 ('yes',) disc",
        "docs.get@6 ('no',) disc",
        "docs.search@7 UNKNOWN",
    ]


def test_a_condition_on_a_result_resolves_when_it_arrives() -> None:
    run = Run('r = docs.search("q")\nif r:\n    docs.get("yes")\nelse:\n    docs.get("no")\n')
    yes, no = run.oid(3), run.oid(5)
    assert run.sink.records[yes].occurrence.control_deps == {run.oid(1)}
    assert run.show()[1:] == ["docs.get@3 ('yes',) disc", "docs.get@5 ('no',) disc"]
    run.complete(1, [])
    assert run.show()[1:] == ["docs.get@3 ('yes',) dead", "docs.get@5 ('no',)"]
    assert yes != no


def test_short_circuit_operands_are_discardable() -> None:
    assert show('a = ask() or docs.get("x")\nb = docs.get("y") if ask() else 1\n') == [
        "docs.get@1 ('x',) disc",
        "docs.get@2 ('y',) disc",
    ]


# -- functions, try, with ---------------------------------------------------------------------


def test_function_bodies_are_not_occurrences_until_called_with_known_arguments() -> None:
    src = 'def load(name, ext=".py"):\n    return workspace.read_text(name + ext)\nr = load("a")\nload(name="b")\ndocs.get(r)\n'
    run = Run(src)
    assert run.show() == [
        "workspace.read_text@2[(3, 4)] ('a.py',)",
        "workspace.read_text@2[(4, 0)] ('b.py',)",
        "docs.get@5 ? deps=2",
    ]
    assert run.oid(2, ((3, 4),)).site.control[0].kind.value == "function"


def test_a_function_called_with_unknown_arguments_applies_only_its_effects() -> None:
    src = "def load(name):\n    return workspace.read_text(name)\nload(ask())\ndocs.get(1)\n"
    assert show(src) == ["docs.get@4 (1,)"], "its body is walked, reporting nothing"
    src = 'def save(name):\n    workspace.write_text(name, "x")\nsave(ask())\ndocs.get(1)\nworkspace.read_text("a")\n'
    assert show(src) == ["docs.get@4 (1,)", "workspace.read_text@5 ('a',) post"]


def test_recursion_is_bounded() -> None:
    src = "def f(n):\n    docs.get(n)\n    f(n + 1)\nf(0)\n"
    run = Run(src)
    assert [r.arguments for r in run.sink.records.values()] == [(n,) for n in range(MAX_CALL_DEPTH)]
    assert [len(oid.path) for oid in run.sink.records] == list(range(1, MAX_CALL_DEPTH + 1))


def test_an_early_return_is_followed_exactly_when_certain_and_discardable_otherwise() -> None:
    src = 'def f(x):\n    if x:\n        return docs.get("early")\n    return docs.search("late")\nf(1)\nf(ask())\n'
    assert show(src) == ["docs.get@3[(5, 0)] ('early',)"]
    src = "def f(x):\n    if ask():\n        return 1\n    docs.search(x)\nr = f(2)\ndocs.get(r)\n"
    assert show(src) == ["docs.search@4[(5, 4)] (2,) disc", "docs.get@6 UNKNOWN"]


def test_try_body_is_normal_handlers_are_discardable_and_names_unknown_after() -> None:
    src = 'try:\n    x = "a"\n    docs.get(x)\nexcept KeyError:\n    docs.get("h")\nelse:\n    docs.get(x + "e")\ndocs.search(x)\n'
    assert show(src) == [
        "docs.get@3 ('a',)",
        "docs.get@7 ('ae',)",
        "docs.get@5 ('h',) disc",
        "docs.search@8 UNKNOWN",
    ]


def test_with_body_calls_are_occurrences_and_the_target_is_unknown() -> None:
    src = 'with ctx() as h:\n    docs.get("in")\n    docs.get(h)\n'
    run = Run(src)
    assert run.show() == ["docs.get@2 ('in',)", "docs.get@3 UNKNOWN"]
    assert run.oid(2).site.control[0].kind.value == "with"


def test_class_bodies_are_unknown_code() -> None:
    assert show('class A:\n    docs.get("x")\ndocs.get("y")\n') == ["docs.get@3 ('y',) post"]


# -- bounds ----------------------------------------------------------------------------------


def test_expansion_work_is_bounded_per_run() -> None:
    src = "for a in range(200):\n    for b in range(200):\n        docs.get(a, b)\n"
    run = Run(src)
    assert 0 < len(run.sink.records) <= MAX_EXPANSIONS


def test_a_statement_nested_too_deeply_to_follow_is_assumed_the_worst() -> None:
    depth = 1500  # parses, but is deeper than discovery's recursion allows
    src = "x = 1\nws = workspace\ndocs.get(" + "-" * depth + "ws)\ndocs.get(x)\nws.read_text('a')\n"
    assert show(src) == ["docs.get@4 (1,) post"]


def test_a_return_inside_a_deferred_loop_in_a_function_is_contained() -> None:
    src = 'def first(d):\n    for f in workspace.list_dir(d):\n        return workspace.read_text(f)\n    docs.get("after")\nfirst("src")\n'
    run = Run(src)
    run.discovery.result_known(run.oid(2, ((5, 0),)), ["a.py", "b.py"])
    assert run.show() == [
        "workspace.list_dir@2[(5, 0)] ('src',)",
        "docs.get@4[(5, 0)] ('after',) disc",
        "workspace.read_text@3[(5, 0),0] ('a.py',)",
    ], "the loop may return: what follows it is discardable; the first return ends it"


def test_break_in_a_loop_not_expanded_belongs_to_that_loop() -> None:
    src = "for a in [1, 2]:\n    while ask():\n        break\n    docs.get(a)\n"
    assert show(src) == ["docs.get@4[0] (1,)", "docs.get@4[1] (2,)"]


def test_return_in_code_not_followed_makes_the_rest_of_the_function_discardable() -> None:
    src = "def f(a):\n    while ask():\n        return 1\n    docs.get(a)\nf(3)\n"
    assert show(src) == ["docs.get@4[(5, 0)] (3,) disc"]


def test_library_calls_only_mutate_what_they_are_handed() -> None:
    src = 'import json\nimport random\nxs = [2, 1]\ncfg = {"a": 1}\nd = json.loads("{}")\ndocs.get(xs, cfg)\nrandom.shuffle(xs)\ndocs.get(xs)\n'
    assert show(src) == ["docs.get@6 ([2, 1], {'a': 1})", "docs.get@8 UNKNOWN"]


def test_reflective_modules_are_unknown_code() -> None:
    assert show('import sys\nsys.modules["x"].run()\ndocs.get(1)\n') == ["docs.get@3 (1,) post"]
    assert show("from .helpers import run\nrun()\ndocs.get(1)\n") == ["docs.get@3 (1,) post"]
    assert show("from inspect import stack\np = stack()\ndocs.get(1)\n") == ["docs.get@3 (1,) post"]
    assert show('import os.path\np = os.path.join("a", "b")\ndocs.get(1)\n') == ["docs.get@3 (1,)"]
    assert show("from math import sqrt\nr = sqrt(4)\ndocs.get(1)\n") == ["docs.get@3 (1,)"]


def test_calls_inside_a_library_call_chain_are_found() -> None:
    src = 'import json\nv = json.loads(workspace.read_text("c.json")).get("k")\n'
    assert show(src) == ["workspace.read_text@2 ('c.json',)"]


def test_mutating_a_fresh_container_leaves_unrelated_values_known() -> None:
    src = 'names = docs.search("n")\ntexts = []\nfor name in names:\n    texts.append(workspace.read_text(name))\nfound = [docs.get(n) for n in names]\n'
    run = Run(src).complete(1, ["a", "b"])
    assert run.show()[-2:] == ["docs.get@5[0] ('a',)", "docs.get@5[1] ('b',)"]
    assert show("a = [1]\nb = [2]\na.append(3)\ndocs.get(b)\n") == ["docs.get@4 ([2],)"]


def test_mutation_reaches_every_alias_and_container_of_the_value() -> None:
    assert show("a = [1]\nb = a\na.append(2)\ndocs.get(b)\n") == ["docs.get@4 UNKNOWN"]
    assert show("x = [1]\ny = [x]\ny[0].append(2)\ndocs.get(x)\n") == ["docs.get@4 UNKNOWN"]
    assert show("x = [1]\nfor v in [x]:\n    v.append(2)\ndocs.get(x)\n") == ["docs.get@4 UNKNOWN"]


def test_mutating_a_value_of_unknown_origin_makes_every_container_unknown() -> None:
    src = 'import json\nu = json.loads("[]")\nkeep = [1]\nu.append(1)\ndocs.get(keep)\n'
    assert show(src) == ["docs.get@5 UNKNOWN"]


def test_known_short_circuit_tests_follow_only_the_operands_that_run() -> None:
    src = 'on = True\noff = 0\nx = docs.get("a") if on else docs.get("b")\noff and docs.get("c")\noff or docs.get("d")\non and off and docs.get("e")\n'
    assert show(src) == ["docs.get@3 ('a',)", "docs.get@5 ('d',)"]


def test_a_conditional_expression_on_a_result_resolves_when_it_arrives() -> None:
    run = Run('r = docs.search("q")\nfirst = docs.get(r[0]) if r else docs.get("none")\n')
    assert run.show()[1:] == ["docs.get@2 ? disc deps=1", "docs.get@2 ('none',) disc"]
    run.complete(1, ["x"])
    assert run.show()[1:] == ["docs.get@2 ('x',) deps=1", "docs.get@2 ('none',) dead"]


def test_expansion_stops_when_its_time_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(occurrences.discovery._effects, "MAX_EXPANSION_SECONDS", 0.0)
    src = 'for f in ["a", "b"]:\n    docs.get(f)\ndef g(x):\n    docs.search(x)\ng(1)\ndocs.get("top")\n'
    assert show(src) == ["docs.get@6 ('top',) post"], "nothing expanded; g(1) is then unknown code"


def test_no_method_called_non_mutating_mutates_a_list_dict_or_set() -> None:
    immutable = {n for t in (str, bytes, tuple, frozenset, int, float) for n in dir(t)}
    read_only = {"get", "keys", "values", "items", "fromkeys"}
    mutating = {n for t in (list, dict, set, bytearray) for n in dir(t) if not n.startswith("_")}
    mutating -= immutable | read_only
    assert {"append", "update", "add", "sort", "setdefault"} <= mutating
    assert not NON_MUTATING_METHODS & mutating


def test_an_occurrence_id_hashes_as_its_value_also_copied_and_in_another_process() -> None:
    """The hash is cached; copies and unpickled ids (string hashes differ per process)
    compute it again, so they still find their entries."""
    import copy
    import dataclasses
    import pickle
    import subprocess
    import sys

    from occurrences.discovery._model import ControlFrame, ControlKind, Site

    site = Site("docs", "get", 3, 4, 3, 20, (ControlFrame(ControlKind.FOR, 2, 0),))
    oid = OccurrenceId(site, (1, (0, 2)))
    same = OccurrenceId(dataclasses.replace(site), (1, (0, 2)))
    assert oid == same and hash(oid) == hash(same) == hash((site, (1, (0, 2))))
    assert {oid: 1}[copy.deepcopy(oid)] == 1 and {oid: 1}[dataclasses.replace(oid)] == 1
    assert hash(dataclasses.replace(oid, path=())) == hash(OccurrenceId(site))
    check = (
        "import pickle, sys\n"
        "from occurrences.discovery._model import ControlFrame, ControlKind, OccurrenceId, Site\n"
        "oid = pickle.loads(sys.stdin.buffer.read())\n"
        "site = Site('docs', 'get', 3, 4, 3, 20, (ControlFrame(ControlKind.FOR, 2, 0),))\n"
        "assert {OccurrenceId(site, (1, (0, 2))): 1}[oid] == 1\n"
    )
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", check],
            input=pickle.dumps(oid),
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": ":".join(sys.path)},
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
