"""Declared scopes in discovery: a write moves only what its scope names to a new view.

Snippet + expected findings, like ``test_discovery.py``: ``show`` renders each occurrence
as ``cap.method@line[path] <args>`` (``?`` while blocked on results, ``UNKNOWN`` when
never computable - which is also how a read that turns out to overlap an earlier write is
reported) and ``post`` when it is not pre-write.
"""

from __future__ import annotations

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from occurrences import Discovery, Effect, MethodSpec, Occurrence, OccurrenceId
from occurrences.discovery._scopes import MAX_WRITTEN_SCOPES, Paths, may_see, overlaps, scope_path

READ, WRITE = Effect.IMMUTABLE_READ, Effect.WRITE

CAPS = {
    "workspace": {
        "read_text": MethodSpec(READ, "1", "path", 0),
        "list_dir": MethodSpec(READ, "1", "path", 0),
        "exists": MethodSpec(READ, "1", "path", 0),
        "write_text": MethodSpec(WRITE, "1", "path", 0),
        "delete": MethodSpec(WRITE, "1", "path", 0),
        "stat": MethodSpec(READ, "1"),  # no declared scope: may see any write
        "touch": MethodSpec(WRITE, "1"),  # no declared scope: may write anything
        "tag": MethodSpec(WRITE, "1", "path", None),  # keyword-only scope parameter
        "mystery": MethodSpec(Effect.UNKNOWN, "1", "path", 0),  # a scope does not make it known
    },
    "store": {"get": MethodSpec(READ, "1", "key", 0), "put": MethodSpec(WRITE, "1", "key", 0)},
    "docs": {"search": MethodSpec(Effect.PURE, "1")},
}


class Sink:
    def __init__(self) -> None:
        self.occurrences: dict[OccurrenceId, Occurrence] = {}
        self.arguments: dict[OccurrenceId, object] = {}

    def discovered(self, occurrence: Occurrence) -> None:
        self.occurrences[occurrence.id] = occurrence
        self.arguments[occurrence.id] = "?"

    def arguments_known(
        self, oid: OccurrenceId, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        self.arguments[oid] = (
            (*args, *(f"{k}={v!r}" for k, v in kwargs.items())) if kwargs else args
        )

    def arguments_unknown(self, oid: OccurrenceId) -> None:
        self.arguments[oid] = "UNKNOWN"

    def control_changed(self, oid: OccurrenceId, discardable: bool, dead: bool) -> None:
        pass


class Run:
    def __init__(self, src: str) -> None:
        self.sink = Sink()
        self.discovery = Discovery(CAPS, self.sink)
        self.discovery.add_statements(ast.parse(src).body)

    def complete(self, lineno: int, value: object) -> Run:
        (oid,) = [o for o in self.sink.occurrences if o.site.lineno == lineno]
        self.discovery.result_known(oid, value)
        return self

    def fail(self, lineno: int) -> Run:
        (oid,) = [o for o in self.sink.occurrences if o.site.lineno == lineno]
        self.discovery.result_unknown(oid)
        return self

    def show(self) -> list[str]:
        lines = []
        for oid, o in self.sink.occurrences.items():
            path = "" if not oid.path else "[" + ",".join(map(str, oid.path)) + "]"
            text = f"{oid.site.capability}.{oid.site.method}@{oid.site.lineno}{path} {self.sink.arguments[oid]}"
            lines.append(text + ("" if o.pre_write else " post"))
        return lines


def show(src: str) -> list[str]:
    return Run(src).show()


def reads(src: str) -> list[str]:
    """The rendering of the read occurrences only (writes are never early anyway)."""
    return [line for line in show(src) if ".write_text" not in line and ".delete" not in line]


# -- the path relation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("a.md", "b.md", False),
        ("a.md", "a.md", True),
        ("./a.md", "a.md", True),
        ("x//a.md", "x/a.md", True),
        ("notes", "notes/x.md", True),
        ("notes/x.md", "notes", True),
        ("notes", "notes.md", False),  # a prefix of the name, not of the path
        ("notes/x", "notes/xy", False),
        ("a/b/c", "a/d", False),
    ],
)
def test_normalized_paths_overlap_when_equal_or_one_is_a_directory_prefix(
    a: str, b: str, expected: bool
) -> None:
    assert overlaps(scope_path(a), scope_path(b)) is expected
    assert overlaps(scope_path(b), scope_path(a)) is expected


@pytest.mark.parametrize(
    "odd",
    [
        "",
        ".",
        "./",
        "/etc/passwd",
        "../a.md",
        "x/../a.md",
        "notes/",
        "a\\b",
        "a\0b",
        3,
        None,
        b"a.md",
    ],
)
def test_odd_scopes_overlap_everything(odd: object) -> None:
    assert scope_path(odd) is None
    assert overlaps(scope_path(odd), scope_path("anything.md"))


_PATHS = st.lists(st.sampled_from(["a", "b", "ab"]), min_size=1, max_size=4).map("/".join)


@given(st.lists(_PATHS, max_size=6), st.one_of(st.none(), _PATHS))
def test_the_written_paths_lookup_agrees_with_the_overlap_relation(
    written: list[str], read: str | None
) -> None:
    paths = Paths()
    for w in written:
        paths = paths.plus(w)
    assert may_see(paths, read) is any(overlaps(read, w) for w in written)


# -- reads after writes ------------------------------------------------------------------------


def test_a_read_of_another_path_after_a_write_stays_pre_write() -> None:
    src = 'workspace.write_text("a.md", "new")\nworkspace.read_text("b.md")\nworkspace.exists(path="b.md")\n'
    assert show(src) == [
        "workspace.write_text@1 ('a.md', 'new')",
        "workspace.read_text@2 ('b.md',)",
        "workspace.exists@3 (\"path='b.md'\",)",
    ]


def test_a_read_of_the_written_path_is_post_write_however_it_is_spelled() -> None:
    src = (
        'workspace.write_text("notes/a.md", "new")\n'
        'workspace.read_text("notes/a.md")\n'
        'workspace.read_text("./notes//a.md")\n'
        'workspace.exists(path="notes/a.md")\n'
    )
    assert reads(src) == [
        "workspace.read_text@2 ('notes/a.md',) post",
        "workspace.read_text@3 ('./notes//a.md',) post",
        "workspace.exists@4 (\"path='notes/a.md'\",) post",
    ]


def test_directory_prefixes_overlap_both_ways() -> None:
    src = (
        'workspace.write_text("notes/a.md", "new")\n'
        'workspace.list_dir("notes")\n'  # the parent lists the new file
        'workspace.exists("notes")\n'
        'workspace.list_dir("notes/a.md/deeper")\n'
        'workspace.list_dir("notebooks")\n'  # a sibling that shares a prefix of the name
        'workspace.read_text("other/a.md")\n'
    )
    assert reads(src) == [
        "workspace.list_dir@2 ('notes',) post",
        "workspace.exists@3 ('notes',) post",
        "workspace.list_dir@4 ('notes/a.md/deeper',) post",
        "workspace.list_dir@5 ('notebooks',)",
        "workspace.read_text@6 ('other/a.md',)",
    ]


def test_a_write_of_a_directory_reaches_every_path_under_it() -> None:
    src = 'workspace.delete("notes")\nworkspace.read_text("notes/a.md")\nworkspace.read_text("b.md")\n'
    assert reads(src) == [
        "workspace.read_text@2 ('notes/a.md',) post",
        "workspace.read_text@3 ('b.md',)",
    ]


def test_the_root_or_an_omitted_directory_overlaps_every_write() -> None:
    src = (
        'workspace.write_text("a.md", "new")\n'
        'workspace.list_dir(".")\n'
        'workspace.list_dir("")\n'
        "workspace.list_dir()\n"  # its default is not followed: it may be anything
    )
    assert reads(src) == [
        "workspace.list_dir@2 ('.',) post",
        "workspace.list_dir@3 ('',) post",
        "workspace.list_dir@4 () post",
    ]


@pytest.mark.parametrize("written", ["../b.md", "x/../b.md", "/b.md", "b.md/", "", "."])
def test_a_write_of_an_odd_path_touches_everything(written: str) -> None:
    src = f'workspace.write_text({written!r}, "new")\nworkspace.read_text("c.md")\n'
    assert reads(src) == ["workspace.read_text@2 ('c.md',) post"]


@pytest.mark.parametrize("read", ["../a.md", "x/../c.md", "/c.md", "c.md/"])
def test_a_read_of_an_odd_path_may_see_any_write(read: str) -> None:
    src = f'workspace.write_text("a.md", "new")\nworkspace.read_text({read!r})\n'
    assert reads(src) == [f"workspace.read_text@2 ({read!r},) post"]


def test_several_writes_all_count() -> None:
    src = (
        'workspace.write_text("a.md", "1")\n'
        'workspace.write_text("b.md", "2")\n'
        'workspace.read_text("a.md")\n'
        'workspace.read_text("b.md")\n'
        'workspace.read_text("c.md")\n'
    )
    assert reads(src) == [
        "workspace.read_text@3 ('a.md',) post",
        "workspace.read_text@4 ('b.md',) post",
        "workspace.read_text@5 ('c.md',)",
    ]


def test_a_read_before_the_write_stays_pre_write_and_scopes_stay_per_capability() -> None:
    src = (
        'workspace.read_text("a.md")\n'
        'workspace.write_text("a.md", "new")\n'
        'store.put("a.md", 1)\n'
        'store.get("b.md")\n'
        'docs.search("a.md")\n'
    )
    assert show(src) == [
        "workspace.read_text@1 ('a.md',)",
        "workspace.write_text@2 ('a.md', 'new')",
        "store.put@3 ('a.md', 1)",
        "store.get@4 ('b.md',)",
        "docs.search@5 ('a.md',)",
    ]


# -- what keeps today's behaviour ----------------------------------------------------------------


def test_a_write_whose_path_is_not_known_yet_touches_everything() -> None:
    src = (
        'name = docs.search("q")\nworkspace.write_text(name, "new")\nworkspace.read_text("b.md")\n'
    )
    run = Run(src)
    assert run.show()[-1] == "workspace.read_text@3 ('b.md',) post"
    run.complete(1, "a.md")
    assert run.show()[-1] == "workspace.read_text@3 ('b.md',) post", (
        "decided when discovered, never later"
    )


def test_a_write_with_a_known_path_and_content_from_a_result_is_still_scoped() -> None:
    src = 'text = docs.search("q")\nworkspace.write_text("out.md", text)\nworkspace.read_text("b.md")\n'
    assert show(src) == [
        "docs.search@1 ('q',)",
        "workspace.write_text@2 ?",
        "workspace.read_text@3 ('b.md',)",
    ]


def test_a_write_whose_path_cannot_be_computed_touches_everything() -> None:
    for call in (
        "workspace.write_text(*args)",
        "workspace.write_text(**kw)",
        "workspace.write_text(p, 'x')",
    ):
        src = f"p = something()\n{call}\nworkspace.read_text('b.md')\n"
        assert show(src)[-1] == "workspace.read_text@3 ('b.md',) post", call


def test_an_unknown_effect_touches_everything_even_with_a_scope() -> None:
    src = 'workspace.mystery("a.md")\nworkspace.read_text("b.md")\n'
    assert show(src) == ["workspace.mystery@1 ('a.md',)", "workspace.read_text@2 ('b.md',) post"]


def test_a_write_without_a_declared_scope_touches_everything() -> None:
    src = 'workspace.touch("a.md")\nworkspace.read_text("b.md")\n'
    assert show(src)[-1] == "workspace.read_text@2 ('b.md',) post"


def test_a_read_without_a_declared_scope_may_see_any_write() -> None:
    src = 'workspace.write_text("a.md", "new")\nworkspace.stat("b.md")\n'
    assert show(src)[-1] == "workspace.stat@2 ('b.md',) post"


def test_unknown_code_touches_everything() -> None:
    for middle in ('exec("pass")', "def f(*a):\n    pass\nf()"):
        src = f'workspace.write_text("a.md", "new")\n{middle}\nworkspace.read_text("b.md")\n'
        assert show(src)[-1].endswith("('b.md',) post"), middle


def test_a_keyword_only_scope_is_found_by_name_only() -> None:
    src = 'workspace.tag("x", path="a.md")\nworkspace.read_text("b.md")\nworkspace.read_text("a.md")\n'
    assert reads(src)[1:] == [
        "workspace.read_text@2 ('b.md',)",
        "workspace.read_text@3 ('a.md',) post",
    ]
    src = 'workspace.tag("a.md")\nworkspace.read_text("b.md")\n'
    assert reads(src)[-1] == "workspace.read_text@2 ('b.md',) post", "not passed by name: not found"


def test_the_scope_passed_both_ways_is_not_trusted() -> None:
    src = 'workspace.write_text("a.md", "x", path="a.md")\nworkspace.read_text("b.md")\n'
    assert reads(src)[-1] == "workspace.read_text@2 ('b.md',) post"


def test_too_many_distinct_written_scopes_count_as_everything() -> None:
    writes = "".join(f'workspace.write_text("f{i}.md", "x")\n' for i in range(MAX_WRITTEN_SCOPES))
    assert show(writes + 'workspace.read_text("b.md")\n')[-1].endswith("('b.md',)")
    writes += 'workspace.write_text("one-more.md", "x")\n'
    assert show(writes + 'workspace.read_text("b.md")\n')[-1].endswith("('b.md',) post")


# -- control flow ---------------------------------------------------------------------------------


def test_writes_in_an_expanded_loop_are_scoped_per_iteration() -> None:
    src = (
        'for name in ["a.md", "b.md"]:\n'
        "    workspace.read_text(name)\n"
        '    workspace.write_text(name, "new")\n'
        'workspace.read_text("a.md")\n'
        'workspace.read_text("c.md")\n'
    )
    assert reads(src) == [
        "workspace.read_text@2[0] ('a.md',)",
        "workspace.read_text@2[1] ('b.md',)",
        "workspace.read_text@4 ('a.md',) post",
        "workspace.read_text@5 ('c.md',)",
    ]


def test_a_loop_followed_only_for_its_effects_writes_everything() -> None:
    # One pass over the body with the values of the first iteration would miss "b.md".
    src = (
        'p = "a.md"\n'
        "while more():\n"
        "    workspace.write_text(p, 'x')\n"
        '    p = "b.md"\n'
        'workspace.read_text("c.md")\n'
    )
    assert show(src) == ["workspace.read_text@5 ('c.md',) post"]


def test_a_deferred_loop_keeps_the_writes_before_it_and_writes_everything_after_it() -> None:
    src = (
        'workspace.write_text("a.md", "new")\n'
        'names = docs.search("q")\n'
        "for name in names:\n"
        "    workspace.read_text(name)\n"
        'workspace.read_text("c.md")\n'
    )
    run = Run(src)
    assert run.show()[-1] == "workspace.read_text@5 ('c.md',)", "the loop only reads"
    run.complete(2, ["a.md", "b.md"])
    assert run.show()[-2:] == [
        "workspace.read_text@4[0] ('a.md',) post",
        "workspace.read_text@4[1] ('b.md',)",
    ]


def test_writes_in_both_sides_of_an_undecided_branch_count() -> None:
    src = (
        "if cond():\n"
        '    workspace.write_text("a.md", "1")\n'
        "else:\n"
        '    workspace.write_text("b.md", "2")\n'
        'workspace.read_text("a.md")\n'
        'workspace.read_text("b.md")\n'
        'workspace.read_text("c.md")\n'
    )
    assert reads(src) == [
        "workspace.read_text@5 ('a.md',) post",
        "workspace.read_text@6 ('b.md',) post",
        "workspace.read_text@7 ('c.md',)",
    ]


def test_writes_inside_an_expanded_function_are_scoped() -> None:
    src = (
        "def save(path, text):\n"
        "    workspace.write_text(path, text)\n"
        'save("a.md", "new")\n'
        'workspace.read_text("a.md")\n'
        'workspace.read_text("b.md")\n'
    )
    assert reads(src) == ["workspace.read_text@4 ('a.md',) post", "workspace.read_text@5 ('b.md',)"]


# -- a read whose own path comes from a result --------------------------------------------------


def test_a_read_whose_path_comes_from_a_result_is_decided_when_it_arrives() -> None:
    src = (
        'workspace.write_text("a.md", "new")\n'
        'names = docs.search("q")\n'
        "first = workspace.read_text(names[0])\n"
        "second = workspace.read_text(names[1])\n"
        "docs.search(first)\n"
        "docs.search(second)\n"
    )
    run = Run(src)
    assert run.show()[2:] == [
        "workspace.read_text@3 ?",
        "workspace.read_text@4 ?",
        "docs.search@5 ?",
        "docs.search@6 ?",
    ]
    run.complete(2, ["notes/b.md", "a.md"])
    assert run.show()[2:] == [
        "workspace.read_text@3 ('notes/b.md',)",
        "workspace.read_text@4 UNKNOWN",  # may see the write: never early
        "docs.search@5 ?",
        "docs.search@6 ?",
    ]
    # The event graph answers an occurrence with unknown arguments with result_unknown.
    run.fail(4).complete(3, "b text")
    assert run.show()[4:] == ["docs.search@5 ('b text',)", "docs.search@6 UNKNOWN"]


def test_a_read_whose_path_comes_from_a_result_with_no_write_before_it_is_plain() -> None:
    src = 'names = docs.search("q")\nworkspace.read_text(names[0])\nworkspace.write_text("a.md", "x")\n'
    run = Run(src).complete(1, ["a.md"])
    assert run.show()[1] == "workspace.read_text@2 ('a.md',)"


def test_a_read_after_a_write_of_everything_is_post_write_whatever_its_path() -> None:
    src = 'workspace.touch("a.md")\nnames = docs.search("q")\nworkspace.read_text(names[0])\n'
    run = Run(src).complete(2, ["b.md"])
    assert run.show()[-1] == "workspace.read_text@3 ('b.md',) post"


@pytest.mark.parametrize(
    "loop",
    [
        'for name in ["a.md", "b.md"]:\n    workspace.write_text(name, "x")\n',
        '[workspace.write_text(name, "x") for name in ["a.md", "b.md"]]\n',
    ],
)
def test_iterations_cut_off_by_the_expansion_time_valve_write_everything(
    loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Allowed: the whole expansion, iteration 0, its write; refused: iteration 1 ("b.md").
    allowed = iter([True, True, True])
    monkeypatch.setattr(Discovery, "_may_expand", lambda self, work: next(allowed, False))
    assert show(loop + 'workspace.read_text("b.md")\n')[-1].endswith("('b.md',) post")
