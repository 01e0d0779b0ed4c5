"""Benchmark: which git library a ``Workspace.git`` root reads through (issue 38).

    .venv/bin/python benchmarks/git_libraries.py REPO

For each candidate installed (pygit2: libgit2 bindings; dulwich: pure Python with C
helpers; ``git cat-file --batch``: the git binary as a long-lived child), in a fresh
process each so that import cost and RSS are its own: the import (ms, RSS added), the
freeze (open the repository and resolve ``HEAD`` to its commit and root tree: ms, RSS
added), a directory listing from its tree object, and reads of blobs by size class
(about 4 KiB, 100 KiB, 1 MiB): the first read of each of 30 distinct blobs (cold, as an
early read meets them) and the same blobs read again (warm, the library's own caching).
Best of 3 passes; ``time.perf_counter`` per read, mean over the class.

The repository should be large (``benchmarks/workspace.py --generate`` makes one of
100,000 files / 2 GB) so that the freeze cannot cheat by reading everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

CANDIDATES = ("pygit2", "dulwich", "cat-file")
CLASSES = {"4 KiB": (3_000, 6_000), "100 KiB": (80_000, 150_000), "1 MiB": (900_000, 1_300_000)}
PER_CLASS = 30


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def pick(repo: str) -> dict[str, list[str]]:
    """PER_CLASS paths of each size class (sizes from ``git ls-tree -l``)."""
    listing = subprocess.run(
        ["git", "-C", repo, "ls-tree", "-r", "-l", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, list[str]] = {name: [] for name in CLASSES}
    for line in listing.stdout.splitlines():
        meta, path = line.split("\t", 1)
        kind, size = meta.split()[1], meta.split()[3]
        if kind != "blob":
            continue
        for name, (lo, hi) in CLASSES.items():
            if lo <= int(size) <= hi and len(out[name]) < PER_CLASS:
                out[name].append(path)
    return out


def measure(library: str, repo: str, paths: dict[str, list[str]]) -> dict[str, float]:
    """Runs in its own process (``--one``)."""
    r0, t = rss_mb(), time.perf_counter()
    if library == "pygit2":
        import pygit2
    elif library == "dulwich":
        import dulwich.object_store
        import dulwich.repo
    imported, r1 = time.perf_counter() - t, rss_mb()
    t = time.perf_counter()
    if library == "pygit2":
        repository = pygit2.Repository(repo)
        root = repository.revparse_single("HEAD").peel(pygit2.Commit).tree

        def read(path: str) -> bytes:
            return repository.odb.read(root[path].id)[1]

        def listing(path: str) -> list[str]:
            return [e.name for e in root[path]]

    elif library == "dulwich":
        repository = dulwich.repo.Repo(repo)
        store = repository.object_store
        root_id = repository[repository.head()].tree
        lookup = dulwich.object_store.tree_lookup_path

        def read(path: str) -> bytes:
            return store[lookup(store.__getitem__, root_id, path.encode())[1]].as_raw_string()

        def listing(path: str) -> list[str]:
            tree = store[lookup(store.__getitem__, root_id, path.encode())[1]]
            return [e.path.decode() for e in tree.iteritems()]

    else:
        child = subprocess.Popen(
            ["git", "-C", repo, "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert child.stdin is not None and child.stdout is not None
        stdin, stdout = child.stdin, child.stdout

        def ask(spec: str) -> bytes:
            stdin.write(spec.encode() + b"\n")
            stdin.flush()
            size = int(stdout.readline().split()[2])
            data = stdout.read(size)
            stdout.read(1)
            return data

        # The commit id, as a git root would resolve it (one more short-lived git process).
        commit = subprocess.run(
            ["git", "-C", repo, "rev-parse", "HEAD^{commit}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

        def read(path: str) -> bytes:
            return ask(f"{commit}:{path}")

        def listing(path: str) -> list[str]:
            data, names, i = ask(f"{commit}:{path}"), [], 0
            while i < len(data):
                nul = data.index(b"\0", i)
                names.append(data[data.index(b" ", i) + 1 : nul].decode())
                i = nul + 21
            return names

    froze, r2 = time.perf_counter() - t, rss_mb()
    out = {
        "import ms": imported * 1e3,
        "import MB": r1 - r0,
        "freeze ms": froze * 1e3,
        "freeze MB": r2 - r1,
    }
    some_dir = next(iter(paths.values()))[0].rpartition("/")[0]
    best = min(_timed(lambda: listing(some_dir)) for _ in range(20))
    out["list_dir µs"] = best * 1e6
    for name, group in paths.items():
        cold = sum(_timed(lambda p=p: read(p)) for p in group) / len(group)
        warm = min(sum(_timed(lambda p=p: read(p)) for p in group) / len(group) for _ in range(3))
        out[f"{name} cold µs"], out[f"{name} warm µs"] = cold * 1e6, warm * 1e6
    out["RSS end MB"] = rss_mb()
    return out


def _timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


def main() -> None:
    if sys.argv[1] == "--one":
        library, repo, paths = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
        print(json.dumps(measure(library, repo, paths)))
        return
    repo = str(Path(sys.argv[1]).resolve())
    paths = pick(repo)
    rows: dict[str, dict[str, float]] = {}
    for library in CANDIDATES:
        done = subprocess.run(
            [sys.executable, __file__, "--one", library, repo, json.dumps(paths)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            print(f"{library}: not measured ({done.stderr.strip().splitlines()[-1:]})")
            continue
        rows[library] = json.loads(done.stdout)
    columns = list(next(iter(rows.values())))
    print("| measure | " + " | ".join(rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for column in columns:
        print(f"| {column} | " + " | ".join(f"{rows[lib][column]:.1f}" for lib in rows) + " |")


if __name__ == "__main__":
    main()
