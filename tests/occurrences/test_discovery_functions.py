"""Discovery of function tools: a global ``search`` the Host registered is a method of the
``FUNCTIONS`` capability, trusted exactly like an alias ``search = cap.search`` (the rules of
``test_discovery.py``, each checked here for a function name)."""

from __future__ import annotations

import ast

from occurrences import (
    FUNCTIONS,
    Discovery,
    Effect,
    MethodSpec,
    Occurrence,
    OccurrenceId,
    tool_name,
)

CAPS = {
    FUNCTIONS: {
        "search": MethodSpec(Effect.PURE, "1"),
        "fetch": MethodSpec(Effect.IMMUTABLE_READ, "1"),
        "save": MethodSpec(Effect.WRITE, "1"),
        "note": MethodSpec(Effect.WRITE, "1", scope="path", scope_position=0),
        "read_note": MethodSpec(Effect.IMMUTABLE_READ, "1", scope="path", scope_position=0),
    },
    "docs": {"get": MethodSpec(Effect.PURE, "1")},
}


class Sink:
    """Records what discovery reports: each occurrence and its arguments."""

    def __init__(self) -> None:
        self.records: dict[OccurrenceId, tuple[Occurrence, object]] = {}

    def discovered(self, occurrence: Occurrence) -> None:
        self.records[occurrence.id] = (occurrence, "?")

    def arguments_known(
        self, oid: OccurrenceId, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        self.records[oid] = (self.records[oid][0], args)

    def arguments_unknown(self, oid: OccurrenceId) -> None:
        self.records[oid] = (self.records[oid][0], "UNKNOWN")

    def control_changed(self, oid: OccurrenceId, discardable: bool, dead: bool) -> None:
        pass


def show(src: str) -> list[str]:
    sink = Sink()
    Discovery(CAPS, sink).add_statements(ast.parse(src).body)
    lines = []
    for oid, (occurrence, arguments) in sink.records.items():
        text = f"{tool_name(oid.site.capability, oid.site.method)}@{oid.site.lineno} {arguments}"
        lines.append(text + ("" if occurrence.pre_write else " post"))
    return lines


def test_a_call_of_a_function_tool_is_an_occurrence_of_its_method() -> None:
    assert show('r = search("q")\nfetch(r[0])\nlen("x")\n') == ["search@1 ('q',)", "fetch@2 ?"]


def test_an_occurrence_names_the_functions_capability_and_the_function() -> None:
    sink = Sink()
    Discovery(CAPS, sink).add_statements(ast.parse('search("q")\n').body)
    (oid,) = sink.records
    assert (oid.site.capability, oid.site.method) == (FUNCTIONS, "search")
    assert str(oid) == "search@1:0"


def test_an_alias_of_a_function_tool_is_followed() -> None:
    assert show('s = search\ns("a")\n') == ["search@2 ('a',)"]


def test_rebinding_a_function_name_stops_trusting_it_but_not_earlier_aliases() -> None:
    assert show('s = search\nsearch = make()\ns("b")\nsearch("a")\n') == ["search@3 ('b',)"]


def test_shadowing_by_def_import_loop_target_and_del() -> None:
    assert show('def search(q):\n    return q\nsearch("a")\n') == []
    assert show('import search\nsearch("a")\n') == []
    assert show('for search in [len]:\n    pass\nsearch("a")\n') == []
    assert show('del search\nsearch("a")\n') == []


def test_a_global_declaration_of_a_function_name_stops_trusting_it() -> None:
    assert show('def f():\n    global search\n    search = 1\nsearch("a")\n') == []


def test_a_function_tool_handed_to_other_code_is_no_longer_trusted() -> None:
    # Handed out, it may be called by code discovery does not follow (a write, for all it knows).
    assert show('helper(search)\ndocs.get(1)\nsearch("b")\nfetch("c")\n') == ["docs.get@2 (1,)"]
    assert show('tools = [fetch]\nfetch("a")\n') == []
    # A builtin handed a function calls it: unknown code, which may write anything.
    assert show('xs = list(map(search, ["a"]))\nsearch("b")\ndocs.get(1)\n') == [
        "docs.get@3 (1,) post"
    ]


def test_a_write_of_one_function_tool_moves_every_function_tool_to_a_new_view() -> None:
    # One capability, one unit of state: the tools may share a backend.
    assert show('save("x")\nfetch("a")\ndocs.get(1)\n') == [
        "save@1 ('x',)",
        "fetch@2 ('a',) post",
        "docs.get@3 (1,)",
    ]


def test_declared_scopes_of_function_tools_narrow_their_writes() -> None:
    assert show('note("a.txt", "x")\nread_note("b.txt")\nread_note("a.txt")\n') == [
        "note@1 ('a.txt', 'x')",
        "read_note@2 ('b.txt',)",
        "read_note@3 ('a.txt',) post",
    ]


def test_calls_in_loops_and_functions_expand_as_for_methods() -> None:
    assert show(
        'for q in ["a", "b"]:\n    search(q)\ndef f(x):\n    return fetch(x)\nf("c")\n'
    ) == [
        "search@2 ('a',)",
        "search@2 ('b',)",
        "fetch@4 ('c',)",
    ]


def test_an_object_capability_and_function_tools_coexist() -> None:
    assert show('docs.get(search("a"))\n') == ["search@1 ('a',)", "docs.get@1 ?"]
