"""The oracle bound: how soon a program's result could exist if every safe call started at
the earliest moment the stream allows and the Guest cost nothing.

Computed from the source and the recorded chunk times only, never from a Pysolate run:

1. *When each call's text is complete*: the recorded chunks are fed, in order, to
   ``occurrences.PrefixParser``; a statement is complete at the time of the chunk after
   which the parser accepted it (the earliest moment no later text can change it);
   whatever the parser accepts only at seal is complete when the stream ends. A call made
   from inside a compound or multi-line statement (an ``if`` body, an element of a
   multi-line tuple) is complete earlier: when the line holding its end has streamed
   (issue 16: its own text is final then, whatever the rest of the statement adds). Any
   call, top-level ones too, is complete as soon as its closing parenthesis has streamed
   when nothing around it in its own statement can repeat, skip or rebind it (no
   comprehension, conditional, boolean operator or lambda in the statement's own
   expressions; code mode's ``speculate`` starts calls at their ``)`` too).
2. *Which calls the program makes, and from which statement*: the sealed program runs once
   against the tools' plain behaviours (no latency, no Host), and each call records its
   call site (line, column) and the top-level statement it was made from.
3. *What each call waits for*: the calls its arguments or its reaching the call depend on,
   by a name-level dataflow over top-level statements (a statement depends on the earlier
   statements that bind or mutate a name it reads, transitively), plus, inside one
   statement, the earlier calls made from other call sites of that statement (a loop body
   call waits for the iterable's call) - except calls whose text lies wholly before it in a
   statement without comprehension, conditional or boolean operator (the elements of a
   tuple, the operands of ``+``); a read also waits for an earlier write or unknown call on
   its capability (it must see the write).
4. *The ideal schedule*: a ``pure``/``immutable_read`` call starts when its statement is
   complete and its dependencies have results, and takes its latency; equal calls share one
   execution. The program itself starts when the stream ends, makes its calls in order,
   takes an early call's result when it exists, and runs every ``live_read``, ``write``
   and ``unknown`` call then, for its latency. The bound is when the last call returns
   (never before the stream ends). With ``early_writes`` (issue 17) a ``write`` to a
   run-private branch is scheduled like a read instead, after the earlier writes on its
   capability: the "writes mid-stream" bound that code mode's ``eager`` mode approaches by
   running writes on the real world.

The dataflow is conservative inside one statement (two unrelated calls in one statement
count as dependent), which makes the bound later, never earlier; the scenarios avoid it.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import contextlib
import inspect
import itertools
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench_tools import ToolSpec, public_methods

from occurrences import PrefixParser
from pysolate.streams import Chunk

FILENAME = "<oracle>"


@dataclass(frozen=True, slots=True)
class OracleCall:
    """One logical call in program order and its ideal schedule (seconds from stream start)."""

    index: int
    capability: str
    method: str
    args: tuple[object, ...]
    kwargs: dict[str, object]
    site: tuple[int, int]
    statement: int
    complete_at: float  # when its text was final in the stream (see the module docstring, 1.)
    complete_chunk: int  # index of the chunk that completed it (len(chunks) = at seal)
    deps: frozenset[int]
    eligible: bool
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Oracle:
    end: float
    stream_end: float
    calls: tuple[OracleCall, ...]


@dataclass(slots=True)
class _Traced:
    capability: str
    method: str
    args: tuple[object, ...]
    kwargs: dict[str, object]
    site: tuple[int, int]
    outer: tuple[int, int]  # the module-level position the call was reached from
    span: tuple[int, int, int, int]  # the call expression: line, column, end line, end column
    effect_speculable: bool
    may_write: bool
    latency: float
    extra: dict[str, object] = field(default_factory=dict)


def completion_times(
    chunks: Sequence[Chunk], speed: float = 1.0
) -> tuple[list[float], list[int], str]:
    """Per top-level statement: when it was complete, and the index of the chunk that did it."""
    parser = PrefixParser()
    times: list[float] = []
    which: list[int] = []
    for k, chunk in enumerate(chunks):
        snap = parser.feed(chunk.text)
        if snap is not None:
            new = len(snap.statements) - len(times)
            times += [chunk.t / speed] * new
            which += [k] * new
    end = chunks[-1].t / speed if chunks else 0.0
    final = parser.close()
    new = len(final.statements) - len(times)
    times += [end] * new
    which += [len(chunks)] * new
    return times, which, final.source


def line_times(
    chunks: Sequence[Chunk], source: str, speed: float = 1.0
) -> tuple[list[float], list[int]]:
    """Per physical line (1-based; index 0 unused): when its terminator had streamed, and
    the index of the chunk that brought it."""
    ends = [m.end() for m in re.finditer(r"\r\n|\r|\n", source)]
    times, which = [0.0], [0]
    fed, k = 0, 0
    for end in ends:
        while k < len(chunks) and fed < end:
            fed += len(chunks[k].text)
            k += 1
        times.append(chunks[k - 1].t / speed if k else 0.0)
        which.append(max(0, k - 1))
    # A last line without a terminator: at the end of the stream.
    times.append(chunks[-1].t / speed if chunks else 0.0)
    which.append(len(chunks))
    return times, which


_DECIDING = (
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.IfExp,
    ast.BoolOp,
    ast.Lambda,
)
_BODIES = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def _separable(stmt: ast.stmt) -> bool:
    """Whether calls of ``stmt`` whose text does not overlap run independently (no
    comprehension, conditional or boolean operator decides or repeats one of them)."""
    return not any(isinstance(n, _DECIDING) for n in ast.walk(stmt))


def _innermost(top: ast.stmt, span: tuple[int, int, int, int]) -> ast.stmt:
    """The innermost statement of ``top`` whose text holds the call at ``span``."""
    found = top
    for node in ast.walk(top):
        if (
            isinstance(node, ast.stmt)
            and node.end_lineno is not None
            and node.end_col_offset is not None
        ):
            holds = (node.lineno, node.col_offset) <= span[:2] and span[2:] <= (
                node.end_lineno,
                node.end_col_offset,
            )
            if holds and (node.lineno, node.col_offset) >= (found.lineno, found.col_offset):
                found = node
    return found


def _final_at_its_paren(stmt: ast.stmt) -> bool:
    """Whether a call in ``stmt``'s own expressions (not its bodies) runs, once, with the
    arguments its text shows, whatever follows its closing parenthesis."""
    own = [
        value
        for name, value in ast.iter_fields(stmt)
        if name not in _BODIES and isinstance(value, ast.AST | list)
    ]
    parts = [
        p
        for value in own
        for p in (value if isinstance(value, list) else [value])
        if isinstance(p, ast.AST)
    ]
    return not any(isinstance(n, _DECIDING) for part in parts for n in ast.walk(part))


def char_times(
    chunks: Sequence[Chunk], source: str, speed: float = 1.0
) -> Callable[[int, int], tuple[float, int]]:
    """``at(line, utf8_column)``: when the character just before that position had
    streamed, and the index of the chunk that brought it."""
    starts = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", source))]
    ends = list(itertools.accumulate(len(c.text) for c in chunks))

    def at(line: int, column: int) -> tuple[float, int]:
        text = source[starts[line - 1] :]
        offset = starts[line - 1] + len(text.encode()[:column].decode(errors="ignore"))
        k = min(bisect.bisect_left(ends, offset), len(chunks) - 1)
        return chunks[k].t / speed, k

    return at


def trace_calls(
    source: str, specs: dict[str, dict[str, ToolSpec]], namespace: dict[str, object] | None = None
) -> list[_Traced]:
    """Run ``source`` against the plain behaviours; record every call and where it came from.

    ``namespace``: the globals of a session's earlier turns; the program runs in it (so it
    holds this turn's globals afterwards, for the next turn)."""
    traced: list[_Traced] = []

    class Proxy:
        def __init__(self, capability: str, methods: dict[str, ToolSpec]) -> None:
            for name, spec in methods.items():
                setattr(self, name, self._method(capability, name, spec))

        @staticmethod
        def _method(capability: str, name: str, spec: ToolSpec) -> object:
            def call(*args: object, **kwargs: object) -> object:
                frame = sys._getframe(1)
                pos = inspect.getframeinfo(frame).positions
                site = (
                    frame.f_lineno,
                    pos.col_offset if pos and pos.col_offset is not None else -1,
                )
                span = (
                    (
                        pos.lineno or 0,
                        pos.col_offset or 0,
                        pos.end_lineno or 0,
                        pos.end_col_offset or 0,
                    )
                    if pos is not None
                    else (0, 0, 0, 0)
                )
                module = frame
                while module.f_code.co_name != "<module>" and module.f_back is not None:
                    module = module.f_back
                mpos = inspect.getframeinfo(module).positions
                outer = (
                    module.f_lineno,
                    mpos.col_offset if mpos and mpos.col_offset is not None else 0,
                )
                traced.append(
                    _Traced(
                        capability,
                        name,
                        args,
                        dict(kwargs),
                        site,
                        outer,
                        span,
                        spec.effect.speculable,
                        spec.effect.value in ("write", "unknown"),
                        spec.latency,
                        {"effect": spec.effect.value},
                    )
                )
                return spec.behaviour(*args, **kwargs)

            return call

    if namespace is None:
        namespace = {}
    namespace.update(
        {"__name__": "__main__", "__builtins__": dict(vars(builtins), print=lambda *a, **k: None)}
    )
    for capability, methods in public_methods(specs).items():
        namespace[capability] = Proxy(capability, methods)
    with contextlib.suppress(Exception):  # a program that raises made its calls up to there
        exec(compile(source, FILENAME, "exec"), namespace)
    return traced


@dataclass(slots=True)
class _Unit:
    """A simple statement, or the header of a compound one (``if`` test, ``for`` target and
    iterable, ``while`` test, ``with`` items); a ``def``/``class`` is one unit whole."""

    id: int
    top: int  # index of its top-level statement
    start: tuple[int, int]
    end: tuple[int, int]
    reads: set[str]
    writes: set[str]
    loops: frozenset[int]  # ids of the loop headers it is inside
    controls: tuple[int, ...]  # ids of the headers that decide whether it runs


def _names(nodes: Sequence[ast.AST], capabilities: set[str]) -> tuple[set[str], set[str]]:
    """(names read, names bound or mutated) by these nodes; capability names are neither."""
    reads: set[str] = set()
    writes: set[str] = set()
    store_bases: set[int] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                writes.add(sub.name)
            elif isinstance(sub, ast.Subscript | ast.Attribute) and isinstance(
                sub.ctx, ast.Store | ast.Del
            ):
                base = sub.value
                while isinstance(base, ast.Subscript | ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name):
                    writes.add(base.id)
                    store_bases.add(id(base))
            elif (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and isinstance(sub.func.value, ast.Name)
            ):
                writes.add(sub.func.value.id)  # ``xs.append(...)`` may mutate ``xs``
            elif isinstance(sub, ast.AugAssign):
                base = sub.target
                while isinstance(base, ast.Subscript | ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name):
                    reads.add(base.id)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and id(sub) not in store_bases:
                (writes if isinstance(sub.ctx, ast.Store | ast.Del) else reads).add(sub.id)
    return reads - capabilities, writes - capabilities


def _units(body: Sequence[ast.stmt], capabilities: set[str]) -> list[_Unit]:
    units: list[_Unit] = []

    def add(
        top: int,
        start: ast.AST,
        end: ast.AST,
        nodes: Sequence[ast.AST],
        loops: frozenset[int],
        controls: tuple[int, ...],
    ) -> int:
        reads, writes = _names(nodes, capabilities)
        unit = _Unit(
            len(units),
            top,
            (start.lineno, start.col_offset),  # type: ignore[attr-defined]
            (end.end_lineno, end.end_col_offset),  # type: ignore[attr-defined]
            reads,
            writes,
            loops,
            controls,
        )
        units.append(unit)
        return unit.id

    def walk(
        stmts: Sequence[ast.stmt], top: int | None, loops: frozenset[int], controls: tuple[int, ...]
    ) -> None:
        for i, stmt in enumerate(stmts):
            t = i if top is None else top
            if isinstance(stmt, ast.If | ast.While):
                header = add(t, stmt, stmt.test, [stmt.test], loops, controls)
                inner = loops | {header} if isinstance(stmt, ast.While) else loops
                walk(stmt.body, t, inner, (*controls, header))
                walk(stmt.orelse, t, inner, (*controls, header))
            elif isinstance(stmt, ast.For | ast.AsyncFor):
                header = add(t, stmt, stmt.iter, [stmt.target, stmt.iter], loops, controls)
                walk(stmt.body, t, loops | {header}, (*controls, header))
                walk(stmt.orelse, t, loops, (*controls, header))
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                header = add(t, stmt, stmt.items[-1].context_expr, stmt.items, loops, controls)
                walk(stmt.body, t, loops, (*controls, header))
            elif isinstance(stmt, ast.Try | ast.TryStar):
                walk(stmt.body, t, loops, controls)
                for handler in stmt.handlers:
                    walk(handler.body, t, loops, controls)
                walk(stmt.orelse, t, loops, controls)
                walk(stmt.finalbody, t, loops, controls)
            else:
                add(t, stmt, stmt, [stmt], loops, controls)

    walk(body, None, frozenset(), ())
    return units


def unit_closure(units: Sequence[_Unit]) -> list[set[int]]:
    """For each unit, every unit it depends on through names or control (transitive; a unit
    in a loop may depend on itself, through an earlier iteration)."""
    preds: list[set[int]] = []
    for u in units:
        direct = set(u.controls)
        for v in units:
            if v.writes & u.reads and (v.id < u.id or v.loops & u.loops):
                direct.add(v.id)
        preds.append(direct)
    closure: list[set[int]] = []
    for u in units:
        seen: set[int] = set()
        todo = list(preds[u.id])
        while todo:
            w = todo.pop()
            if w not in seen:
                seen.add(w)
                todo.extend(preds[w])
        closure.append(seen)
    return closure


def _unit_at(units: Sequence[_Unit], pos: tuple[int, int]) -> _Unit:
    """The innermost unit whose span holds ``pos`` (line, column)."""
    holding = [u for u in units if u.start <= pos <= u.end]
    if not holding:
        raise ValueError(f"position {pos} is in no statement")
    return min(holding, key=lambda u: (u.end[0] - u.start[0], u.end[1] - u.start[1]))


def _overlap(write: _Traced, read: _Traced, scopes: dict[str, str] | None) -> bool:
    """Whether ``read`` may see ``write`` (always, unless both name a scope, as paths)."""
    name = (scopes or {}).get(read.capability)
    a, b = write.kwargs.get(name or ""), read.kwargs.get(name or "")
    if name is None or not isinstance(a, str) or not isinstance(b, str):
        return True
    a, b = _norm(a), _norm(b)
    return a == b or not a or not b or a.startswith(b + "/") or b.startswith(a + "/")


def _norm(path: str) -> str:
    return "/".join(p for p in path.split("/") if p not in ("", "."))


def call_id(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> tuple[object, ...]:
    """What makes two calls the same call (before any write to their capability)."""
    return (capability, method, repr(args), repr(sorted(kwargs.items())))


def compute(
    chunks: Sequence[Chunk],
    specs: dict[str, dict[str, ToolSpec]],
    *,
    speed: float = 1.0,
    namespace: dict[str, object] | None = None,
    ready: dict[tuple[object, ...], float] | None = None,
    early_writes: frozenset[str] = frozenset(),
    scopes: dict[str, str] | None = None,
) -> Oracle:
    """The oracle bound of the program these chunks stream (see the module docstring).

    ``early_writes``: capabilities whose ``write`` calls go to a run-private branch
    (issue 17): such a write starts, like a read, when its statement is complete and its
    dependencies (every earlier write on its capability among them) have results, even
    mid-stream; it is never shared with an equal one. ``scopes``: capability → the keyword
    argument its methods declare as scope (``Workspace``: ``path``): a read waits only for
    the earlier writes whose scope may overlap its own (as discovery's scopes do); writes
    still wait for every earlier write on their capability.

    For a turn of a session: ``namespace`` holds the earlier turns' globals (known from the
    turn's start: no call waits for them), ``ready`` the calls (``call_id``) whose results
    already exist, or will at the given time, from a rejected turn's early work."""
    times, which, source = completion_times(chunks, speed)
    body = ast.parse(source).body
    lines, line_chunks = line_times(chunks, source, speed)
    closed_at = char_times(chunks, source, speed)
    units = _units(body, set(specs))
    closure = unit_closure(units)
    stream_end = chunks[-1].t / speed if chunks else 0.0
    traced = trace_calls(source, specs, namespace)
    ready = ready or {}
    placed = [_unit_at(units, t.outer) for t in traced]
    calls: list[OracleCall] = []
    results: list[float] = []  # when each call's result exists (ideal)
    shared: dict[tuple[object, ...], int] = {}
    epochs: dict[str, int] = {}
    guest = stream_end
    for i, t in enumerate(traced):
        unit = placed[i]
        s = unit.top
        top = body[s]
        simple = not isinstance(
            top, ast.If | ast.For | ast.While | ast.With | ast.Try | ast.FunctionDef | ast.ClassDef
        )

        def before(
            u: _Traced, t: _Traced = t, separable: bool = simple and _separable(top)
        ) -> bool:
            """``u``'s text ends before ``t``'s begins, in one separable statement."""
            return separable and (u.span[2], u.span[3]) <= (t.span[0], t.span[1])

        deps = {
            j
            for j, u in enumerate(traced[:i])
            if placed[j].id in closure[unit.id]
            or (placed[j].id == unit.id and u.site != t.site and not before(u))
            or (
                u.may_write
                and u.capability == t.capability
                and (t.may_write or _overlap(u, t, scopes))
            )
        }
        available, chunk = times[s], which[s]
        inside = top.lineno <= t.span[2] <= (top.end_lineno or top.lineno)
        if inside and t.span[2] < len(lines) and lines[t.span[2]] < available:
            available, chunk = lines[t.span[2]], line_chunks[t.span[2]]
        if inside and _final_at_its_paren(_innermost(top, t.span)):
            paren, paren_chunk = closed_at(t.span[2], t.span[3])
            if paren < available:
                available, chunk = paren, paren_chunk
        key = (*call_id(t.capability, t.method, t.args, t.kwargs), epochs.get(t.capability, 0))
        branch_write = t.capability in early_writes and t.extra.get("effect") == "write"
        if branch_write:
            start = max([available, *(results[j] for j in deps)])
            done = start + t.latency
            guest = max(guest, done)
        elif t.effect_speculable:
            if key[-1] == 0 and key[:-1] in ready and key not in shared:
                start, early_end = 0.0, ready[key[:-1]]
                shared[key] = i
            elif key in shared:
                start, early_end = calls[shared[key]].start, results[shared[key]]
            else:
                start = max([available, *(results[j] for j in deps)])
                early_end = start + t.latency
                shared[key] = i
            guest = max(guest, early_end)
            done = early_end
        else:
            start = guest
            guest = done = guest + t.latency
        if t.may_write:
            epochs[t.capability] = epochs.get(t.capability, 0) + 1
        results.append(done)
        calls.append(
            OracleCall(
                i,
                t.capability,
                t.method,
                t.args,
                t.kwargs,
                t.site,
                s,
                available,
                chunk,
                frozenset(deps),
                t.effect_speculable or branch_write,
                start,
                done,
            )
        )
    return Oracle(end=guest, stream_end=stream_end, calls=tuple(calls))
