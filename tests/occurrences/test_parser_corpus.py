"""PrefixParser on the CPython standard library, streamed in random 1-16 character chunks.

Every file ``ast.parse`` accepts must give identical statements (every snapshot, and the
final one); every file it rejects must raise the same error at ``close()``. The default run
checks a sample (the largest files, two rejected ones, and a seeded random rest); the whole
library runs with ``pytest -m corpus``. Python 3.11, 3.12 and 3.13 lex differently (PEP 701
f-strings), so each installed interpreter checks its *own* standard library by running
``corpus_check.py`` with ``PYTHONPATH`` at the repository root.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import corpus_check
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(corpus_check.__file__).resolve()
VERSIONS = ("3.11", "3.12", "3.13")
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"


def require_corpus_selected(request: pytest.FixtureRequest) -> None:
    """Whole-library runs take minutes: only when selected with ``-m corpus``."""
    if "corpus" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("whole standard library: select with -m corpus")


def find_interpreter(version: str) -> str | None:
    """A working ``python<version>``: on PATH, or a pyenv install the shim does not expose."""
    candidates = [shutil.which(f"python{version}")]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"))
    for candidate in candidates:
        if not candidate:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    return None


def run_elsewhere(version: str, *args: str) -> dict[str, object]:
    interpreter = find_interpreter(version)
    if interpreter is None:
        pytest.skip(f"python{version} is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [interpreter, "-s", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.stdout, done.stderr
    report: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    assert report["python"].startswith(version)  # type: ignore[attr-defined]
    return report


def assert_exact(report: dict[str, object]) -> None:
    assert report["mismatch_count"] == 0, report["mismatches"]
    assert report["valid"], "no file was checked"


def test_sampled_stdlib_streams_exactly() -> None:
    files = corpus_check.sample(corpus_check.stdlib_files(), 40, seed=0)
    report = corpus_check.run(files, seed=0)
    assert_exact(report)
    assert report["rejected"], "the sample must include files CPython rejects"


@pytest.mark.parametrize("version", [v for v in VERSIONS if v != RUNNING])
def test_sampled_stdlib_of_other_interpreters(version: str) -> None:
    assert_exact(run_elsewhere(version, "--sample", "12", "--largest", "2", "--seed", "1"))


@pytest.mark.corpus
def test_whole_stdlib_streams_exactly(request: pytest.FixtureRequest) -> None:
    require_corpus_selected(request)
    assert_exact(corpus_check.run(corpus_check.stdlib_files(), seed=0))


@pytest.mark.corpus
@pytest.mark.parametrize("version", [v for v in VERSIONS if v != RUNNING])
def test_whole_stdlib_of_other_interpreters(version: str, request: pytest.FixtureRequest) -> None:
    require_corpus_selected(request)
    assert_exact(run_elsewhere(version, "--seed", "1"))
