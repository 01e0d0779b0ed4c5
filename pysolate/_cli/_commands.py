"""``pysolate run``, ``replay`` and ``record``: a stream from a file, a recording or a live
source, run through ``Host.run_stream`` and reported.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import anyio
from rich.console import Console

from ..streams import Code, ToolCallCode, format_from_json, play, record, replay, source_to_stream
from ._errors import CliError, CommandFailed
from ._inputs import check_recording, command_output, load_host, read_fd, read_text
from ._measure import Measured, measure_stream
from ._output import print_json, print_table, run_json, write_timeline


def _code_for(args: argparse.Namespace, guess: Code) -> Code:
    return ToolCallCode(args.tool) if args.tool else "markdown" if args.markdown else guess


def _finish(args: argparse.Namespace, console: Console, m: Measured, title: str) -> int:
    write_timeline(args.timeline, m, title)
    if args.json:
        print_json(run_json(m))
    else:
        print_table(console, title, ["Pysolate"], [m])
    return 0


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    source = read_text(args.file)
    code = _code_for(args, "markdown" if Path(args.file).suffix in (".md", ".markdown") else "raw")
    host = load_host(args.tools)
    chunks = source_to_stream(source, tokens_per_second=args.rate)
    m = anyio.run(lambda: measure_stream(host, play(chunks), code=code))
    return _finish(args, console, m, f"pysolate run {args.file}")


def cmd_replay(args: argparse.Namespace, console: Console) -> int:
    metadata = check_recording(args.recording)
    code = _code_for(args, format_from_json(metadata.get("code", "raw")))
    host = load_host(args.tools)
    speed = None if args.instant else args.speed
    m = anyio.run(lambda: measure_stream(host, replay(args.recording, speed=speed), code=code))
    return _finish(args, console, m, f"pysolate replay {args.recording}")


def cmd_record(args: argparse.Namespace, console: Console) -> int:
    command = args.command
    if command and shutil.which(command[0]) is None:
        raise CliError(f"command not found: {command[0]}")
    try:
        open(args.out, "w").close()  # fail now, not once the stream has started
    except OSError as exc:
        raise CliError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    code = _code_for(args, "raw")
    metadata = {"command": command} if command else {}
    host = None if args.no_run else load_host(args.tools)
    source = command_output(command) if command else read_fd(sys.stdin.fileno())

    async def go() -> Measured | None:
        recorded = record(source, args.out, code=code, metadata=metadata)
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
