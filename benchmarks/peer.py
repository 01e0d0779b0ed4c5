"""The nearest peer, side by side: Pydantic AI harness code mode on the same scenarios.

    python3 -m venv .venv-bench && .venv-bench/bin/pip install -e '.[bench]'   # its own venv: the harness pins pydantic-ai-slim below the test extra
    .venv-bench/bin/python benchmarks/peer.py [--only NAME,...] [--modes plain,eager,speculate]

``latency.py`` calls ``run_peer`` for each scenario when the package is installed. The
peer is driven the way a model would drive it: pydantic-ai's ``FunctionModel`` streams a
``run_code`` tool call whose ``code`` argument arrives in the scenario's chunks at the
recorded times, and the tools are the benchmark's (``bench_tools``: same behaviours, same
latencies), registered as Pydantic AI tools; read-only ones carry
``metadata={"read_only": True}``.

Code mode runs programs in Monty, where tools are ``async`` functions taking keyword
arguments, so the program is rewritten mechanically (``docs.search(`` becomes
``await docs_search(``) and re-tokenized, its tokens spread evenly over the recording's
duration: the same program, ending at the same moment. A recording of bursty chunks (issue
16) is replayed chunk for chunk instead, at the same times, each chunk carrying the
rewritten text of the original's: the same pauses at the same places.

Its time is from the start of the stream to the moment the ``run_code`` result reaches the
model (the second model request). Its result is "equal" when the returned value and
printed output match the sequential Pysolate run's, and its effectful calls (live reads,
writes, unknown) are exactly the sequential run's, in order, with the same arguments.

Modes (``MODES``): ``plain`` (run the whole snippet after it streamed), ``eager``
(``CodeMode(eager=True)``: statements run as they complete), ``speculate``
(``CodeMode(speculate="declared")``: read-only calls with literal keyword arguments start
while the snippet streams).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from bench_tools import ToolSpec, final_state, public_methods, sleep, tool_specs

from pysolate import RunResult
from pysolate.streams import Chunk, read_recording, source_to_stream

MODES = ("plain", "eager", "speculate")
SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
_CALL = re.compile(r"\b(docs|kb|web|fs|clock|store|shell|ws)\.(\w+)\(")


def translate(source: str) -> str:
    """The program as code mode wants it: tools are awaited module-level functions."""
    return _CALL.sub(lambda m: f"await {m.group(1)}_{m.group(2)}(", source)


def translated_chunks(chunks: Sequence[Chunk]) -> list[Chunk]:
    """The recording's chunks at their own times, carrying the rewritten program: chunk
    ``i`` ends where the rewrite of the text up to it agrees with the whole rewrite (a
    call name cut by the chunk's end moves to the next chunk with the rest of it)."""
    whole = translate("".join(c.text for c in chunks))
    out: list[Chunk] = []
    done, text = 0, ""
    for chunk in chunks:
        text += chunk.text
        prefix = translate(text)
        agree = 0
        limit = min(len(prefix), len(whole))
        while agree < limit and prefix[agree] == whole[agree]:
            agree += 1
        agree = max(done, min(agree, len(prefix)))
        out.append(Chunk(chunk.t, whole[done:agree]))
        done = agree
    if done < len(whole):
        out[-1] = Chunk(out[-1].t, out[-1].text + whole[done:])
    return [c for c in out if c.text]


@dataclass(frozen=True, slots=True)
class PeerOutcome:
    seconds: float
    equal: bool
    note: str = ""
    value: object = None


@dataclass(slots=True)
class _Log:
    effects: list[tuple[str, str, dict[str, object]]] = field(default_factory=list)
    effect_times: list[float] = field(default_factory=list)  # anyio clock, when each started


def _tools(specs: dict[str, dict[str, ToolSpec]], log: _Log) -> list[Any]:
    """One Pydantic AI tool per benchmark method, with the method's latency."""
    from pydantic_ai import Tool

    def make(cap: str, method: str, spec: ToolSpec) -> Any:
        async def sleep_then(**kwargs: object) -> object:
            if not spec.effect.speculable:
                log.effects.append((cap, method, dict(kwargs)))
                log.effect_times.append(anyio.current_time())
            await sleep(spec.latency)
            return spec.behaviour(**kwargs)

        return sleep_then

    def tool(fn: Any, cap: str, method: str, spec: ToolSpec) -> Any:
        return Tool(fn, name=f"{cap}_{method}", metadata={"read_only": spec.effect.speculable})

    m = {
        cap: {name: make(cap, name, s) for name, s in methods.items()}
        for cap, methods in public_methods(specs).items()
    }
    s = public_methods(specs)

    async def docs_search(query: str) -> list[str]:
        """Documentation pages for a query."""
        return await m["docs"]["search"](query=query)

    async def kb_get(key: str) -> str:
        """A knowledge-base entry; KeyError if missing."""
        return await m["kb"]["get"](key=key)

    async def web_fetch(url: str) -> str:
        """A web page."""
        return await m["web"]["fetch"](url=url)

    async def fs_list_dir(path: str) -> list[str]:
        """File names in a directory."""
        return await m["fs"]["list_dir"](path=path)

    async def fs_read(path: str) -> str:
        """A file's text; FileNotFoundError if missing."""
        return await m["fs"]["read"](path=path)

    async def clock_now() -> str:
        """The current time (live)."""
        return await m["clock"]["now"]()

    async def store_get(key: str) -> Any:
        """A stored value."""
        return await m["store"]["get"](key=key)

    async def store_put(key: str, value: Any) -> None:
        """Store a value (a write)."""
        await m["store"]["put"](key=key, value=value)

    async def shell_run(cmd: str) -> str:
        """Run a shell command (unknown effect)."""
        return await m["shell"]["run"](cmd=cmd)

    async def ws_read_text(path: str, encoding: str = "utf-8") -> str:
        """A workspace file's text; FileNotFoundError if missing."""
        return await m["ws"]["read_text"](path=path, encoding=encoding)

    async def ws_exists(path: str) -> bool:
        """Whether a workspace path exists."""
        return await m["ws"]["exists"](path=path)

    async def ws_list_dir(path: str = ".") -> list[str]:
        """Names in a workspace directory."""
        return await m["ws"]["list_dir"](path=path)

    async def ws_write_text(path: str, text: str, encoding: str = "utf-8") -> None:
        """Write a workspace file (a write)."""
        await m["ws"]["write_text"](path=path, text=text, encoding=encoding)

    fns = {
        ("docs", "search"): docs_search,
        ("kb", "get"): kb_get,
        ("web", "fetch"): web_fetch,
        ("fs", "list_dir"): fs_list_dir,
        ("fs", "read"): fs_read,
        ("clock", "now"): clock_now,
        ("store", "get"): store_get,
        ("store", "put"): store_put,
        ("shell", "run"): shell_run,
        ("ws", "read_text"): ws_read_text,
        ("ws", "exists"): ws_exists,
        ("ws", "list_dir"): ws_list_dir,
        ("ws", "write_text"): ws_write_text,
    }
    return [tool(fn, cap, method, s[cap][method]) for (cap, method), fn in fns.items()]


def _bound(
    spec: ToolSpec, args: tuple[object, ...], kwargs: dict[str, object]
) -> dict[str, object]:
    """A call's arguments by parameter name, defaults applied: receipts keep them as the
    broker bound them, the peer's tools as the model spelled them."""
    bound = inspect.signature(spec.behaviour).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _normal(value: object) -> object:
    return json.loads(json.dumps(value, default=str))


async def run_peer(
    name: str,
    mode: str,
    *,
    speed: float = 1.0,
    latency_scale: float = 1.0,
    reference: RunResult | None = None,
    reference_state: object = None,
) -> PeerOutcome:
    """Stream scenario ``name`` through code mode in ``mode``; time it and check it."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, RetryPromptPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
    from pydantic_ai_harness import CodeMode

    recording = read_recording(SCENARIO_DIR / f"{name}.jsonl")
    program = translate(recording.text)
    if recording.metadata.get("chunking") == "bursty":
        chunks = [Chunk(c.t / speed, c.text) for c in translated_chunks(recording.chunks)]
    else:
        # The rewritten program has a few more tokens; stream it over the recording's duration.
        tokens = len(source_to_stream(program))
        chunks = source_to_stream(
            program, tokens_per_second=tokens * speed / recording.duration, seed=0
        )
    specs = tool_specs(latency_scale)
    log = _Log()
    done: dict[str, Any] = {}
    t0 = 0.0

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        last = messages[-1]
        returned = [
            p for p in getattr(last, "parts", []) if isinstance(p, ToolReturnPart | RetryPromptPart)
        ]
        if returned:
            done.setdefault("at", anyio.current_time() - t0)
            done.setdefault("part", returned[0])
            yield "done"
            return
        yield {0: DeltaToolCall(name="run_code", json_args='{"code": "', tool_call_id="call_1")}
        for chunk in chunks:
            delay = t0 + chunk.t - anyio.current_time()
            if delay > 0:
                await sleep(delay)
            yield {0: DeltaToolCall(json_args=json.dumps(chunk.text)[1:-1])}
        yield {0: DeltaToolCall(json_args='"}')}

    options: dict[str, Any] = {}
    if mode == "eager":
        options["eager"] = True
    elif mode == "speculate":
        options["speculate"] = "declared"
    agent = Agent(
        FunctionModel(stream_function=stream),
        capabilities=[CodeMode(**options)],
        tools=_tools(specs, log),
    )
    t0 = anyio.current_time()
    try:
        async with agent.run_stream("run the program") as run:
            await run.get_output()
    except Exception as exc:
        return PeerOutcome(
            anyio.current_time() - t0, False, f"failed: {type(exc).__name__}: {exc}"[:160]
        )
    part = done.get("part")
    seconds = done.get("at", anyio.current_time() - t0)
    if not isinstance(part, ToolReturnPart):
        note = "run_code asked for a retry: " + str(getattr(part, "content", ""))[:120].replace(
            "\n", " "
        )
        return PeerOutcome(seconds, False, note)
    content = part.content
    stream_end = t0 + chunks[-1].t
    early = sum(1 for t in log.effect_times if t < stream_end)
    before_seal = (
        f"{early} live read/write/unknown call(s) ran before the stream ended" if early else ""
    )
    if reference is None:
        return PeerOutcome(seconds, True, before_seal, content)
    equal, note = _compare(content, log, reference, reference_state, final_state(specs), specs)
    return PeerOutcome(seconds, equal, "; ".join(n for n in (note, before_seal) if n), content)


def _compare(
    content: object,
    log: _Log,
    reference: RunResult,
    ref_state: object,
    state: object,
    specs: dict[str, dict[str, ToolSpec]],
) -> tuple[bool, str]:
    if reference.stdout:
        expected: object = {"output": reference.stdout, "result": reference.value}
    else:
        expected = reference.value
    if (
        isinstance(content, dict)
        and "output" in content
        and isinstance(expected, dict)
        and "output" in expected
    ):
        content = {**content, "output": str(content["output"]).rstrip("\n")}
        expected = {**expected, "output": str(expected["output"]).rstrip("\n")}
    problems = []
    if _normal(content) != _normal(expected):
        problems.append(f"value {str(content)[:60]!r} != {str(expected)[:60]!r}")
    effects = [
        (c.capability, c.method, _bound(specs[c.capability][c.method], c.args, c.kwargs))
        for c in reference.calls
        if c.effect is not None and not c.effect.speculable
    ]
    ran = [
        (cap, method, _bound(specs[cap][method], (), kwargs)) for cap, method, kwargs in log.effects
    ]
    if _normal(ran) != _normal(effects):
        problems.append(f"effects {len(log.effects)} calls != {len(effects)}")
    if _normal(state) != _normal(ref_state):
        problems.append("final state differs")
    return not problems, "; ".join(problems)


async def main_async(names: list[str], modes: list[str]) -> None:
    for name in names:
        for mode in modes:
            outcome = await run_peer(name, mode)
            print(
                f"{name:22} {mode:10} {outcome.seconds:6.2f} s  {outcome.note or ''}  {str(outcome.value)[:80]}"
            )


def main() -> None:
    from make_scenarios import SCENARIOS

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default="")
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    names = args.only.split(",") if args.only else [s.name for s in SCENARIOS]
    anyio.run(main_async, names, args.modes.split(","))


if __name__ == "__main__":
    main()
