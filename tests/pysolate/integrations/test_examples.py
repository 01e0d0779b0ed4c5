"""The integration examples run as documented, offline, with the real frameworks, and
overlap their reads with the stream (both searches claimed)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run_example(name: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_smolagents_example() -> None:
    lines = run_example("smolagents_agent.py")
    assert lines[-2].endswith("2 topics found")  # after smolagents' live display of the stream
    counts = ast.literal_eval(lines[-1])
    assert (counts["logical"], counts["claimed"], counts["direct"]) == (3, 2, 1)
