"""The integration examples run as documented (docs/integrations.md), offline, with the real
SDKs and frameworks, overlap their reads with the stream (both searches claimed), and
leave nothing open behind them."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def run_example(name: str) -> list[str]:
    """Run ``examples/name`` and return its output lines; it must end cleanly and leak
    nothing (every stream, socket and Guest closed: no ``ResourceWarning``)."""
    done = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("name", ["openai_tool_call.py", "anthropic_tool_use.py"])
def test_sdk_tool_call_examples(name: str) -> None:
    lines = run_example(name)
    assert lines[0] == "4 hits"
    assert lines[1].startswith("ok 'retries: page 1' {")
    assert ast.literal_eval(lines[1][lines[1].index("{") :])["claimed"] == 2


@pytest.mark.parametrize("name", ["openai_agent_loop.py", "anthropic_agent_loop.py"])
def test_raw_sdk_agent_loop_examples(name: str) -> None:
    """The whole loop runs to the model's text answer, which quotes the run's result; both
    searches claimed (started while the call streamed)."""
    lines = run_example(name)
    assert lines[0].startswith("ok 'retries: page 1' {")
    assert ast.literal_eval(lines[0][lines[0].index("{") :])["claimed"] == 2
    assert lines[1:] == [
        "The program says: The code ran. Value of the last expression: 'retries: page 1'"
    ]


def test_pydantic_ai_example() -> None:
    lines = run_example("pydantic_ai_agent.py")
    assert ast.literal_eval(lines[0]) == {"value": 2, "stdout": ""}
    status, counts = lines[1].split(" ", 1)
    assert status == "ok"
    assert ast.literal_eval(counts) | {"physical": 0} == {
        "logical": 3,
        "physical": 0,
        "claimed": 2,
        "direct": 1,
        "shared": 0,
        "cancelled": 0,
        "late": 0,
        "orphaned": 0,
        "discarded": 0,
        "early_writes": 0,
        "host_shared": 0,
    }
    assert lines[2] == "Found two pages of results."


def test_smolagents_example() -> None:
    lines = run_example("smolagents_agent.py")
    assert lines[-2].endswith("2 topics found")  # after smolagents' live display of the stream
    counts = ast.literal_eval(lines[-1])
    assert (counts["logical"], counts["claimed"], counts["direct"]) == (3, 2, 1)


def test_openai_agents_example() -> None:
    lines = run_example("openai_agents_agent.py")
    assert json.loads(lines[0]) == {"value": 2, "stdout": ""}
    status, counts = lines[1].split(" ", 1)
    assert status == "ok"
    assert ast.literal_eval(counts) | {"physical": 0} == {
        "logical": 3,
        "physical": 0,
        "claimed": 2,
        "direct": 1,
        "shared": 0,
        "cancelled": 0,
        "late": 0,
        "orphaned": 0,
        "discarded": 0,
        "early_writes": 0,
        "host_shared": 0,
    }
    assert lines[2] == "Found two pages of results."


def test_mcp_example() -> None:
    """A real MCP stdio server's tools on a Host: the confirmed search claimed twice, the
    save (a write) run by the program."""
    status, value, counts = run_example("mcp_tools.py")[0].split(" ", 2)
    assert (status, value) == ("ok", "2")
    assert ast.literal_eval(counts) | {"physical": 0} == {
        "logical": 3,
        "physical": 0,
        "claimed": 2,
        "direct": 1,
        "shared": 0,
        "cancelled": 0,
        "late": 0,
        "orphaned": 0,
        "discarded": 0,
        "early_writes": 0,
        "host_shared": 0,
    }
