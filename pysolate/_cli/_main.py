"""The command line itself: the argument parser, and ``main``, which maps every failure to an exit status."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from .._exceptions import IsolationUnavailable
from ._commands import cmd_record, cmd_replay, cmd_run
from ._demo_command import DEMO_RATE, cmd_demo
from ._errors import CliError
from ._guests import GuestsUnavailable
from ._inputs import positive


def _version() -> str:
    """The installed distribution's version (what ``pip`` installed, from pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pysolate")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pysolate",
        description="Run LLM-written Python while it streams; safe tool calls start early.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
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
                "--tool",
                metavar="NAME",
                help="the stream is the JSON arguments of tool NAME: run its 'code'",
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
        type=positive,
        default=1.0,
        help="replay speed factor (default 1: about 50 tokens/s)",
    )
    demo.add_argument(
        "--guests",
        choices=("local", "ray"),
        default="local",
        help="where Guests run: this machine (default), or Ray node agents (pysolate[ray])",
    )
    demo.add_argument(
        "--git",
        nargs="?",
        const="",
        metavar="DIR",
        help="run on a git repository the demo creates (at DIR, default a temporary one); "
        "Pysolate's changes become a commit there (pysolate[git])",
    )
    demo.add_argument(
        "--regenerate",
        action="store_true",
        help="rewrite the bundled recording from agent_reply.md and exit",
    )
    common(demo, tools=False, markdown=False)
    demo.set_defaults(handler=cmd_demo)

    run = sub.add_parser("run", help="stream a source (or .md) file at a token rate and run it")
    run.add_argument("file")
    run.add_argument(
        "--rate",
        type=positive,
        default=DEMO_RATE,
        metavar="TOKENS_PER_S",
        help="tokens per second (default 50)",
    )
    common(run)
    run.set_defaults(handler=cmd_run)

    rep = sub.add_parser("replay", help="run a recorded stream (JSONL)")
    rep.add_argument("recording")
    rep.add_argument(
        "--speed", type=positive, default=1.0, help="replay speed factor (default 1: as recorded)"
    )
    rep.add_argument("--instant", action="store_true", help="replay without waiting between chunks")
    common(rep)
    rep.set_defaults(handler=cmd_replay)

    rec = sub.add_parser(
        "record",
        help="record stdin (or `-- command args` output) while running it",
        usage="pysolate record [options] OUT.jsonl [-- command [args ...]]",
    )
    rec.add_argument("out", metavar="OUT.jsonl")
    rec.add_argument("--no-run", action="store_true", help="only record, do not run")
    common(rec)
    rec.set_defaults(handler=cmd_record)
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
    console.soft_wrap = (
        not console.is_terminal
    )  # a pipe or a file gets whole lines, not 80-column breaks
    try:
        return int(args.handler(args, console))
    except (CliError, GuestsUnavailable, IsolationUnavailable) as exc:
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
