"""Write the latency benchmark's scenarios as recorded streams (benchmarks/scenarios/*.jsonl).

    .venv/bin/python benchmarks/make_scenarios.py

Each scenario is an agent program (calling the tools of ``bench_tools``) streamed at a
model's rate with model-sized tokens (``pysolate.streams.source_to_stream``), written as a
``pysolate-stream`` recording whose header names the scenario and its token rate. The
recordings are committed, so every benchmark run replays the very same chunks at the very
same times; rerun this script only when a program here changes.

Programs call tools with keyword arguments only, so the peer (``peer.py``) can be given the
same program with a mechanical rewrite (``docs.search(`` → ``await docs_search(``).
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pysolate.streams import Chunk, source_to_stream, write_recording

HERE = Path(__file__).resolve().parent
SCENARIO_DIR = HERE / "scenarios"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    title: str
    tokens_per_second: float
    source: str
    bursty: bool = False  # chunked like a real provider (``bursty_stream``), not token by token


def bursty_stream(source: str, *, seed: int = 0) -> list[Chunk]:
    """Chunks as a real provider delivers them (issue 16): 1-40 characters each, mostly
    20-150 ms apart, and one time in five after a pause of 0.1-0.5 s (the model thinking, the
    network batching)."""
    rng = random.Random(seed)
    chunks: list[Chunk] = []
    at, t = 0, 0.0
    while at < len(source):
        size = rng.randint(1, 40)
        t += rng.uniform(0.1, 0.5) if rng.random() < 0.2 else rng.uniform(0.02, 0.15)
        chunks.append(Chunk(round(t, 4), source[at : at + size]))
        at += size
    return chunks


SCENARIOS: list[Scenario] = [
    Scenario(
        "issue5_four_reads",
        "issue 5 figure: four independent 0.5 s reads",
        50,
        """\
# Look up the docs for each open topic, then summarise.
retry = docs.search(query="retry with backoff")
cache = docs.search(query="cache invalidation")
limits = docs.search(query="rate limits per tenant")
logging = docs.search(query="structured logging")
pages = retry + cache + limits + logging
print(f"{len(pages)} pages found")
sorted(pages)[:3]
""",
    ),
    Scenario(
        "parallel_reads",
        "independent parallel reads (mixed tools)",
        60,
        """\
page = web.fetch(url="https://status.example.com/incidents")
region = kb.get(key="region")
owner = kb.get(key="owner:retry")
hits = docs.search(query="incident response runbook")
notes = fs.read(path="notes/mon.md")
report = {
    "status": page[:40],
    "region": region,
    "owner": owner,
    "runbook": hits[0],
    "monday": notes.splitlines()[0],
}
print(report["owner"], report["region"])
report
""",
    ),
    Scenario(
        "dependent_chain",
        "dependent chain (each argument from the last result)",
        40,
        """\
first = kb.get(key="start")
second = kb.get(key=first)
third = kb.get(key=second)
fourth = kb.get(key=third)
hits = docs.search(query=f"{fourth} migration guide")
print(first, second, third, fourth)
hits
""",
    ),
    Scenario(
        "loop_known_list",
        "loop over a known list",
        50,
        """\
topics = ["retry", "cache", "rate", "logging", "tracing", "billing"]
answers = {}
for topic in topics:
    answers[topic] = docs.search(query=f"how to configure {topic}")
owners = [kb.get(key=f"owner:{t}") for t in topics[:3]]
summary = {t: pages[0] for t, pages in answers.items()}
print(len(summary), owners)
summary
""",
    ),
    Scenario(
        "loop_listed_dir",
        "loop over a listed directory",
        50,
        """\
names = fs.list_dir(path="notes")
texts = {name: fs.read(path=f"notes/{name}") for name in names}
firsts = [text.splitlines()[0] for text in texts.values()]
busiest = max(firsts, key=len)
print(f"{len(firsts)} notes; longest: {busiest}")
firsts
""",
    ),
    Scenario(
        "branches",
        "branches decided by a result",
        50,
        """\
mode = kb.get(key="mode")
if mode == "fast":
    plan = docs.search(query="fast path tuning")
    extra = kb.get(key="region")
else:
    plan = docs.search(query="safe path checklist")
    extra = kb.get(key="owner:cache")
fallback = docs.search(query="rollback procedure")
print(mode, extra)
[plan[0], fallback[0]]
""",
    ),
    Scenario(
        "read_after_write",
        "read after write",
        50,
        """\
before = store.get(key="config")
guide = docs.search(query="config versioning")
store.put(key="config", value=before + "-patched")
after = store.get(key="config")
count = store.get(key="counter")
store.put(key="counter", value=count + 1)
print(before, "->", after)
[after, guide[0], count + 1]
""",
    ),
    Scenario(
        "failing_read_caught",
        "a failing read caught by try",
        50,
        """\
try:
    owner = kb.get(key="owner:billing")
except KeyError:
    owner = "unassigned"
hits = docs.search(query="billing escalation")
try:
    text = fs.read(path="notes/sun.md")
except FileNotFoundError as exc:
    text = f"missing: {exc}"
print(owner, text)
[owner, hits[0], text]
""",
    ),
    Scenario(
        "live_and_writes",
        "live reads and writes mixed in",
        80,
        """\
started = clock.now()
config = store.get(key="config")
guide = docs.search(query="deploy checklist")
store.put(key="last_run", value=started)
status = web.fetch(url="https://status.example.com/deploys")
owner = kb.get(key="owner:rate")
log = shell.run(cmd="deploy --dry-run")
ended = clock.now()
notes = fs.read(path="notes/fri.md")
store.put(key="summary", value=f"{config} {owner} {len(status)} {log}")
print(started, ended)
[guide[0], notes.splitlines()[0]]
""",
    ),
    Scenario(
        "no_eligible",
        "no eligible call (live reads, writes, unknown)",
        50,
        """\
started = clock.now()
result = shell.run(cmd="make test")
store.put(key="last_test", value=result)
ended = clock.now()
store.put(key="window", value=[started, ended])
print(result)
ended
""",
    ),
]


SCENARIOS += [
    Scenario(
        "if_body_read",
        "reads inside an if body (bursty chunks)",
        50,
        """\
region = "eu-west"
if region.startswith("eu"):
    notes = fs.read(path="notes/mon.md")
    hits = docs.search(query="gdpr retention policy")
    owner = kb.get(key="owner:retry")
else:
    notes = fs.read(path="notes/tue.md")
    hits = []
    owner = "nobody"
print(len(notes), owner)
[notes.splitlines()[0], hits, owner]
""",
        bursty=True,
    ),
    Scenario(
        "multiline_tuple",
        "a multi-line tuple of reads (bursty chunks)",
        50,
        """\
pages = (
    docs.search(query="retry with backoff"),
    docs.search(query="cache invalidation"),
    kb.get(key="region"),
    fs.read(path="notes/wed.md"),
)
print(len(pages), pages[2])
[pages[0][0], pages[1][0], pages[3].splitlines()[0]]
""",
        bursty=True,
    ),
    Scenario(
        "reads_after_write",
        "reads after a write on an unscoped capability (bursty chunks)",
        50,
        """\
store.put(key="config", value="v2")
config = store.get(key="config")
counter = store.get(key="counter")
region = kb.get(key="region")
print(config, counter, region)
[config, counter, region]
""",
        bursty=True,
    ),
    Scenario(
        "four_reads_bursty",
        "four independent reads (bursty chunks)",
        50,
        """\
retry = docs.search(query="retry with backoff")
cache = docs.search(query="cache invalidation")
limits = docs.search(query="rate limits per tenant")
logging = docs.search(query="structured logging")
pages = retry + cache + limits + logging
print(f"{len(pages)} pages found")
sorted(pages)[:3]
""",
        bursty=True,
    ),
]


SCENARIOS += [
    Scenario(
        "ws_read_after_write",
        "workspace: read, write, read it again (issue 17)",
        50,
        """\
before = ws.read_text(path="config.md")
guide = docs.search(query="config versioning")
ws.write_text(path="config.md", text=before + "-patched")
after = ws.read_text(path="config.md")
count = ws.read_text(path="counter.md")
ws.write_text(path="counter.md", text=count + "+1")
print(before, "->", after)
[after, guide[0], count + "+1"]
""",
    ),
    Scenario(
        "ws_write_heavy",
        "workspace: a report per day, an index, then read back (issue 17)",
        50,
        """\
days = ["mon", "tue", "wed", "thu"]
for day in days:
    text = ws.read_text(path=f"notes/{day}.md")
    ws.write_text(path=f"report/{day}.md", text=text.splitlines()[0].lower())
ws.write_text(path="report/index.md", text=", ".join(days))
names = ws.list_dir(path="report")
first = ws.read_text(path="report/mon.md")
[names, first]
""",
    ),
]


def long_program(sections: int = 18) -> str:
    """A long agent program (>= 300 lines): sections of plain computation around reads."""
    topics = [
        "retry",
        "cache",
        "rate",
        "logging",
        "tracing",
        "billing",
        "search",
        "auth",
        "queue",
        "deploy",
        "backup",
    ]
    lines = [
        "# Audit every subsystem: docs, owners, notes, and a score per subsystem.",
        "weights = {'docs': 3, 'owner': 2, 'notes': 1}",
        "scores = {}",
        "findings = []",
        "",
        "def score(pages, owner, text):",
        "    total = 0",
        "    total += weights['docs'] * len(pages)",
        "    if owner != 'unassigned':",
        "        total += weights['owner']",
        "    total += weights['notes'] * min(3, len(text) // 10)",
        "    return total",
        "",
        "def headline(text):",
        "    first = text.splitlines()[0] if text else ''",
        "    return first.strip()[:60]",
        "",
    ]
    days = ["mon", "tue", "wed", "thu", "fri", "sat"]
    for i in range(sections):
        topic = topics[i % len(topics)]
        day = days[i % len(days)]
        n = f"{topic}_{i}"
        lines += [
            f"# --- section {i}: {topic} ---",
            f"pages_{i} = docs.search(query='{topic} runbook part {i}')",
            "try:",
            f"    owner_{i} = kb.get(key='owner:{topic}')",
            "except KeyError:",
            f"    owner_{i} = 'unassigned'",
            f"text_{i} = fs.read(path='notes/{day}.md')",
            f"count_{i} = 0",
            f"for page in pages_{i}:",
            "    if page.endswith('.md'):",
            f"        count_{i} += 1",
            f"label_{i} = headline(text_{i}).upper()",
            f"scores['{n}'] = score(pages_{i}, owner_{i}, text_{i})",
            f"if scores['{n}'] > 7:",
            f"    findings.append(('{n}', label_{i}, count_{i}))",
            "",
        ]
    lines += [
        "ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))",
        "top = [name for name, _ in ranked[:5]]",
        "print(f'{len(findings)} findings; top: {top}')",
        "{'top': top, 'findings': len(findings)}",
    ]
    return "\n".join(lines) + "\n"


SCENARIOS.append(Scenario("long_program", "a long program (>= 300 lines)", 100, long_program()))


def main(argv: list[str] | None = None) -> None:
    """Write every scenario, or only those named on the command line."""
    names = set(sys.argv[1:] if argv is None else argv)
    SCENARIO_DIR.mkdir(exist_ok=True)
    for scenario in SCENARIOS:
        if names and scenario.name not in names:
            continue
        if scenario.bursty:
            chunks = bursty_stream(scenario.source, seed=0)
        else:
            chunks = source_to_stream(
                scenario.source, tokens_per_second=scenario.tokens_per_second, seed=0
            )
        metadata = {
            "name": scenario.name,
            "title": scenario.title,
            "chunking": "bursty" if scenario.bursty else "tokens",
            "tokens_per_second": scenario.tokens_per_second,
            "tokens": len(chunks),
            "lines": scenario.source.count("\n"),
        }
        write_recording(SCENARIO_DIR / f"{scenario.name}.jsonl", chunks, metadata=metadata)
        print(
            f"{scenario.name:22} {len(chunks):5} tokens {chunks[-1].t:6.2f} s {metadata['lines']:4} lines"
        )


if __name__ == "__main__":
    main()
