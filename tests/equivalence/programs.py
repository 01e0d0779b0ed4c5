"""Hypothesis strategies for agent-style programs and the conditions they run under.

A generated program only calls the tools of ``harness.build_host`` (``docs``, ``clock``,
``shell``, ``workspace``, ``odd``) and mixes the shapes the speculative lane must get right
(issue 6): straight-line reads, reads whose arguments come from earlier results, reads
after writes to the same and to other paths, ``if``/``else`` on read results, ``for``
loops and comprehensions over known and unknown iterables, ``try``/``except`` around
failing reads, functions that call tools, repeated identical reads, mutated results, live
reads, unknown tools, prints and a final expression, bursts of workspace writes and reads
with path aliases and failing writes (issue 17) — and issue 13's faults (``_odd``):
arguments that cannot cross (lone surrogates, huge ints), NUL in workspace paths, results
that cannot cross, NaN values, tools raising every kind of ``BaseException``, and early
work nobody reaches that raises one or blocks its thread.

Names are tracked per block so every generated program compiles and mostly runs; a
program that raises is still a valid case (the exception must match too). Pools are small
on purpose: repeated keys, shared observations and read-after-write collisions are what
find bugs, and hypothesis shrinks towards the first entry of each pool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hypothesis import strategies as st

from pysolate import LanePolicy

QUERIES = ("alpha", "beta", "gamma", "delta", "bad")
"""Literal arguments; ``bad`` is in every case's default failure set (see ``conditions``)."""

PATHS = ("a.txt", "b.txt", "d/c.txt", "a.txt", "d/e.txt", "missing.txt", "./a.txt", "d//c.txt")
"""Workspace paths; ``missing.txt`` does not exist until a program writes it; the last two
are aliases of earlier ones (one file, other spellings: other call keys, the same views)."""

BAD_WRITES = ("d", "a.txt/x", "d/c.txt/y")
"""Write targets that fail: a directory (``IsADirectoryError``), paths under a file
(``NotADirectoryError``)."""

ROOTS = ("memory", "git", "lazy")
"""Workspace root kinds a case may run on (issue 38); the first is the in-memory root."""

MAX_DEPTH = 2
"""Nesting depth of generated blocks (if/for/try/def bodies)."""

ODD_KINDS = (
    "refused",
    "nul",
    "invalid_result",
    "nan",
    "crash",
    "unreached_crash",
    "unreached_stall",
)
"""The ``odd`` statement's faults (issue 13; ``oddities.Odd``)."""

UNCROSSABLE = (
    "'a\\ud800b'",
    "10 ** 5000",
    "-(10 ** 4301)",
    "{'k\\udfff': 1}",
    "['ok', ('x\\udc80',)]",
    "**{'v\\ud800': 1}",
)
"""Arguments that cannot cross: lone surrogates (in values and keyword names), huge ints."""

NUL_CALLS = (
    "workspace.read_text('a\\x00.txt')",
    "workspace.write_text('d/\\x00', 'x')",
    "workspace.exists('\\x00')",
)
"""Workspace calls with a NUL in the path (``ValueError: embedded null byte``)."""

CRASHES = ("exit", "interrupt", "generator", "cancel", "base")
"""``oddities.crash`` kinds: SystemExit, KeyboardInterrupt, GeneratorExit, CancelledError, other."""


@dataclass(slots=True)
class _Scope:
    """Names a statement may read, by type (str values, lists of str, ints)."""

    strs: list[str] = field(default_factory=list)
    lists: list[str] = field(default_factory=list)
    ints: list[str] = field(default_factory=list)
    iterated: frozenset[str] = frozenset()  # lists an enclosing loop runs over: never grown
    floats: list[str] = field(default_factory=list)  # NaN-valued names (printed, returned, echoed)

    def child(self, iterating: str | None = None) -> _Scope:
        iterated = self.iterated | {iterating} if iterating else self.iterated
        return _Scope(
            list(self.strs), list(self.lists), list(self.ints), iterated, list(self.floats)
        )


class _Writer:
    """Draws one program statement by statement (used inside ``st.composite``)."""

    def __init__(self, draw: st.DrawFn, tools_as_functions: bool = False) -> None:
        self.draw = draw
        self.counter = 0
        self.functions: list[str] = []
        self.tools_as_functions = tools_as_functions
        self.shadowed = False  # a function tool's name was rebound (at most once)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -- expressions ---------------------------------------------------------------------

    def str_expr(self, scope: _Scope) -> str:
        options = ["lit"]
        if scope.strs:
            options += ["var", "var", "concat", "upper"]
        if scope.lists:
            options += ["first", "last"]
        kind = self.draw(st.sampled_from(options))
        if kind == "lit":
            return repr(self.draw(st.sampled_from(QUERIES)))
        if kind in ("first", "last"):
            name = self.draw(st.sampled_from(scope.lists))
            return f"{name}[{0 if kind == 'first' else -1}]"
        name = self.draw(st.sampled_from(scope.strs))
        if kind == "concat":
            return f"{name}[:6] + {self.draw(st.sampled_from(('1', '-x')))!r}"
        if kind == "upper":
            return f"{name}.upper()"
        return name

    def path_expr(self, scope: _Scope) -> str:
        if scope.strs and self.draw(st.integers(0, 7)) == 0:
            return f"'d/' + {self.draw(st.sampled_from(scope.strs))}[:5] + '.txt'"
        return repr(self.draw(st.sampled_from(PATHS)))

    def list_expr(self, scope: _Scope) -> str:
        options = ["literal", "search", "listdir"]
        if scope.lists:
            options += ["var", "var"]
        kind = self.draw(st.sampled_from(options))
        if kind == "literal":
            items = self.draw(st.lists(st.sampled_from(QUERIES), min_size=0, max_size=3))
            return repr(items)
        if kind == "search":
            return f"docs.search({self.str_expr(scope)})"
        if kind == "listdir":
            return f"workspace.list_dir({self.draw(st.sampled_from(('d', '.')))!r})"
        return self.draw(st.sampled_from(scope.lists))

    def condition(self, scope: _Scope) -> str:
        options = ["exists"]
        if scope.strs:
            options += ["endswith", "in"]
        if scope.lists:
            options += ["len"]
        if scope.ints:
            options += ["int"]
        kind = self.draw(st.sampled_from(options))
        if kind == "exists":
            return f"workspace.exists({self.path_expr(scope)})"
        if kind == "endswith":
            return f"{self.draw(st.sampled_from(scope.strs))}.endswith('1')"
        if kind == "in":
            return f"'a' in {self.draw(st.sampled_from(scope.strs))}"
        if kind == "len":
            return f"len({self.draw(st.sampled_from(scope.lists))}) > 1"
        return f"{self.draw(st.sampled_from(scope.ints))} % 2 == 0"

    # -- statements ----------------------------------------------------------------------

    def block(self, scope: _Scope, depth: int, min_size: int = 1, max_size: int = 3) -> list[str]:
        size = self.draw(st.integers(min_size, max_size))
        lines: list[str] = []
        for _ in range(size):
            lines += self.statement(scope, depth)
        return lines or ["pass"]

    def statement(self, scope: _Scope, depth: int) -> list[str]:
        kinds = [
            "search",
            "fetch",
            "read",
            "read",
            "write",
            "print",
            "live",
            "unknown",
            "repeat",
            "rewrite",
            "gather",
            "odd",
            "burst",
        ]
        if scope.lists:
            kinds += ["comprehension"]
        if set(scope.lists) - scope.iterated:
            kinds += ["mutate"]
        if depth < MAX_DEPTH:
            kinds += ["if", "for", "try"]
        if depth == 0:
            kinds += ["def", "helper"]
        if self.functions:
            kinds += ["call_fn"]
        if self.tools_as_functions:
            kinds += ["alias", "note", "recall", "recall"]
            if depth == 0 and not self.shadowed:
                kinds += ["shadow"]
        kind = self.draw(st.sampled_from(kinds))
        return getattr(self, f"_{kind}")(scope, depth)

    def _search(self, scope: _Scope, depth: int) -> list[str]:
        name = self.fresh("r")
        line = f"{name} = docs.search({self.str_expr(scope)})"
        scope.lists.append(name)
        return [line]

    def _fetch(self, scope: _Scope, depth: int) -> list[str]:
        name = self.fresh("f")
        line = f"{name} = docs.fetch({self.str_expr(scope)})"
        scope.strs.append(name)
        return [line]

    def _read(self, scope: _Scope, depth: int) -> list[str]:
        name = self.fresh("t")
        line = f"{name} = workspace.read_text({self.path_expr(scope)})"
        scope.strs.append(name)
        return [line]

    def _write(self, scope: _Scope, depth: int) -> list[str]:
        if self.draw(st.integers(0, 4)) == 0:
            return [f"workspace.delete({self.path_expr(scope)})"]
        return [f"workspace.write_text({self.path_expr(scope)}, {self.str_expr(scope)})"]

    def _print(self, scope: _Scope, depth: int) -> list[str]:
        names = scope.strs + scope.lists + scope.ints + scope.floats
        if not names:
            return [f"print({self.str_expr(scope)})"]
        return [
            f"print({', '.join(self.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)))})"
        ]

    def _live(self, scope: _Scope, depth: int) -> list[str]:
        name = self.fresh("n")
        scope.ints.append(name)
        return [f"{name} = clock.now()"]

    def _unknown(self, scope: _Scope, depth: int) -> list[str]:
        name = self.fresh("u")
        line = f"{name} = shell.run({self.str_expr(scope)})"
        scope.strs.append(name)
        return [line]

    def _repeat(self, scope: _Scope, depth: int) -> list[str]:
        first = self.draw(st.sampled_from(("_search", "_fetch", "_read")))
        lines = getattr(self, first)(scope, depth)
        name, _, call = lines[0].partition(" = ")
        again = self.fresh("p")
        (scope.lists if first == "_search" else scope.strs).append(again)
        if first == "_search" and self.draw(st.booleans()):
            lines.append(f"{name}.append('mutated')")  # must not leak into the second result
        return [*lines, f"{again} = {call}"]

    def _rewrite(self, scope: _Scope, depth: int) -> list[str]:
        """Read a path, write it (or a neighbour, or delete it), read it again."""
        path = self.draw(st.sampled_from(PATHS[:4]))
        before, after = self.fresh("t"), self.fresh("t")
        target = self.draw(st.sampled_from((path, path, "d/c.txt", "b.txt")))
        if self.draw(st.integers(0, 3)) == 0:
            change = f"workspace.delete({target!r})"
        else:
            change = f"workspace.write_text({target!r}, {before} + {self.str_expr(scope)})"
        scope.strs.append(before)
        lines = [f"{before} = workspace.read_text({path!r})", change]
        if self.draw(st.booleans()):
            lines.append(f"{after} = workspace.read_text({path!r})")
        else:
            lines += [
                "try:",
                f"    {after} = workspace.read_text({path!r})",
                "except FileNotFoundError:",
                f"    {after} = 'gone'",
            ]
        scope.strs.append(after)
        return lines

    def _burst(self, scope: _Scope, depth: int) -> list[str]:
        """Write-heavy (issue 17): writes in a row, some failing, reads of what they wrote
        between them (through aliases too); a failing write is guarded or ends the program."""
        lines: list[str] = []
        for _ in range(self.draw(st.integers(2, 4))):
            kind = self.draw(st.sampled_from(("write", "write", "read", "bad", "delete")))
            path = self.draw(st.sampled_from(PATHS))
            if kind == "write":
                lines.append(f"workspace.write_text({path!r}, {self.str_expr(scope)})")
            elif kind == "read":
                name = self.fresh("t")
                read = f"{name} = workspace.read_text({path!r})"
                lines += [
                    "try:",
                    f"    {read}",
                    "except FileNotFoundError:",
                    f"    {name} = 'gone'",
                ]
                scope.strs.append(name)
            elif kind == "delete":
                lines += _guard(f"workspace.delete({path!r})", "FileNotFoundError", self.fresh("e"))
            else:
                call = f"workspace.write_text({self.draw(st.sampled_from(BAD_WRITES))!r}, 'x')"
                lines += (
                    _guard(call, "OSError", self.fresh("e"))
                    if self.draw(st.integers(0, 3))
                    else [call]
                )
        return lines

    def _helper(self, scope: _Scope, depth: int) -> list[str]:
        """A helper that writes, called with a value only the program knows (an unknown
        tool's result): discovery sees no occurrence in it, so the program's writes differ
        from the ones speculated on the branch's layer from there on (issue 17). Then the
        usual read, write, read of a path."""
        fn, value, before, after = (
            self.fresh("w"),
            self.fresh("u"),
            self.fresh("t"),
            self.fresh("t"),
        )
        hidden = self.draw(st.sampled_from(PATHS[:4]))
        path = self.draw(st.sampled_from((hidden, *PATHS[:4])))
        lines = [
            f"def {fn}(v):",
            f"    workspace.write_text({hidden!r}, v)",
            f"{value} = shell.run({self.str_expr(scope)})",
            f"{fn}({value})",
            f"{before} = workspace.read_text({path!r})",
            f"workspace.write_text({path!r}, {self.str_expr(scope)})",
            f"{after} = workspace.read_text({path!r})",
        ]
        scope.strs += [value, before, after]
        return lines

    def _odd(self, scope: _Scope, depth: int) -> list[str]:
        """Issue 13's faults: values that cannot cross, NaN, tools raising BaseException,
        early work nobody reaches that raises or blocks."""
        kind = self.draw(st.sampled_from(ODD_KINDS))
        guarded = self.draw(st.booleans())  # else the error (if any) ends the program
        if kind == "refused":
            call = f"odd.echo({self.draw(st.sampled_from(UNCROSSABLE))})"
            return _guard(call, "ValueError", self.fresh("e")) if guarded else [call]
        if kind == "nul":
            call = self.draw(st.sampled_from(NUL_CALLS))
            return _guard(call, "ValueError", self.fresh("e")) if guarded else [call]
        if kind == "invalid_result":
            call = f"odd.{self.draw(st.sampled_from(('big', 'bad_text')))}()"
            return _guard(call, "Exception", self.fresh("e")) if guarded else [call]
        if kind == "nan":
            name = self.fresh("v")
            arg = "" if not scope.floats else self.draw(st.sampled_from(("", "negative=True")))
            line = f"{name} = odd.nan({arg})"
            if scope.floats and self.draw(st.booleans()):
                line = (
                    f"{name} = odd.echo([{self.draw(st.sampled_from(scope.floats))}, float('nan')])"
                )
            scope.floats.append(name)
            return [line]
        crash = self.draw(st.sampled_from(CRASHES))
        method = self.draw(st.sampled_from(("crash", "crash_sync")))
        if kind == "crash":
            call = f"odd.{method}({crash!r})"
            return _guard(call, "Exception", self.fresh("e")) if guarded else [call]
        # Unreached: docs.search('bad') always fails first, the list's next element (known,
        # so it may start early) is never called by the program.
        late = (
            f"odd.{method}({crash!r})"
            if kind == "unreached_crash"
            else f"odd.stall({self.str_expr(scope)})"
        )
        return [
            "try:",
            f"    {self.fresh('q')} = [docs.search('bad'), {late}]",
            "except LookupError:",
            "    pass",
        ]

    def _gather(self, scope: _Scope, depth: int) -> list[str]:
        """A multi-line tuple of reads (``asyncio.gather``-style): its complete elements are
        found while the rest of it streams."""
        name = self.fresh("g")
        reads = self.draw(
            st.lists(st.sampled_from(("search", "fetch", "read")), min_size=1, max_size=3)
        )
        elements = [
            f"    docs.{kind}({self.str_expr(scope)}),"
            if kind != "read"
            else f"    workspace.read_text({self.path_expr(scope)}),"
            for kind in reads
        ]
        tail = (
            ") if " + self.condition(scope) + " else ()"
            if self.draw(st.integers(0, 3)) == 0
            else ")"
        )
        return [f"{name} = (", *elements, tail]

    def _mutate(self, scope: _Scope, depth: int) -> list[str]:
        name = self.draw(st.sampled_from(sorted(set(scope.lists) - scope.iterated)))
        if self.draw(st.booleans()):
            return [f"{name}.append({self.str_expr(scope)})"]
        return [f"{name}[:1] = ['zz']"]

    def _comprehension(self, scope: _Scope, depth: int) -> list[str]:
        name = self.fresh("c")
        source = self.list_expr(scope)
        call = self.draw(
            st.sampled_from(("docs.search(x)", "docs.fetch(x)", "workspace.exists('d/' + x)"))
        )
        if call == "docs.fetch(x)":
            scope.lists.append(name)
        return [f"{name} = [{call} for x in {source}]"]

    def _if(self, scope: _Scope, depth: int) -> list[str]:
        cond = self.condition(scope)
        body = self.block(scope.child(), depth + 1)
        lines = [f"if {cond}:", *_indent(body)]
        if self.draw(st.booleans()):
            lines += ["else:", *_indent(self.block(scope.child(), depth + 1))]
        return lines

    def _for(self, scope: _Scope, depth: int) -> list[str]:
        source = self.list_expr(scope)
        inner = scope.child(iterating=source if source.isidentifier() else None)
        var = self.fresh("x")
        inner.strs.append(var)
        return [f"for {var} in {source}:", *_indent(self.block(inner, depth + 1))]

    def _try(self, scope: _Scope, depth: int) -> list[str]:
        body = self.block(scope.child(), depth + 1, max_size=2)
        handler = self.draw(st.sampled_from(("Exception", "LookupError", "OSError", "KeyError")))
        name = self.fresh("e")
        return [
            "try:",
            *_indent(body),
            f"except {handler} as {name}:",
            f"    print('caught', type({name}).__name__, {name})",
        ]

    def _def(self, scope: _Scope, depth: int) -> list[str]:
        fn = self.fresh("fn")
        inner = _Scope(strs=["q"])
        body = self.block(inner, depth + 1, max_size=2)
        ret = self.draw(
            st.sampled_from(("docs.search(q)", "docs.fetch(q)", "workspace.read_text(q)", "q"))
        )
        self.functions.append(fn)
        return [f"def {fn}(q):", *_indent(body), f"    return {ret}"]

    def _call_fn(self, scope: _Scope, depth: int) -> list[str]:
        name = self.fresh("g")
        fn = self.draw(st.sampled_from(self.functions))
        return [f"{name} = {fn}({self.str_expr(scope)})"]

    def _alias(self, scope: _Scope, depth: int) -> list[str]:
        """Call a function tool through an alias (discovery must follow it)."""
        alias, name = self.fresh("a"), self.fresh("v")
        tool = self.draw(st.sampled_from(("search", "fetch")))
        (scope.lists if tool == "search" else scope.strs).append(name)
        return [f"{alias} = {tool}", f"{name} = {alias}({self.str_expr(scope)})"]

    def _note(self, scope: _Scope, depth: int) -> list[str]:
        """A write of the store ``recall`` reads (both function tools)."""
        return [f"note({self.str_expr(scope)}, {self.str_expr(scope)})"]

    def _recall(self, scope: _Scope, depth: int) -> list[str]:
        name = self.fresh("m")
        line = f"{name} = recall({self.str_expr(scope)})"
        scope.strs.append(name)
        return [line]

    def _shadow(self, scope: _Scope, depth: int) -> list[str]:
        """Rebind ``fetch`` for the rest of the program: its calls are no tool calls any more."""
        self.shadowed = True
        if self.draw(st.booleans()):
            return ["def fetch(q):", "    return '<' + q + '>!'"]
        return ["fetch = str.upper"]


_TOOL_CALL = re.compile(r"\b(?:docs|clock|shell)\.(\w+)\(")
"""A call of a ``docs``/``clock``/``shell`` method in generated source (never anything else)."""


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _guard(call: str, handler: str, name: str) -> list[str]:
    return [
        "try:",
        f"    {call}",
        f"except {handler} as {name}:",
        f"    print('caught', type({name}).__name__, {name})",
    ]


@st.composite
def programs(draw: st.DrawFn, max_statements: int = 8, tools_as_functions: bool = False) -> str:
    """A complete agent-style program over the harness's tools, ending in an expression.

    ``tools_as_functions``: the ``docs``, ``clock`` and ``shell`` methods are function tools
    (``search(q)``, ``fetch(d)``, ``now()``, ``run(c)``; ``harness.FUNCTION_TOOLS``), also
    called through aliases, and ``fetch`` may be rebound for the rest of the program."""
    writer = _Writer(draw, tools_as_functions)
    scope = _Scope()
    lines: list[str] = []
    for _ in range(draw(st.integers(1, max_statements))):
        lines += writer.statement(scope, 0)
    names = scope.strs + scope.lists + scope.ints + scope.floats
    single: bool = draw(st.booleans())
    if names and single:
        lines.append(draw(st.sampled_from(names)))
    elif names:
        chosen: list[str] = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3))
        lines.append(f"[{', '.join(chosen)}]")
    source = "\n".join(lines) + "\n"
    return _TOOL_CALL.sub(r"\1(", source) if tools_as_functions else source


@dataclass(frozen=True, slots=True)
class Conditions:
    """Everything about a run except the program: how it streams, how the tools behave."""

    chunk_sizes: tuple[int, ...]
    """Sizes of consecutive chunks (cycled until the source is used up)."""
    pauses: tuple[float, ...]
    """Seconds to sleep after each chunk (cycled); 0 still yields to other tasks."""
    latencies: dict[str, float]
    """Per tool method (``docs.search`` …) seconds before it answers; ``workspace``: every
    workspace method (``slow_workspace``)."""
    failing: frozenset[str]
    """Arguments for which ``docs.search``/``docs.fetch`` raise."""
    policy: LanePolicy
    markdown: bool = False
    """Stream the program as a model's markdown reply: prose, a ```python fence, prose."""
    tools_as_functions: bool = False
    """Register ``docs``/``clock``/``shell``'s methods as function tools (``harness.FUNCTION_TOOLS``),
    for programs drawn with ``programs(tools_as_functions=True)``."""
    threads: int = 16
    """``Host(threads=...)``: the program's sync calls at once; early ones get half."""
    call_timeout: float = 30.0
    """``Host(call_timeout=...)``; under contention tight enough that queueing behind early
    work would exceed it, loose enough that no call alone does (issue 36)."""
    serialised: bool = False
    """``docs.search`` and ``docs.fetch`` each serialise their callers (one connection):
    early calls queue inside the tool, and the program's own calls behind them."""
    root: str = "memory"
    """The workspace root's kind (``harness.ROOTS``): ``memory`` (``Workspace.from_files``),
    ``git`` (a commit of a repository holding the same files, ``Workspace.git``) or
    ``lazy`` (a directory holding them, ``Workspace.frozen(lazy=True)``)."""


@st.composite
def conditions(draw: st.DrawFn) -> Conditions:
    """Random chunking, tool latencies (0 to 20 ms), failures and lane budgets."""
    latency = st.sampled_from((0.0, 0.0, 0.001, 0.005, 0.02))
    methods = ("docs.search", "docs.fetch", "clock.now", "shell.run", "workspace")
    return Conditions(
        chunk_sizes=tuple(draw(st.lists(st.integers(1, 40), min_size=1, max_size=6))),
        pauses=tuple(
            draw(st.lists(st.sampled_from((0.0, 0.0, 0.001, 0.004)), min_size=1, max_size=4))
        ),
        latencies={m: draw(latency) for m in methods},
        failing=frozenset(
            draw(st.sets(st.sampled_from(("alpha1", "beta", "gamma2", "ALPHA")), max_size=2))
        )
        | {"bad"},
        policy=LanePolicy(
            concurrency=draw(st.integers(1, 8)),
            budget=draw(st.sampled_from((0, 1, 2, 4, 64))),
            allow_discardable=draw(st.booleans()),
            share_formal=draw(st.booleans()),
            branch_writes=draw(st.integers(0, 3)) > 0,
        ),
        markdown=draw(st.booleans()),
    )
