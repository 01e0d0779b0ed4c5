"""Programs and conditions where early work contends with the program (issue 36, item 8).

``contended_programs`` draws ``programs``' statements plus the shapes where early work and
the program's own calls meet: loops over known items whose body calls a tool and then
``break``s or ``continue``s (provisional iterations that die), floods of reads known at
once (a queue of early calls longer than the timeout), reads whose argument is a
heavy but bounded expression (the Host evaluates it while the stream goes on), and reads
whose argument only the run knows (the program's own read, which may queue inside a tool
behind early ones). ``contended_conditions`` adds few threads, a call timeout that a queue
of early calls exceeds but no call alone does, and tools that serialise their callers.
"""

from __future__ import annotations

import dataclasses

import anyio
from hypothesis import strategies as st

from pysolate._guest_api import GuestFactory
from pysolate.testing import check_invariants, in_process_guest

from .harness import Pair, assert_equivalent, build_host, stream_of
from .programs import QUERIES, Conditions, _indent, _Scope, _Writer, conditions


class _ContendedWriter(_Writer):
    def statement(self, scope: _Scope, depth: int) -> list[str]:
        kind = self.draw(st.sampled_from(("plain", "plain", "leave", "heavy", "late_arg", "flood")))
        if kind == "plain":
            return super().statement(scope, depth)
        return getattr(self, f"_{kind}")(scope, depth)

    def _leave(self, scope: _Scope, depth: int) -> list[str]:
        """A loop over known items calling a read each time, left by ``break`` or skipped by
        ``continue`` at an item only the loop's own reads decide."""
        items = self.draw(st.lists(st.sampled_from(QUERIES), min_size=2, max_size=6))
        var, got = self.fresh("q"), self.fresh("g")
        word = self.draw(st.sampled_from(("break", "continue")))
        stop = self.draw(st.sampled_from(QUERIES))
        method = self.draw(st.sampled_from(("search", "fetch")))
        body = [
            f"{got} = docs.{method}({var})",
            f"if {var} == {stop!r}:",
            f"    {word}",
            f"{got} = [{got}, {var}]",
        ]
        handler = self.fresh("e")
        scope.strs.append(var)
        return [
            f"{var} = ''",
            "try:",
            *_indent([f"for {var} in {items!r}:", *_indent(body)]),
            f"except (LookupError, KeyError) as {handler}:",
            f"    {var} = str({handler})",
        ]

    def _flood(self, scope: _Scope, depth: int) -> list[str]:
        """Six to ten reads of one method, all known at once: a queue of early calls longer
        than the call timeout when the tool serialises them."""
        method = self.draw(st.sampled_from(("search", "fetch")))
        n = self.draw(st.integers(6, 10))
        name = self.fresh("w")
        scope.lists.append(name)
        return [f"{name} = [docs.{method}('alpha' + str(i)) for i in range({n})]"]

    def _heavy(self, scope: _Scope, depth: int) -> list[str]:
        """A read whose argument costs the Host's evaluator some steps to compute."""
        name = self.fresh("h")
        n = self.draw(st.integers(20, 120))
        arg = f"'-'.join([str(i * i % 7) for i in range({n})])[:{self.draw(st.integers(1, 9))}]"
        scope.lists.append(name)
        return [f"{name} = docs.search({arg})"]

    def _late_arg(self, scope: _Scope, depth: int) -> list[str]:
        """A read whose argument depends on a live read: never early, the program's own."""
        tick, name = self.fresh("n"), self.fresh("z")
        scope.strs.append(name)
        return [f"{tick} = clock.now()", f"{name} = docs.fetch('alpha' if {tick} % 2 else 'beta')"]


@st.composite
def contended_programs(draw: st.DrawFn, max_statements: int = 8) -> str:
    """A program as ``programs`` draws them, with the contended shapes above mixed in."""
    writer = _ContendedWriter(draw)
    scope = _Scope()
    lines: list[str] = []
    for _ in range(draw(st.integers(1, max_statements))):
        lines += writer.statement(scope, 0)
    names = scope.strs + scope.lists + scope.ints
    if names:
        lines.append(
            f"[{', '.join(draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)))}]"
        )
    return "\n".join(lines) + "\n"


@st.composite
def contended_conditions(draw: st.DrawFn) -> Conditions:
    """``conditions`` with contention: 1 to 16 threads (early ones get half), a wide lane, a
    call timeout of 0.1 or 0.15 s (or the default: at least 3x any read alone), reads of 10
    to 30 ms, and ``docs`` serialising its callers most of the time."""
    case = draw(conditions())
    latency = st.sampled_from((0.01, 0.02, 0.03))
    latencies = dict(case.latencies, **{"docs.search": draw(latency), "docs.fetch": draw(latency)})
    policy = dataclasses.replace(
        case.policy, concurrency=draw(st.sampled_from((4, 8, 16))), budget=64
    )
    return dataclasses.replace(
        case,
        latencies=latencies,
        policy=policy,
        threads=draw(st.sampled_from((1, 2, 4, 16))),
        call_timeout=draw(st.sampled_from((0.1, 0.15, 30.0))),
        serialised=draw(st.integers(0, 3)) > 0,
    )


def differential_series(
    sources: list[str], case: Conditions, factory: GuestFactory = in_process_guest
) -> None:
    """``sources`` run one after another on one Host, sequentially and streamed (each side
    its own Host): what an earlier run left behind (threads stuck in a stalled tool, early
    slots they hold, a tool's queue) must not change a later run. The tools' state carries
    from run to run alike on both sides, since only reads ever run early."""

    async def both() -> tuple[list[Pair], dict[str, object]]:
        ref_host, ref_tools = build_host(case, factory)
        host, tools = build_host(case, factory)
        pairs = []
        for source in sources:
            reference = await ref_host.run_source(source, speculate=False)
            chunks = stream_of(source, case)
            code = "markdown" if case.markdown else "raw"
            streamed = await host.run_stream(chunks, code=code, policy=case.policy)
            pairs.append(Pair(source, reference, streamed, ref_tools, tools, chunks.ended))
        return pairs, host.method_specs()  # type: ignore[return-value]

    pairs, specs = anyio.run(both)
    for pair in pairs:
        for result in (pair.reference, pair.speculative):
            assert result.guest_status != "limit", (
                f"generated program hit a Guest limit:\n{pair.source}\n{result.error}"
            )
        assert_equivalent(pair)
        check_invariants(pair.speculative, specs)  # type: ignore[arg-type]
