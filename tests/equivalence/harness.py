"""Run one program both ways and compare: the differential harness of issue 6.

``run_pair`` builds a fresh Host (fresh tool objects, a fresh workspace root) for the
sequential reference ``run_source(speculate=False)`` and another for the speculating
``run_stream``, streams the source under the case's ``Conditions``, and returns both
results with the tools' own call records. ``assert_equivalent`` is the correctness
contract (docs/contract.md): status, value, stdout, error (type, message, line), the ordered call
log (capability, method, arguments, outcome, result or error) and the final workspace.
``assert_no_early_effects`` checks from the tools' side that no ``live_read``, ``write``
or ``unknown`` call started before the stream ended, and that each ran exactly once per
receipt (never replayed). ``pysolate.testing.check_invariants`` checks the accounting.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import trio
from trio.testing import MockClock

from occurrences import Effect
from pysolate import GuestLimits, Host, LanePolicy, RunResult, Workspace
from pysolate._guest_api import GuestFactory
from pysolate._report._equivalence import same
from pysolate.testing import (
    Script,
    ScriptedTool,
    check_invariants,
    in_process_guest,
    memory_workspace,
    observable,
    scripted_tool,
)

from .apis import Api, run_source, run_stream
from .oddities import AsyncOdd, Odd
from .programs import Conditions
from .slow_workspace import SlowWorkspace
from .twin import twin_guest

FILES = {"a.txt": "alpha", "b.txt": "beta", "d/c.txt": "gamma", "d/e.txt": "bad"}
"""The frozen workspace root every case starts from."""


@functools.cache
def _source_of_files(git: bool) -> str:
    """A directory holding ``FILES`` (committed as a git repository when ``git``), made once
    a process and removed at exit; the runs only ever write their branches, never it."""
    path = tempfile.mkdtemp(prefix="pysolate-equivalence-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    for rel, text in FILES.items():
        os.makedirs(os.path.dirname(os.path.join(path, rel)), exist_ok=True)
        with open(os.path.join(path, rel), "w") as f:
            f.write(text)
    identity = ["-c", "user.name=equivalence", "-c", "user.email=equivalence@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "FILES"]) if git else ():
        subprocess.run(["git", "-C", path, *identity, *args], check=True, capture_output=True)
    return path


def workspace_root(kind: str) -> Workspace:
    """A fresh root of ``FILES`` of the given kind (``programs.ROOTS``)."""
    if kind == "git":
        return Workspace.git(_source_of_files(git=True))
    if kind == "lazy":
        return Workspace.frozen(_source_of_files(git=False), lazy=True)
    return memory_workspace(FILES)


GENERATED_LIMITS = GuestLimits(wall_time=10.0, max_calls=2_000)
"""Limits of the suite's Guests: far above any generated program's needs, low enough that
a generator bug (an endless loop) fails in seconds, not minutes."""

UNSAFE = {("clock", "now"), ("shell", "run"), ("notes", "note")}
"""Scripted methods that must never run before the source is sealed."""

FUNCTION_TOOLS = {
    "search": ("docs", "search"),
    "fetch": ("docs", "fetch"),
    "now": ("clock", "now"),
    "run": ("shell", "run"),
    "note": ("notes", "note"),
    "recall": ("notes", "recall"),
}
"""In function-tool mode (``Conditions.tools_as_functions``): each global function tool and
the scripted method (bound) it is; ``workspace`` stays a capability object. ``note`` (a
write) and ``recall`` (an immutable read) share one store, so a ``recall`` after a ``note``
must never claim a pre-write early result."""


@dataclass(slots=True)
class Tools:
    """The scripted capability objects of one Host (they record every call)."""

    docs: ScriptedTool
    clock: ScriptedTool
    shell: ScriptedTool
    notes: ScriptedTool  # registered in function-tool mode only

    def by_name(self) -> dict[str, ScriptedTool]:
        return {"docs": self.docs, "clock": self.clock, "shell": self.shell, "notes": self.notes}


def build_host(
    conditions: Conditions,
    factory: GuestFactory = in_process_guest,
    *,
    sync_fetch: bool = True,
    **host_kwargs: Any,
) -> tuple[Host, Tools]:
    """A Host with fresh tools: ``docs`` (pure async ``search``, immutable-read ``fetch``,
    sync in a worker thread unless ``sync_fetch=False``), ``clock.now`` (live read, counts
    up), ``shell.run`` (unknown, stateful) and a memory ``workspace``; with
    ``conditions.tools_as_functions`` the first four are function tools (``FUNCTION_TOOLS``;
    not for the async twin, which rewrites only ``cap.method(...)`` calls)."""
    failing, lat = conditions.failing, conditions.latencies
    ticks = itertools.count(1)
    log: list[str] = []

    def search(query: str) -> list[str]:
        if query in failing:
            raise LookupError(f"no results for {query!r}")
        return [query + str(i) for i in range(1, 2 + len(query) % 3)]

    def fetch(doc: str) -> str:
        if doc in failing:
            raise KeyError(doc)
        return f"<{doc}>"

    def now() -> int:
        return next(ticks)

    def run(cmd: str) -> str:
        log.append(cmd)
        return f"{len(log)}:{cmd[:8]}"

    store = {"alpha": "first"}

    def note(key: str, text: str) -> None:
        store[key] = text

    def recall(key: str) -> str:
        return store.get(key, "")

    tools = Tools(
        docs=scripted_tool(
            search=Script(
                search,
                effect=Effect.PURE,
                version="1",
                latency=lat.get("docs.search", 0.0),
                serialised=conditions.serialised,
            ),
            fetch=Script(
                fetch,
                effect=Effect.IMMUTABLE_READ,
                latency=lat.get("docs.fetch", 0.0),
                sync=sync_fetch,
                serialised=conditions.serialised,
            ),
        ),
        clock=scripted_tool(
            now=Script(now, effect=Effect.LIVE_READ, latency=lat.get("clock.now", 0.0))
        ),
        shell=scripted_tool(run=Script(run, latency=lat.get("shell.run", 0.0))),
        notes=scripted_tool(
            note=Script(note, effect=Effect.WRITE),
            recall=Script(recall, effect=Effect.IMMUTABLE_READ, latency=lat.get("docs.fetch", 0.0)),
        ),
    )
    host_kwargs.setdefault("limits", GENERATED_LIMITS)
    host_kwargs.setdefault("threads", conditions.threads)
    host_kwargs.setdefault("call_timeout", conditions.call_timeout)
    host = Host(guest_factory=factory, **host_kwargs)
    if conditions.tools_as_functions:
        for name, (cap, method) in FUNCTION_TOOLS.items():
            host.register(name, getattr(tools.by_name()[cap], method))
    else:
        for name in ("docs", "clock", "shell"):
            host.register(name, tools.by_name()[name])
    workspace_latency = lat.get("workspace", 0.0)
    root = workspace_root(conditions.root)
    host.register(
        "workspace", SlowWorkspace.of(FILES, workspace_latency, root) if workspace_latency else root
    )
    # Issue 13's odd values and tools; the twin (no sync_fetch) gets no thread to wait on.
    host.register("odd", Odd() if sync_fetch else AsyncOdd())
    return host, tools


@dataclass(slots=True)
class TimedChunks:
    """An async iterable of the source in the case's chunks; remembers when it ended."""

    source: str
    sizes: tuple[int, ...]
    pauses: tuple[float, ...]
    # Where the program is complete (a markdown block's closing fence ends there): the
    # run seals on the chunk reaching it, without waiting for the rest. None: at the end.
    code_end: int | None = None
    ended: float | None = None  # anyio.current_time() when the program was complete

    async def __aiter__(self) -> AsyncIterator[str]:
        sizes, pauses = itertools.cycle(self.sizes), itertools.cycle(self.pauses)
        at = 0
        while at < len(self.source):
            size = next(sizes)
            if self.code_end is not None and self.ended is None and at + size >= self.code_end:
                self.ended = anyio.current_time()
            yield self.source[at : at + size]
            at += size
            await anyio.sleep(next(pauses))
        if self.ended is None:
            self.ended = anyio.current_time()

    def blocking(self) -> Iterator[str]:
        """The same chunks as a blocking iterator (``time.sleep`` pauses), as sync code
        hands a stream to ``SyncHost``; ``ended`` on the same clock (``time.monotonic``,
        which asyncio's loop time is)."""
        sizes, pauses = itertools.cycle(self.sizes), itertools.cycle(self.pauses)
        at = 0
        while at < len(self.source):
            size = next(sizes)
            if self.code_end is not None and self.ended is None and at + size >= self.code_end:
                self.ended = time.monotonic()
            yield self.source[at : at + size]
            at += size
            time.sleep(next(pauses))
        if self.ended is None:
            self.ended = time.monotonic()


@dataclass(slots=True)
class Pair:
    """A reference run and a speculating run of the same program."""

    source: str
    reference: RunResult
    speculative: RunResult
    reference_tools: Tools
    speculative_tools: Tools
    stream_ended: float | None
    specs: dict[str, dict[str, object]] = field(default_factory=dict)


def stream_of(source: str, conditions: Conditions) -> TimedChunks:
    """The stream a case sends: the source, or a markdown reply with it in a fence."""
    if not conditions.markdown:
        return TimedChunks(source, conditions.chunk_sizes, conditions.pauses)
    head = f"Here is the plan.\n\n```python\n{source}```\n"
    return TimedChunks(
        head + "\nDone.\n", conditions.chunk_sizes, conditions.pauses, code_end=len(head)
    )


async def run_pair(
    source: str,
    conditions: Conditions,
    factory: GuestFactory = in_process_guest,
    api: Api = "async",
) -> Pair:
    """Run ``source`` sequentially and streamed, each against a fresh Host, through ``api``."""
    ref_host, ref_tools = build_host(conditions, factory)
    reference = await run_source(api, ref_host, source, speculate=False)
    host, tools = build_host(conditions, factory)
    chunks = stream_of(source, conditions)
    code = "markdown" if conditions.markdown else "raw"
    speculative = await run_stream(api, host, chunks, code=code, policy=conditions.policy)
    return Pair(source, reference, speculative, ref_tools, tools, chunks.ended, host.method_specs())  # type: ignore[arg-type]


def assert_equivalent(pair: Pair) -> None:
    """The correctness contract: the speculating run equals the sequential reference."""
    ref, spec = observable(pair.reference), observable(pair.speculative)
    for name in ref:
        assert same(spec[name], ref[name]), (
            f"{name} differs\nprogram:\n{pair.source}\nreference: {ref[name]!r}\nspeculative: {spec[name]!r}"
        )


def assert_no_early_effects(tools: Tools, result: RunResult, stream_ended: float | None) -> None:
    """No unsafe tool call started before the stream ended (``None``: it never ended, so
    none may have run at all), and each ran exactly once per receipt (never replayed)."""
    for cap, method in sorted(UNSAFE):
        made = tools.by_name()[cap].calls_to(method)
        if stream_ended is None:
            assert not made, f"{cap}.{method} ran although the stream never ended"
        early = [c for c in made if stream_ended is not None and c.started < stream_ended]
        assert not early, f"{cap}.{method} started before the stream ended: {early}"
        receipts = [
            c
            for c in result.calls
            if FUNCTION_TOOLS.get(c.tool, (c.capability, c.method)) == (cap, method)
        ]
        assert len(made) == len(receipts), (
            f"{cap}.{method}: {len(made)} executions for {len(receipts)} receipts"
        )


def check_pair(pair: Pair) -> None:
    """Every check the differential suite makes on one pair."""
    for result in (pair.reference, pair.speculative):
        # A run a limit ended is timing-dependent by nature: a generator bug, not a finding.
        assert result.guest_status != "limit", (
            f"generated program hit a Guest limit:\n{pair.source}\n{result.error}"
        )
    assert_equivalent(pair)
    check_invariants(pair.speculative, pair.specs)  # type: ignore[arg-type]
    check_invariants(pair.reference)
    assert_no_early_effects(pair.speculative_tools, pair.speculative, pair.stream_ended)
    assert_no_early_effects(pair.reference_tools, pair.reference, float("-inf"))


def differential(
    source: str,
    conditions: Conditions,
    factory: GuestFactory = in_process_guest,
    api: Api = "async",
) -> Pair:
    """Run the pair in a fresh event loop and check it (raises ``AssertionError``)."""
    pair = anyio.run(run_pair, source, conditions, factory, api)
    check_pair(pair)
    return pair


def scheduled_pair(source: str, conditions: Conditions, seed: int) -> Pair:
    """Reference and speculating run of ``source`` through the async twin, on trio's mock
    clock with the scheduler seeded: the whole pair replays exactly from its arguments."""
    trio._core._run._r.seed(seed)

    async def main() -> Pair:
        ref_host, ref_tools = build_host(conditions, twin_guest, sync_fetch=False)
        reference = await ref_host.run_source(source, speculate=False)
        host, tools = build_host(conditions, twin_guest, sync_fetch=False)
        chunks = stream_of(source, conditions)
        speculative = await host.run_stream(
            chunks, code="markdown" if conditions.markdown else "raw", policy=conditions.policy
        )
        return Pair(
            source, reference, speculative, ref_tools, tools, chunks.ended, host.method_specs()
        )  # type: ignore[arg-type]

    return anyio.run(
        main, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)}
    )


# -- helpers for the fault catalogue ---------------------------------------------------------

QUIET = Conditions(
    chunk_sizes=(7,),
    pauses=(0.0,),
    latencies={"docs.search": 0.01, "docs.fetch": 0.01},
    failing=frozenset({"bad"}),
    policy=LanePolicy(allow_discardable=True),
)
"""Conditions of the catalogue's runs: small chunks, short reads, a permissive lane."""


def with_latency(conditions: Conditions, **latencies: float) -> Conditions:
    """``conditions`` with some method latencies replaced (``docs_search=1.0``)."""
    merged = dict(conditions.latencies)
    merged.update({name.replace("_", ".", 1): seconds for name, seconds in latencies.items()})
    return dataclasses.replace(conditions, latencies=merged)


async def streamed(
    source: str,
    conditions: Conditions = QUIET,
    factory: GuestFactory = in_process_guest,
    **host_kwargs: Any,
) -> tuple[RunResult, Tools, TimedChunks]:
    """``run_stream`` of ``source`` against a fresh Host, with the tools and the stream."""
    host, tools = build_host(conditions, factory, **host_kwargs)
    chunks = TimedChunks(source, conditions.chunk_sizes, conditions.pauses)
    result = await host.run_stream(chunks, policy=conditions.policy)
    check_invariants(result, host.method_specs())
    return result, tools, chunks


async def reference(
    source: str,
    conditions: Conditions = QUIET,
    factory: GuestFactory = in_process_guest,
    **host_kwargs: Any,
) -> RunResult:
    """The sequential reference run of ``source`` against a fresh Host."""
    host, _ = build_host(conditions, factory, **host_kwargs)
    return await host.run_source(source, speculate=False)


def assert_same(result: RunResult, ref: RunResult) -> None:
    """``result`` is observationally equal to the reference ``ref``."""
    got, want = observable(result), observable(ref)
    for name in want:
        assert same(got[name], want[name]), f"{name}: {got[name]!r} != {want[name]!r}"


def children(pid: int | None = None) -> list[int]:
    """Live or zombie child processes of ``pid`` (default: this process and its fork
    servers, whose own long-lived processes are not counted: their children are Guests), from /proc.

    Counted once the Guest clean-ups in flight are done: a Guest that ended with ``done``
    is killed before its run returns, and reaped by the reaper thread (``_guest._reaper``).
    """
    from pysolate._guest import _forked, _reaper

    assert _reaper.drain(10), "a Guest clean-up took more than 10 s"
    servers = (
        {p for server in _forked.servers.values() for p in server.pids()} if pid is None else set()
    )
    parents = {os.getpid() if pid is None else pid, *servers}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        reaping = (
            fields[0] == "Z" and int(fields[1]) in servers
        )  # an exited init a server (bubblewrap's init) reaps next
        if int(fields[1]) in parents and int(entry) not in servers and not reaping:
            found.append(int(entry))
    return found
