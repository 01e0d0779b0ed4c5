"""The session scenario of ``latency.py``: an agent's turns against one Guest.

Four model replies, streamed one after the other into one session:

1. ``list``: list this week's notes and build ``paths``;
2. ``iterate``: read every note in ``paths`` (a list turn 1 left) and keep its topic;
3. ``typo``: look up owners and docs for ``topics`` (turn 2's), then a syntax error;
4. ``retry``: the same reply, corrected (what a model does after the error).

Measured in one run, per system, summed over the turns:

- **baseline**: each reply streamed to its end, then ``session.run_source(src,
  speculate=False)`` in one session (stream, then run, turn after turn);
- **Pysolate**: ``session.run_stream`` of each reply at recorded speed;
- **oracle**: per turn, ``oracle.compute`` with the earlier turns' globals known from the
  turn's start; the rejected turn costs its stream and its early calls' results are
  available to the retry when the ideal schedule would have them (a call still running
  when the typo turn ends counts as continuing into the retry).

The share of the oracle saving is (baseline - Pysolate) / (baseline - oracle) over the
whole session; every Pysolate turn must equal the baseline's turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import anyio
from bench_tools import GuestKind, ToolSpec, final_state, make_host
from oracle import call_id
from oracle import compute as compute_oracle

from occurrences import PrefixParser
from pysolate import RunResult, SessionLimits
from pysolate.streams import Chunk, play, source_to_stream

TOKENS_PER_SECOND = 60

_REPORT = """\
# Owners and docs for the first three topics.
owners = [kb.get(key="owner:" + k) for k in ("retry", "cache", "rate")]
hits = [docs.search(query=t) for t in topics[:3]]
report = {t: h[0] for t, h in zip(topics, hits)}
print(len(report), "topics with docs")
summary = {
    "owners": owners,
    "report": report,
    "count": len(report),
CLOSE
summary["count"]
"""

TURNS: tuple[tuple[str, str], ...] = (
    (
        "list",
        """\
# Which notes do we have this week?
days = fs.list_dir(path="notes")
paths = ["notes/" + d for d in days]
print(len(paths), "notes")
paths
""",
    ),
    (
        "iterate",
        """\
# Read every note and keep its topic.
texts = {}
for p in paths:
    texts[p] = fs.read(path=p)
topics = [t.splitlines()[0].split(": ", 1)[1] for t in texts.values()]
print(topics[0])
topics
""",
    ),
    ("typo", _REPORT.replace("CLOSE\n", "")),
    ("retry", _REPORT.replace("CLOSE", "}")),
)


@dataclass(slots=True)
class SessionMeasured:
    baseline: float
    pysolate: float
    oracle: float
    turns: list[tuple[str, float, float, float, str]]
    """Per turn: name, baseline s, Pysolate s, oracle s, status."""
    mismatches: list[str]
    physical: int
    logical: int
    reused: int

    @property
    def share(self) -> float:
        return (self.baseline - self.pysolate) / (self.baseline - self.oracle)


def streams(speed: float = 1.0) -> list[list[Chunk]]:
    """Each turn's reply as a model streams it (``speed`` > 1 replays faster)."""
    return [
        [
            Chunk(c.t / speed, c.text)
            for c in source_to_stream(src, tokens_per_second=TOKENS_PER_SECOND, seed=n)
        ]
        for n, (_, src) in enumerate(TURNS)
    ]


def _oracle(
    chunks: Sequence[Sequence[Chunk]], specs: dict[str, dict[str, ToolSpec]]
) -> list[float]:
    """Per turn, its ideal end (seconds from the turn's first token)."""
    namespace: dict[str, object] = {}
    ready: dict[tuple[object, ...], float] = {}
    ends: list[float] = []
    for (name, _), turn in zip(TURNS, chunks, strict=True):
        if name != "typo":
            ends.append(compute_oracle(turn, specs, namespace=namespace, ready=ready).end)
            ready = {}
            continue
        # The prefix the parser accepted before the error, as it streamed; its calls ran
        # early in the ideal schedule, on a copy of the globals (the turn never runs).
        parser = PrefixParser()
        accepted = ""
        for chunk in turn:
            snapshot = parser.feed(chunk.text)
            accepted = snapshot.source if snapshot is not None else accepted
        prefix = _cut(turn, len(accepted))
        early = compute_oracle(prefix, specs, namespace=dict(namespace))
        stream_end = turn[-1].t
        ready = {
            call_id(c.capability, c.method, c.args, c.kwargs): max(0.0, c.end - stream_end)
            for c in early.calls
            if c.eligible
        }
        ends.append(stream_end)
    return ends


def _cut(chunks: Sequence[Chunk], length: int) -> list[Chunk]:
    out: list[Chunk] = []
    taken = 0
    for chunk in chunks:
        if taken >= length:
            break
        out.append(Chunk(chunk.t, chunk.text[: length - taken]))
        taken += len(out[-1].text)
    return out


async def _timed(chunks: Sequence[Chunk]) -> AsyncIterator[str]:
    async for text in play(chunks):
        yield text


async def measure_session(
    latency_scale: float = 1.0, guest: GuestKind = "isolated", speed: float = 1.0
) -> SessionMeasured:
    """Baseline, Pysolate and oracle of the session scenario, in this order, in one run."""
    chunks = streams(speed)
    _, specs = make_host(latency_scale)
    oracle = _oracle(chunks, specs)
    limits = SessionLimits(idle_time=60)

    host, ref_specs = make_host(latency_scale, guest=guest)
    reference: list[RunResult] = []
    baseline: list[float] = []
    async with host.session(limits) as session:
        for turn in chunks:
            t0 = anyio.current_time()
            source = "".join([text async for text in play(turn)])
            reference.append(await session.run_source(source, speculate=False))
            baseline.append(anyio.current_time() - t0)
    ref_state = final_state(ref_specs)

    host, run_specs = make_host(latency_scale, guest=guest)
    results: list[RunResult] = []
    walls: list[float] = []
    async with host.session(limits) as session:
        for turn in chunks:
            t0 = anyio.current_time()
            results.append(await session.run_stream(_timed(turn)))
            walls.append(anyio.current_time() - t0)
        reused = session.statistics().reused
    from latency import mismatches

    wrong = [
        f"{name}:{m}"
        for (name, _), got, want in zip(TURNS, results, reference, strict=True)
        for m in mismatches(got, None, want, None)
    ]
    if final_state(run_specs) != ref_state:
        wrong.append("state")
    rows = [
        (name, b, w, o, r.status.value)
        for (name, _), b, w, o, r in zip(TURNS, baseline, walls, oracle, results, strict=True)
    ]
    return SessionMeasured(
        sum(baseline),
        sum(walls),
        sum(oracle),
        rows,
        wrong,
        sum(r.report.physical for r in results),
        sum(r.report.logical for r in results),
        reused,
    )
