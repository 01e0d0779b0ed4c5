"""Benchmark: Guest start-up of this tree and a baseline revision, side by side in one run.

    .venv/bin/python benchmarks/guest_side_by_side.py --baseline REV [--rounds N] [--starts N] [--only MODE ...]

Two Pysolate trees cannot share one interpreter (the same module names), so each round
runs ``benchmarks/guest.py`` of each tree — the baseline's own copy, from ``git archive``
— one after the other, ``--starts`` starts per mode, and the rounds alternate the trees so
machine noise hits them alike. It prints, per mode and tree, the median over the rounds of
``guest.py``'s side-by-side row (spawn → ready, CPU per Guest = Guest + Host from its
cgroup meter, PSS, run of ``1``) and the lowest CPU of any round.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("start ms", "x bare", "CPU ms", "Guest ms", "Host ms", "PSS MiB", "run ms")


def rows(output: str) -> dict[str, list[float]]:
    """``guest.py``'s side-by-side table: mode label -> its first numeric columns."""
    found: dict[str, list[float]] = {}
    _, _, table = output.partition("\nside by side")
    for line in table.splitlines()[2:]:
        words = line.split()
        numbers = [word for word in words if _number(word)]
        if len(numbers) >= len(COLUMNS):
            label = " ".join(words[: len(words) - len(numbers)])
            found[label] = [float(word) for word in numbers[: len(COLUMNS)]]
    return found


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def run_tree(tree: Path, starts: int, only: list[str]) -> dict[str, list[float]]:
    command = [
        sys.executable,
        str(tree / "benchmarks" / "guest.py"),
        "--starts",
        str(starts),
        "--calls",
        "20",
    ]
    done = subprocess.run(
        [*command, "--only", *only] if only else command,
        capture_output=True,
        text=True,
        cwd=tree,
        check=True,
    )
    return rows(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", required=True, help="a git revision (e.g. main)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--starts", type=int, default=15)
    parser.add_argument("--only", nargs="*", default=["landlock fork", "namespaces fork"])
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", options.baseline], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        trees = {options.baseline: Path(tmp), "this tree": ROOT}
        seen: dict[tuple[str, str], list[list[float]]] = {}
        for _ in range(options.rounds):
            for label, tree in trees.items():
                for mode, values in run_tree(tree, options.starts, options.only).items():
                    seen.setdefault((mode, label), []).append(values)
    print(
        f"medians of {options.rounds} alternating rounds x {options.starts} starts per mode (benchmarks/guest.py of each tree)"
    )
    print(f"  {'mode':<17} {'tree':<12} " + " ".join(f"{c:>9}" for c in COLUMNS) + "  min CPU ms")
    for (mode, label), samples in sorted(seen.items()):
        medians = [statistics.median(column) for column in zip(*samples, strict=True)]
        print(
            f"  {mode:<17} {label:<12} "
            + " ".join(f"{m:9.2f}" for m in medians)
            + f"  {min(s[2] for s in samples):9.2f}"
        )


if __name__ == "__main__":
    main()
