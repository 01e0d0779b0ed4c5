"""The default run's check of real Ray (the full suite is ``-m ray``): a local cluster in a
fresh interpreter, runs through Ray Guests equal to local ones, nothing left on the node."""

from __future__ import annotations

import json
import subprocess
import sys


def test_ray_guests_smoke() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pysolate.ray._smoke"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["runs"] == 8 and report["differences"] == [], "two event loops, one cluster"
    assert report["claimed"] >= 1, "the streamed run claimed early work while the Guest was remote"
    assert report["left"] == [[], []]


def test_importing_pysolate_does_not_import_ray() -> None:
    code = "import sys, pysolate, pysolate.testing, pysolate.streams; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
