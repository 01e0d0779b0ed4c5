"""``pysolate demo --guests ray`` (``-m ray``): the demo's two runs, Guests under Ray agents."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ray


def test_demo_with_ray_guests_equals_the_usual_way() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pysolate", "demo", "--guests", "ray", "--speed", "20", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout[done.stdout.index("{") :])
    assert report["equal"] is True and report["differences"] == []
    assert report["pysolate"]["result"]["report"]["claimed"] > 0
