"""Without an optional SDK, its tests are skipped with a reason; the rest still run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_missing_sdk_skips_its_modules_with_a_reason_and_the_rest_still_runs(
    tmp_path: Path,
) -> None:
    # A stand-in that fails to import exactly as an uninstalled distribution does.
    fake = tmp_path / "smolagents"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'smolagents\'", name="smolagents")\n'
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "tests/pysolate/integrations/test_smolagents.py",
            "tests/pysolate/test_capability.py",
        ],
        cwd=ROOT,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "needs smolagents (pip install -e '.[test]')" in done.stdout
    assert " passed, 1 skipped" in done.stdout


def test_only_a_missing_optional_sdk_is_a_skip() -> None:
    """Any other import error still fails collection (``missing_optional`` says None)."""
    from conftest import missing_optional

    def cause(name: str) -> BaseException:
        error = RuntimeError("collection failed")
        error.__cause__ = ModuleNotFoundError(f"No module named {name!r}", name=name)
        return error

    assert missing_optional(cause("openai.types")) == "openai"
    assert missing_optional(cause("agents")) == "openai-agents"
    assert missing_optional(cause("no_such_module_here")) is None
    assert missing_optional(ImportError("cannot import name 'x'")) is None
