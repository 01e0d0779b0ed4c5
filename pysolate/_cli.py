"""The ``pysolate`` command: the demo, and running, replaying and recording streams.

Every command ends in the same place: a token stream goes through ``Host.run_stream``
against a Host's tools, and the outcome and the report are printed (a rich table, or JSON
with ``--json``). The commands differ only in where the stream comes from:

- ``demo``: the bundled recorded reply, also run the slow way (stream, then
  ``run_source(speculate=False)``) to show both times and that the results are equal;
- ``run FILE``: a source or markdown file cut into model-sized tokens at a rate;
- ``replay RECORDING``: a recorded stream (``pysolate.streams`` JSONL);
- ``record OUT``: stdin or a command's stdout, recorded while it streams and runs.

User mistakes (a missing file, a bad recording, a tools module that does not import or
has no ``make_host``) exit with status 2 and one line on stderr, never a traceback: they
are raised as ``CliError`` and reported by ``main``.
"""

from __future__ import annotations

import argparse
import codecs
import importlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import anyio.to_thread
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from occurrences import FenceExtractor

from ._equivalence import differences
from ._host import Host
from ._progress import Progress, ProgressInstrument, counted
from ._result import RunResult
from ._timeline import Comparison, render_svg
from .streams import (
    RecordingError,
    play,
    read_recording,
    record,
    replay,
    source_to_stream,
    write_recording,
)

DEMO_DIR = Path(__file__).parent / "_demo"
DEMO_REPLY = DEMO_DIR / "agent_reply.md"
DEMO_RECORDING = DEMO_DIR / "agent_reply.jsonl"
DEMO_RATE = 50.0
"""Tokens per second of the bundled recording: a typical streaming rate of today's models."""

READ_SIZE = 4096
"""Bytes read from stdin or a command's stdout at a time (a read returns what has arrived)."""

Code = Literal["raw", "markdown"]


class CliError(Exception):
    """A user mistake the CLI reports in one line, exiting with status 2."""


@dataclass(slots=True)
class _Clock:
    """When a stream started and ended (``anyio.current_time``); ``ended`` None while open."""

    started: float
    ended: float | None = None


@dataclass(frozen=True, slots=True)
class Measured:
    """A run's result and the CLI's own timings of it."""

    result: RunResult
    wall_seconds: float
    stream_seconds: float

    @property
    def after_stream_seconds(self) -> float:
        """From the last chunk to the result: what the user waits for once the model is done."""
        return max(0.0, self.wall_seconds - self.stream_seconds)

    def timings(self) -> dict[str, float]:
        return {
            "wall_seconds": round(self.wall_seconds, 6),
            "stream_seconds": round(self.stream_seconds, 6),
            "after_stream_seconds": round(self.after_stream_seconds, 6),
        }


# -- streams -------------------------------------------------------------------------------


async def _timed(chunks: AsyncIterable[str], clock: _Clock) -> AsyncIterator[str]:
    async for chunk in chunks:
        yield chunk
    clock.ended = anyio.current_time()


async def measure_stream(host: Host, chunks: AsyncIterable[str], *, code: Code) -> Measured:
    """Run ``chunks`` through ``host.run_stream`` and time it.

    Cancellation propagates (``run_stream`` stops early work and the Guest first).
    """
    clock = _Clock(anyio.current_time())
    result = await host.run_stream(_timed(chunks, clock), code=code)
    end = anyio.current_time()
    stream_end = clock.ended if clock.ended is not None else end
    return Measured(result, end - clock.started, stream_end - clock.started)


async def measure_baseline(host: Host, chunks: AsyncIterable[str], *, code: Code) -> Measured:
    """The way without Pysolate: wait for the whole stream, then run the code sequentially.

    Cancellation propagates (``run_source`` stops the Guest first).
    """
    start = anyio.current_time()
    extractor = FenceExtractor(code)
    parts = [extractor.feed(chunk) async for chunk in chunks]
    parts.append(extractor.close())
    streamed = anyio.current_time()
    result = await host.run_source("".join(parts), speculate=False)
    end = anyio.current_time()
    return Measured(result, end - start, streamed - start)


async def _read_fd(fd: int) -> AsyncIterator[str]:
    """Text from a file descriptor as it arrives (stdin of a live pipe, say)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while data := await anyio.to_thread.run_sync(os.read, fd, READ_SIZE, abandon_on_cancel=True):
        if text := decoder.decode(data):
            yield text
    if tail := decoder.decode(b"", final=True):
        yield tail


class CommandFailed(Exception):
    """The command whose output was the stream exited with a non-zero status (the run is aborted)."""


async def _command_output(command: Sequence[str]) -> AsyncIterator[str]:
    """A command's stdout as it streams; its stderr goes to ours.

    Raises ``CliError`` when the command cannot be started, ``CommandFailed`` (from the
    iterator, after the last chunk, so the run ends ``aborted``) when it exits non-zero.
    Closing the iterator early, or cancelling it, kills the command.

    A plain ``Popen`` read by a worker thread, as stdin is, rather than
    ``anyio.open_process``: nothing of it is bound to the event loop, so an aborted run
    leaves no loop-owned transport to be collected after the loop closed.
    """
    try:
        process = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    except OSError as exc:
        raise CliError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
    assert process.stdout is not None
    try:
        async for text in _read_fd(process.stdout.fileno()):
            yield text
        status = await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    if status != 0:
        raise CommandFailed(f"{command[0]} exited with status {status}")


# -- inputs --------------------------------------------------------------------------------


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise CliError(f"is a directory, not a file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None


def _check_recording(path: str) -> dict[str, object]:
    """Validate a recording up front (so a bad one fails before anything runs); its metadata."""
    if not Path(path).exists():
        raise CliError(f"no such file: {path}")
    try:
        return dict(read_recording(path).metadata)
    except RecordingError as exc:
        raise CliError(f"bad recording {exc}") from None


def load_host(tools: str | None) -> Host:
    """The Host of ``--tools`` (a module name or a ``.py`` path with ``make_host() -> Host``),
    or the demo's tools.

    Raises ``CliError`` when the module does not import, has no callable ``make_host``, or
    ``make_host()`` fails or returns something other than a ``Host``.
    """
    if tools is None:
        from ._demo import tools as demo_tools

        return demo_tools.make_host()
    try:
        module = _import_tools(tools)
    except CliError:
        raise
    except Exception as exc:
        raise CliError(
            f"cannot import tools module {tools!r}: {type(exc).__name__}: {exc}"
        ) from None
    make_host: object = getattr(module, "make_host", None)
    if not callable(make_host):
        raise CliError(f"tools module {tools!r} has no make_host() function")
    try:
        host = make_host()
    except Exception as exc:
        raise CliError(f"{tools}.make_host() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(host, Host):
        raise CliError(f"{tools}.make_host() returned {type(host).__name__}, not a pysolate.Host")
    return host


def _import_tools(tools: str) -> object:
    if tools.endswith(".py") or os.sep in tools:
        path = Path(tools)
        if not path.is_file():
            raise CliError(f"no such tools file: {tools}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise CliError(f"cannot import tools file {tools}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as ``python -m``: modules next to the user first
    return importlib.import_module(tools)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


# -- output --------------------------------------------------------------------------------

_REPORT_ROWS = (
    "logical",
    "physical",
    "claimed",
    "direct",
    "shared",
    "cancelled",
    "late",
    "orphaned",
)


def _outcome_rows(result: RunResult) -> list[tuple[str, str]]:
    return [
        ("status", result.status.value),
        ("value", repr(result.value)),
        ("stdout", result.stdout.rstrip("\n")),
        ("error", _error_text(result)),
    ]


def _error_text(result: RunResult) -> str:
    error = result.error
    if error is None:
        return ""
    where = f" (line {error.line})" if error.line is not None else ""
    return f"{error.type}: {error.message}{where}"


def _report_rows(m: Measured) -> list[tuple[str, str]]:
    report = m.result.report
    rows = [
        ("wall s", f"{m.wall_seconds:.2f}"),
        ("stream s", f"{m.stream_seconds:.2f}"),
        ("after last token s", f"{m.after_stream_seconds:.2f}"),
    ]
    rows += [(name, str(getattr(report, name))) for name in _REPORT_ROWS]
    rows.append(("time saved s", f"{report.time_saved:.2f}"))
    return rows


def _table(title: str, columns: Sequence[str], runs: Sequence[Measured]) -> Table:
    """Outcome rows, a rule, then report rows; one column per run."""
    table = Table(title=title, title_justify="left")
    table.add_column("")
    for name in columns:
        table.add_column(name, overflow="fold")
    for section in ([_outcome_rows(m.result) for m in runs], [_report_rows(m) for m in runs]):
        last = len(section[0]) - 1
        for i, (label, _) in enumerate(section[0]):
            table.add_row(label, *(rows[i][1] for rows in section), end_section=i == last)
    return table


def _write_timeline(path: str | None, m: Measured, title: str, baseline: Measured | None = None) -> None:
    if path is None:
        return
    timeline = m.result.timeline
    if timeline is None:
        raise CliError("this run has no timeline")
    compare = None if baseline is None else Comparison(baseline.stream_seconds, baseline.wall_seconds)
    try:
        Path(path).write_text(render_svg(timeline, title=title, compare=compare), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write timeline {path}: {exc.strerror or exc}") from None


def _run_json(m: Measured) -> dict[str, object]:
    return {"result": m.result.to_json(), "timings": m.timings()}


def _print_json(payload: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


# -- commands ------------------------------------------------------------------------------


def regenerate_demo_recording() -> Path:
    """Write the demo's recording from its markdown reply at ``DEMO_RATE`` (deterministic)."""
    reply = DEMO_REPLY.read_text(encoding="utf-8")
    metadata = {
        "source": DEMO_REPLY.name,
        "tokens_per_second": DEMO_RATE,
        "seed": 0,
        "code": "markdown",
    }
    write_recording(
        DEMO_RECORDING, source_to_stream(reply, tokens_per_second=DEMO_RATE), metadata=metadata
    )
    return DEMO_RECORDING


def _cmd_demo(args: argparse.Namespace, console: Console) -> int:
    if args.regenerate:
        path = regenerate_demo_recording()
        console.print(f"wrote {path}")
        return 0
    _check_recording(str(DEMO_RECORDING))

    progress = (Progress("stream, then run"), Progress("pysolate"))

    async def both() -> tuple[Measured, Measured]:
        # One after the other, never overlapping, so neither run slows the other.
        runs = []
        for watch, measure in zip(progress, (measure_baseline, measure_stream), strict=True):
            host = load_host(None)
            host.instrument = ProgressInstrument(host.instrument, watch)
            chunks = counted(replay(DEMO_RECORDING, speed=args.speed), watch)
            runs.append(await measure(host, chunks, code="markdown"))
        return runs[0], runs[1]

    if args.json:
        baseline, fast = anyio.run(both)
    else:
        console.print(
            f"Replaying the bundled agent reply at {DEMO_RATE * args.speed:g} tokens/s, "
            "first the usual way (stream, then run), then with Pysolate..."
        )
        if console.is_terminal:
            with Live(get_renderable=lambda: Group(*(p.render() for p in progress)), console=console, refresh_per_second=10):
                baseline, fast = anyio.run(both)
        else:  # a pipe or a file: no redrawing, just where each run ended
            baseline, fast = anyio.run(both)
            console.print(Group(*(p.render() for p in progress)))
    differ = differences(baseline.result, fast.result)
    speedup = baseline.wall_seconds / fast.wall_seconds if fast.wall_seconds > 0 else math.inf
    _write_timeline(args.timeline, fast, "pysolate demo", baseline)
    if args.json:
        _print_json(
            {
                "baseline": _run_json(baseline),
                "pysolate": _run_json(fast),
                "speedup": round(speedup, 3),
                "equal": not differ,
                "differences": differ,
            }
        )
        return 0
    console.print(
        _table("Stream, then run  vs  Pysolate", ["Stream, then run", "Pysolate"], [baseline, fast])
    )
    console.print(
        f"Stream, then run: [bold]{baseline.wall_seconds:.2f} s[/]   "
        f"Pysolate: [bold]{fast.wall_seconds:.2f} s[/]   speed-up: [bold]{speedup:.2f}x[/]"
    )
    if differ:
        console.print(f"[bold red]Results differ[/] in: {', '.join(differ)}")
    else:
        console.print(
            "[bold green]Results equal[/] (status, value, stdout, error, call log, workspace changes)"
        )
    return 0


def _code_for(args: argparse.Namespace, guess: Code) -> Code:
    return "markdown" if args.markdown else guess


def _finish(args: argparse.Namespace, console: Console, m: Measured, title: str) -> int:
    _write_timeline(args.timeline, m, title)
    if args.json:
        _print_json(_run_json(m))
    else:
        console.print(_table(title, ["Pysolate"], [m]))
    return 0


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    source = _read_text(args.file)
    code = _code_for(args, "markdown" if Path(args.file).suffix in (".md", ".markdown") else "raw")
    host = load_host(args.tools)
    chunks = source_to_stream(source, tokens_per_second=args.rate)
    m = anyio.run(lambda: measure_stream(host, play(chunks), code=code))
    return _finish(args, console, m, f"pysolate run {args.file}")


def _cmd_replay(args: argparse.Namespace, console: Console) -> int:
    metadata = _check_recording(args.recording)
    code = _code_for(args, "markdown" if metadata.get("code") == "markdown" else "raw")
    host = load_host(args.tools)
    speed = None if args.instant else args.speed
    m = anyio.run(lambda: measure_stream(host, replay(args.recording, speed=speed), code=code))
    return _finish(args, console, m, f"pysolate replay {args.recording}")


def _cmd_record(args: argparse.Namespace, console: Console) -> int:
    command = args.command
    if command and shutil.which(command[0]) is None:
        raise CliError(f"command not found: {command[0]}")
    try:
        open(args.out, "w").close()  # fail now, not once the stream has started
    except OSError as exc:
        raise CliError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    code: Code = "markdown" if args.markdown else "raw"
    metadata = {"code": code, **({"command": command} if command else {})}
    host = None if args.no_run else load_host(args.tools)
    source = _command_output(command) if command else _read_fd(sys.stdin.fileno())

    async def go() -> Measured | None:
        recorded = record(source, args.out, metadata=metadata)
        if host is None:
            async for _ in recorded:
                pass
            return None
        return await measure_stream(host, recorded, code=code)

    try:
        m = anyio.run(go)
    except CommandFailed as exc:
        raise CliError(f"{exc} (recorded what it wrote to {args.out})") from None
    if m is None:
        if not args.json:
            console.print(f"recorded {args.out}")
        return 0
    return _finish(args, console, m, f"pysolate record {args.out}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pysolate",
        description="Run LLM-written Python while it streams; safe tool calls start early.",
    )
    sub = parser.add_subparsers(dest="command_name", required=True, metavar="COMMAND")

    def common(p: argparse.ArgumentParser, *, tools: bool = True, markdown: bool = True) -> None:
        if tools:
            p.add_argument(
                "--tools",
                metavar="MODULE",
                help="module or .py file with make_host() -> Host (default: the demo's tools)",
            )
        if markdown:
            p.add_argument(
                "--markdown",
                action="store_true",
                help="the stream is a markdown reply: run its first ```python block",
            )
        p.add_argument(
            "--timeline",
            metavar="OUT.svg",
            help="write a picture of the run (lanes: stream, speculative, guest, claims)",
        )
        p.add_argument(
            "--json", action="store_true", help="print machine-readable JSON instead of tables"
        )

    demo = sub.add_parser("demo", help="the bundled agent reply: stream-then-run vs Pysolate")
    demo.add_argument(
        "--speed",
        type=_positive,
        default=1.0,
        help="replay speed factor (default 1: about 50 tokens/s)",
    )
    demo.add_argument(
        "--regenerate",
        action="store_true",
        help="rewrite the bundled recording from agent_reply.md and exit",
    )
    common(demo, tools=False, markdown=False)
    demo.set_defaults(handler=_cmd_demo)

    run = sub.add_parser("run", help="stream a source (or .md) file at a token rate and run it")
    run.add_argument("file")
    run.add_argument(
        "--rate",
        type=_positive,
        default=DEMO_RATE,
        metavar="TOKENS_PER_S",
        help="tokens per second (default 50)",
    )
    common(run)
    run.set_defaults(handler=_cmd_run)

    rep = sub.add_parser("replay", help="run a recorded stream (JSONL)")
    rep.add_argument("recording")
    rep.add_argument(
        "--speed", type=_positive, default=1.0, help="replay speed factor (default 1: as recorded)"
    )
    rep.add_argument("--instant", action="store_true", help="replay without waiting between chunks")
    common(rep)
    rep.set_defaults(handler=_cmd_replay)

    rec = sub.add_parser(
        "record",
        help="record stdin (or `-- command args` output) while running it",
        usage="pysolate record [options] OUT.jsonl [-- command [args ...]]",
    )
    rec.add_argument("out", metavar="OUT.jsonl")
    rec.add_argument("--no-run", action="store_true", help="only record, do not run")
    common(rec)
    rec.set_defaults(handler=_cmd_record)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: parse ``argv``, run the command, return the exit status.

    0 on success (whatever the program's own status), 2 for a usage error or a
    ``CliError`` (one line on stderr), 1 when stdout is closed early, 130 on Ctrl-C.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after "--" is the recorded command, split off by hand: argparse cannot
    # give a variadic positional after options (its positionals match all at once).
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    if command and args.command_name != "record":
        parser.error("only `pysolate record` takes a command after --")
    args.command = command
    if args.timeline is not None and not Path(args.timeline).resolve().parent.is_dir():
        parser.error(f"--timeline: no directory for {args.timeline}")  # fail before a long run
    console = Console(highlight=False)
    try:
        return int(args.handler(args, console))
    except CliError as exc:
        print(f"pysolate: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pysolate: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``pysolate ... | head``): not an error worth a traceback.
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
