"""Benchmark: workspace roots over real projects (issue 38), side by side.

    .venv/bin/python benchmarks/workspace.py [--big DIR] [--medium DIR] [--this DIR] [--reads N]

Repositories are generated under /tmp on first use (``git fast-import``, random base64
text so that blobs do not compress away): ``--big`` 100,000 files / about 2 GB, no work
tree (a git root needs none); ``--medium`` 10,000 files / about 200 MB with its work tree,
small enough for today's in-memory root (``MAX_FROZEN_BYTES``); ``--this`` defaults to this
repository's work tree. Sizes: 90% of files 2-8 KB, 9% 50-150 KB, 1% 0.4-1.2 MB.

Each measurement runs in a fresh process so that its RSS is its own:

1. freeze: ``Workspace.git`` (HEAD), ``Workspace.frozen(lazy=True)`` and the eager
   ``Workspace.frozen`` where the tree allows: wall and CPU time, Host RSS added (the
   import of pygit2 counted, and not), best of 3;
2. per read, as the program sees it: a subprocess Guest reads ``--reads`` distinct files of
   a size class (about 4 KiB, 100 KiB, 900 KiB: all under 1 MB), timed inside the Guest
   with ``time.perf_counter`` per call, first on a fresh root (cold: the first read of each
   file) then the same files again (warm); mean µs per read, best of 3 runs; the ratio to
   the in-memory root on the same files (the medium repository's checkout).

Targets: freezing the 2 GB repository <= 50 ms and <= 20 MB of Host RSS; a read of a file
under 1 MB within 2x of the in-memory root's.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLASSES = {"4 KiB": (3_000, 6_000), "100 KiB": (80_000, 150_000), "900 KiB": (700_000, 999_000)}
REPEATS = 3


def generate(repo: Path, files: int, checkout: Path | None, seed: int = 38) -> None:
    """A repository of ``files`` random text files in 100-file directories, at ``repo``;
    with its work tree at ``checkout`` (a linked work tree: only a ``.git`` file there)."""
    if (repo / ".git").exists():
        return
    rng = random.Random(seed)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    importer = subprocess.Popen(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "pack.compression=1",
            "-c",
            "core.compression=1",
            "fast-import",
            "--quiet",
        ],
        stdin=subprocess.PIPE,
    )
    assert importer.stdin is not None
    paths = []
    for i in range(files):
        r = rng.random()
        size = (
            rng.randint(2_000, 8_000)
            if r < 0.9
            else rng.randint(50_000, 150_000)
            if r < 0.99
            else rng.randint(400_000, 1_200_000)
        )
        data = base64.b64encode(rng.randbytes(size * 3 // 4 + 3))[:size]
        importer.stdin.write(b"blob\nmark :%d\ndata %d\n%s\n" % (i + 1, len(data), data))
        paths.append(f"d{i // 1000:03d}/s{(i // 100) % 10}/f{i:06d}.txt")
    importer.stdin.write(
        b"commit refs/heads/main\ncommitter bench <bench@example.com> 0 +0000\ndata 9\ngenerated\n"
    )
    for i, path in enumerate(paths):
        importer.stdin.write(b"M 100644 :%d %s\n" % (i + 1, path.encode()))
    importer.stdin.close()
    importer.wait()
    subprocess.run(["git", "-C", str(repo), "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
    if checkout is not None:
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(checkout), "main"],
            check=True,
        )


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def one_freeze(kind: str, path: str, preimport: bool) -> dict[str, object]:
    from pysolate import Workspace, WorkspaceError

    if preimport:
        import pygit2  # noqa: F401
    before, wall, cpu = rss_mb(), time.perf_counter(), time.process_time()
    try:
        ws = Workspace.git(path) if kind == "git" else Workspace.frozen(path, lazy=kind == "lazy")
    except WorkspaceError as exc:
        return {"error": str(exc).split(" (")[0]}
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "ms": wall * 1e3,
        "cpu ms": cpu * 1e3,
        "rss MB": rss_mb() - before,
        "root": ws.root_id[:16],
    }


def pick(repo: Path, per_class: int) -> dict[str, list[str]]:
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "-l", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    picked: dict[str, list[str]] = {name: [] for name in CLASSES}
    for line in out.stdout.splitlines():
        meta, path = line.split("\t", 1)
        size = int(meta.split()[3])
        for name, (lo, hi) in CLASSES.items():
            if lo <= size <= hi and len(picked[name]) < per_class:
                picked[name].append(path)
    return picked


PROGRAM = """
import time
out = {}
for name, paths in CLASSES.items():
    for phase in ('cold', 'warm'):
        t = []
        for p in paths:
            s = time.perf_counter()
            workspace.read_bytes(p)
            t.append(time.perf_counter() - s)
        out[name + ' ' + phase] = sum(t) / len(t) * 1e6
out
"""


def one_reads(kind: str, path: str, classes: dict[str, list[str]]) -> dict[str, object]:
    import anyio

    from pysolate import Host, Workspace

    async def main() -> dict[str, object]:
        host = Host()
        if kind == "eager":  # today's in-memory root, holding the files read
            root = Workspace.from_files(
                {p: (Path(path) / p).read_bytes() for ps in classes.values() for p in ps}
            )
        else:
            root = Workspace.git(path) if kind == "git" else Workspace.frozen(path, lazy=True)
        host.register("workspace", root)
        before = rss_mb()
        result = await host.run_source(f"CLASSES = {classes!r}\n" + PROGRAM, speculate=False)
        assert result.status == "ok", result.error
        return {**result.value, "Host RSS MB after": rss_mb(), "RSS added MB": rss_mb() - before}  # type: ignore[dict-item]

    return anyio.run(main)


def child(args: list[str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(args)], capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def best(runs: list[dict[str, object]]) -> dict[str, object]:
    if "error" in runs[0]:
        return runs[0]
    out: dict[str, object] = {}
    for key in runs[0]:
        values = [r[key] for r in runs]
        out[key] = min(values) if isinstance(values[0], float) and "after" not in key else values[0]  # type: ignore[type-var]
    return out


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        what = json.loads(sys.argv[2])
        result = one_freeze(*what[1:]) if what[0] == "freeze" else one_reads(*what[1:])
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--big", default="/tmp/pysolate-bench-100k")
    parser.add_argument("--medium", default="/tmp/pysolate-bench-10k")
    parser.add_argument("--this", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--reads", type=int, default=30)
    args = parser.parse_args()
    checkout = args.medium + "-checkout"
    generate(Path(args.big), 100_000, checkout=None)
    generate(Path(args.medium), 10_000, checkout=Path(checkout))
    print("## Freezing (best of 3, fresh process each)\n")
    print(
        "| tree | root | ms | CPU ms | Host RSS added (MB) | ms, pygit2 imported before | MB, pygit2 imported before |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    trees = {
        "100,000 files / 2 GB (git only)": args.big,
        "10,000 files / 200 MB": args.medium,
        "this repository": args.this,
    }
    for label, path in trees.items():
        kinds = ("git",) if path == args.big else ("git", "lazy", "eager")
        for kind in kinds:
            at = checkout if path == args.medium and kind != "git" else path
            runs = best([child(["freeze", kind, at, False]) for _ in range(REPEATS)])
            if "error" in runs:
                print(f"| {label} | {kind} | refused: {runs['error']} | | | | |")
                continue
            pre = (
                best([child(["freeze", kind, path, True]) for _ in range(REPEATS)])
                if kind == "git"
                else runs
            )
            print(
                f"| {label} | {kind} | {runs['ms']:.1f} | {runs['cpu ms']:.1f} | {runs['rss MB']:.1f} | {pre['ms']:.1f} | {pre['rss MB']:.1f} |"
            )
    classes = pick(Path(args.medium), args.reads)
    print(
        f"\n## Reads as the program sees them (µs per read, mean of {args.reads} files, best of 3; subprocess Guest)\n"
    )
    at = {"eager": checkout, "git": args.medium, "lazy": checkout}
    rows = {
        kind: best([child(["reads", kind, at[kind], classes]) for _ in range(REPEATS)])
        for kind in ("eager", "git", "lazy")
    }
    print("| class | in memory | git | git / memory | lazy | lazy / memory |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in CLASSES:
        for phase in ("cold", "warm"):
            key = f"{name} {phase}"
            mem, git, lazy = (float(rows[k][key]) for k in ("eager", "git", "lazy"))  # type: ignore[arg-type]
            print(
                f"| {key} | {mem:.0f} | {git:.0f} | {git / mem:.2f} | {lazy:.0f} | {lazy / mem:.2f} |"
            )
    print(
        "\nHost RSS after the reads (MB): "
        + ", ".join(f"{k} {float(v['Host RSS MB after']):.0f}" for k, v in rows.items())
    )  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
