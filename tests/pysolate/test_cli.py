"""The ``pysolate`` command, run as users run it: in a subprocess.

Each run replays fast (``--speed 50``, ``--rate 1000``, ``--instant``) so the file stays a
few seconds per command; assertions are on outputs, counts and files, never on times.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_timeline import _shapes  # the label-box measure of the timeline's own tests

from pysolate import RunResult, RunStatus
from pysolate._cli import DEMO_RATE, DEMO_RECORDING, DEMO_REPLY, main
from pysolate.streams import read_recording, source_to_stream
from pysolate.testing import differences

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"

PROGRAM = 'a = docs.search("retry")\nb = people.lookup_owner("cache")\nprint(a, b)\nb\n'


def pysolate(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pysolate", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``main(args)`` in this process, for error cases that stop before any run starts."""
    status = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["pysolate", *args], status, out.out, out.err)


def assert_usage_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2, exactly one line on stderr naming the problem, no traceback."""
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("pysolate: error: ")
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in lines[0]


def lanes(svg_path: Path) -> set[str]:
    root = ET.parse(svg_path).getroot()
    assert root.tag == f"{SVG}svg"
    return {g.get("id", "") for g in root.iter(f"{SVG}g")}


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "agent.py"
    path.write_text(PROGRAM)
    return path


# -- demo ------------------------------------------------------------------------------------


def test_demo_json_reports_equal_results_and_writes_the_timeline(tmp_path: Path) -> None:
    """The demo's two runs agree on everything the contract fixes; Pysolate claimed early work."""
    svg = tmp_path / "demo.svg"
    done = pysolate("demo", "--speed", "50", "--json", "--timeline", str(svg))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["equal"] is True and out["differences"] == []
    base, fast = out["baseline"], out["pysolate"]
    for run in (base, fast):
        assert run["result"]["status"] == "ok"
        assert run["result"]["value"] == 10
        assert run["result"]["stdout"] == "wrote standup.md with 10 lines\n"
        assert set(run["timings"]) == {"wall_seconds", "stream_seconds", "after_stream_seconds"}
    assert base["result"]["report"]["claimed"] == 0
    assert fast["result"]["report"]["claimed"] > 0
    assert fast["result"]["report"]["logical"] == base["result"]["report"]["logical"] == 15
    assert out["speedup"] == pytest.approx(
        base["timings"]["wall_seconds"] / fast["timings"]["wall_seconds"], rel=0.01
    )
    assert {"lane-stream", "lane-speculative", "lane-guest", "lane-claims"} <= lanes(svg)
    texts, drawn, _ = _shapes(svg.read_text())
    story = re.compile(r"\d+\.\d s → \d+\.\d s, \d+\.\d\u00d7 (faster|slower), results identical")
    assert any(
        story.fullmatch(label) for label, _ in texts
    )  # the headline, e.g. 10.5 s → 7.0 s, ...
    for label, box in texts:  # the real run's picture: no label on a bar or a line
        assert not [kind for kind, shape in drawn if box.overlaps(shape)], label


def test_demo_prints_both_runs_side_by_side() -> None:
    done = pysolate("demo", "--speed", "50")
    assert done.returncode == 0, done.stderr
    for text in (
        "Stream, then run",
        "Pysolate",
        "speed-up",
        "Results equal",
        "claimed",
        "orphaned",
        "time saved",
        "isolation",
    ):
        assert text in done.stdout
    assert any(level in done.stdout for level in ("namespaces", "landlock"))  # the default's floor
    progress = [line for line in done.stdout.splitlines() if "tokens" in line and "early" in line]
    assert [line.split()[0] for line in progress] == ["stream,", "pysolate"], "where each run ended"
    assert "early  0/0" in progress[0] and "early  0/0" not in progress[1]


def test_bundled_recording_is_the_reply_at_50_tokens_per_second() -> None:
    """``demo --regenerate`` would write exactly the shipped file (it is not stale)."""
    recording = read_recording(DEMO_RECORDING)
    assert recording.text == DEMO_REPLY.read_text()
    assert recording.chunks == tuple(source_to_stream(recording.text, tokens_per_second=DEMO_RATE))
    assert recording.metadata["code"] == "markdown"


# -- run, replay, record ---------------------------------------------------------------------


def test_run_json_carries_the_result_and_timings(program: Path, tmp_path: Path) -> None:
    svg = tmp_path / "run.svg"
    done = pysolate("run", str(program), "--rate", "1000", "--json", "--timeline", str(svg))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["result"]["status"] == "ok"
    assert out["result"]["value"] == "bob"
    assert [c["method"] for c in out["result"]["calls"]] == ["search", "lookup_owner"]
    assert out["timings"]["wall_seconds"] >= out["timings"]["stream_seconds"]
    assert "lane-claims" in lanes(svg)


def test_run_prints_outcome_and_report_table(program: Path) -> None:
    done = pysolate("run", str(program), "--rate", "1000")
    assert done.returncode == 0, done.stderr
    for text in ("status", "ok", "'bob'", "logical", "physical", "claimed", "late"):
        assert text in done.stdout


@pytest.mark.parametrize(("name", "flags"), [("reply.txt", ["--markdown"]), ("reply.md", [])])
def test_run_markdown_takes_the_python_block(tmp_path: Path, name: str, flags: list[str]) -> None:
    """``--markdown``, or a ``.md`` file, runs the reply's first Python block."""
    reply = tmp_path / name
    reply.write_text(f"Sure.\n```python\n{PROGRAM}```\nDone.\n")
    done = pysolate("run", str(reply), *flags, "--rate", "1000", "--json")
    assert json.loads(done.stdout)["result"]["value"] == "bob"


def test_run_with_a_user_tools_module(tmp_path: Path) -> None:
    """``--tools`` takes a module name (found next to the user) and calls its make_host()."""
    (tmp_path / "mytools.py").write_text(
        "from pysolate import Effect, Host, capability\n"
        "class Greeter:\n"
        "    @capability(effect=Effect.PURE, version='1')\n"
        "    def hello(self, name: str) -> str:\n"
        "        return 'hello ' + name\n"
        "def make_host():\n"
        "    host = Host()\n"
        "    host.register('greeter', Greeter())\n"
        "    return host\n"
    )
    (tmp_path / "prog.py").write_text("greeter.hello('ada')\n")
    done = pysolate(
        "run", "prog.py", "--tools", "mytools", "--rate", "1000", "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["value"] == "hello ada"


def test_replay_reads_markdown_mode_from_the_recording() -> None:
    done = pysolate("replay", str(DEMO_RECORDING), "--instant", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    assert (result["status"], result["value"]) == ("ok", 10)


def test_record_from_stdin_records_and_runs(tmp_path: Path) -> None:
    out = tmp_path / "rec.jsonl"
    done = pysolate("record", str(out), "--json", stdin=PROGRAM)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["value"] == "bob"
    assert read_recording(out).text == PROGRAM


def test_record_captures_a_commands_stdout_as_it_streams(tmp_path: Path) -> None:
    out = tmp_path / "rec.jsonl"
    script = "import time\nfor line in ['x = 1\\n', 'x + 1\\n']:\n    print(line, end='', flush=True)\n    time.sleep(0.2)\n"
    done = pysolate("record", str(out), "--no-run", "--", sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    recording = read_recording(out)
    assert recording.text == "x = 1\nx + 1\n"
    assert len(recording.chunks) == 2  # one chunk per flush: the stream kept its shape
    assert recording.metadata["command"][0] == sys.executable


def test_record_reports_a_failing_command(tmp_path: Path) -> None:
    done = pysolate(
        "record",
        str(tmp_path / "r.jsonl"),
        "--no-run",
        "--",
        sys.executable,
        "-c",
        "raise SystemExit(3)",
    )
    assert_usage_error(done, "status 3")


def test_python_dash_m_and_the_console_script_both_answer_help() -> None:
    script = Path(sys.executable).with_name("pysolate")
    runs = [pysolate("--help")]
    if script.exists():  # the console script of an installed (or editable) copy
        runs.append(
            subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
        )
    for done in runs:
        assert done.returncode == 0, done.stderr
        for command in ("demo", "run", "replay", "record"):
            assert command in done.stdout


_DEMO_AS_FROM_A_TERMINAL = """
import asyncio, runpy, signal, sys

def tasks(signum, frame):
    print("SIGINT handler", signal.getsignal(signal.SIGINT), file=sys.stderr)
    with open("/proc/self/status") as status:
        print(*(line.strip() for line in status if line.startswith(("SigBlk", "SigIgn", "SigCgt", "SigPnd", "ShdPnd"))), file=sys.stderr)
    loop = asyncio._get_running_loop()
    for task in asyncio.all_tasks(loop) if loop is not None else ():
        print("task", task.get_name(), "cancelling", task.cancelling(), file=sys.stderr)
        awaited = task.get_coro()  # the chain of awaits, innermost last
        while awaited is not None:
            at = getattr(awaited, "cr_frame", None) or getattr(awaited, "ag_frame", None) or getattr(awaited, "gi_frame", None)
            if at is not None:
                print("  ", at.f_code.co_filename, at.f_lineno, at.f_code.co_name, file=sys.stderr)
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "ag_await", None) or getattr(awaited, "gi_yieldfrom", None)
    sys.stderr.flush()

signal.signal(signal.SIGUSR2, tasks)
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.argv[0] = "pysolate"
runpy.run_module("pysolate", run_name="__main__", alter_sys=True)
"""
"""``python -m pysolate`` as a terminal starts it: with Python's own SIGINT handler even
when the test runner ignores SIGINT (a background job of a non-interactive shell does, and
the child would inherit that: its Ctrl-C would then do nothing), and printing its signal
state and asyncio tasks on SIGUSR2."""


def test_ctrl_c_stops_the_run_and_exits_130() -> None:
    """SIGINT mid-stream: the run is cancelled (not left streaming), one line, status 130."""
    slow = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "faulthandler",
            "-c",
            _DEMO_AS_FROM_A_TERMINAL,
            "demo",
            "--speed",
            "0.05",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert slow.stdout is not None
        assert slow.stdout.readline().startswith("Replaying")  # running; its stream takes 145 s
        slow.send_signal(signal.SIGINT)
        try:
            out, err = slow.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            # Say where it hangs: its signal state and every asyncio task's stack, then
            # every thread's (faulthandler on SIGABRT).
            slow.send_signal(signal.SIGUSR2)
            time.sleep(1.0)
            slow.send_signal(signal.SIGABRT)
            _, err = slow.communicate(timeout=30)
            pytest.fail(f"no exit 30 s after SIGINT; the stacks:\n{err[-12000:]}")
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert slow.returncode == 130
    assert err.strip() == "pysolate: interrupted"
    assert "Results" not in out


# -- clear errors ----------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    assert_usage_error(pysolate("run", str(tmp_path / "nope.py")), "no such file", "nope.py")
    assert_usage_error(pysolate("replay", str(tmp_path / "nope.jsonl")), "no such file")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not json\n", ":1: bad header"),
        ('{"format": "pysolate-stream", "version": 1}\n{"t": "soon"}\n', ":2: bad chunk"),
        ("", "empty file"),
    ],
)
def test_bad_recording(
    tmp_path: Path, content: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    assert_usage_error(in_process(capsys, "replay", str(path)), "bad recording", needle)


@pytest.mark.parametrize(
    ("module", "needle"),
    [
        ("raise RuntimeError('broken import')\n", "RuntimeError: broken import"),
        ("x = 1\n", "has no make_host()"),
        ("def make_host():\n    return 42\n", "returned int, not a pysolate.Host"),
        ("def make_host():\n    raise ValueError('no config')\n", "ValueError: no config"),
    ],
)
def test_bad_tools_module(
    program: Path, tmp_path: Path, module: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "badtools.py"
    tools.write_text(module)
    assert_usage_error(in_process(capsys, "run", str(program), "--tools", str(tools)), needle)


def test_bad_recording_and_tools_through_the_console_script(program: Path, tmp_path: Path) -> None:
    """The same one-line errors from the installed script (the cases above run in-process)."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert_usage_error(pysolate("replay", str(bad)), "bad recording", ":1: bad header")
    tools = tmp_path / "badtools.py"
    tools.write_text("raise RuntimeError('broken import')\n")
    assert_usage_error(
        pysolate("run", str(program), "--tools", str(tools)), "RuntimeError: broken import"
    )


def test_tools_module_that_does_not_exist(program: Path) -> None:
    assert_usage_error(
        pysolate("run", str(program), "--tools", "no_such_tools_module"), "ModuleNotFoundError"
    )


def test_command_after_dashes_only_for_record(program: Path) -> None:
    done = pysolate("run", str(program), "--", "ls")
    assert done.returncode == 2


# -- examples --------------------------------------------------------------------------------


def test_quickstart_example_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr  # it leaves nothing open
    printed, report = done.stdout.splitlines()
    assert printed == "sunny in Oslo sunny in Rome"
    assert report.startswith("ok ") and "'claimed': 2" in report


# -- the demo's equality check ---------------------------------------------------------------


def test_differences_names_what_the_contract_fixes() -> None:
    a = RunResult(status=RunStatus.OK, value=1, stdout="x\n")
    assert differences(a, RunResult(status=RunStatus.OK, value=1, stdout="x\n")) == []
    assert differences(a, RunResult(status=RunStatus.OK, value=True, stdout="y\n")) == [
        "value",
        "stdout",
    ]


def test_quickstart_doc_shows_the_example_file() -> None:
    """docs/quickstart.md's snippet is examples/quickstart.py (without its docstring), so the
    doc is the code the test above runs."""
    doc = (ROOT / "docs" / "quickstart.md").read_text()
    snippet = doc.split("```python\n", 1)[1].split("\n```\n", 1)[0]
    example = (ROOT / "examples" / "quickstart.py").read_text()
    assert example.split('"""\n\n', 1)[1].strip() == snippet.strip()
    wrapping = snippet[snippet.index("class Weather") : snippet.index("# A stand-in")]
    assert len([line for line in wrapping.splitlines() if line.strip()]) <= 15


def test_version_prints_the_installed_distributions_version() -> None:
    from importlib.metadata import version

    done = pysolate("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"pysolate {version('pysolate')}"
