"""Where the CLI's streams and tools come from: files, recordings, stdin, a command's stdout, a
tools module. Every user mistake here is a ``CliError`` with one line that says what to fix.
"""

from __future__ import annotations

import argparse
import codecs
import importlib
import importlib.util
import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import anyio.to_thread

from .._run._host import Host
from ..streams import RecordingError, read_recording
from ._errors import CliError, CommandFailed

READ_SIZE = 4096
"""Bytes read from stdin or a command's stdout at a time (a read returns what has arrived)."""


async def read_fd(fd: int) -> AsyncIterator[str]:
    """Text from a file descriptor as it arrives (stdin of a live pipe, say)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while data := await anyio.to_thread.run_sync(os.read, fd, READ_SIZE, abandon_on_cancel=True):
        if text := decoder.decode(data):
            yield text
    if tail := decoder.decode(b"", final=True):
        yield tail


async def command_output(command: Sequence[str]) -> AsyncIterator[str]:
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
        async for text in read_fd(process.stdout.fileno()):
            yield text
        status = await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    if status != 0:
        raise CommandFailed(f"{command[0]} exited with status {status}")


def read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise CliError(f"is a directory, not a file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None


def check_recording(path: str) -> dict[str, object]:
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
        from .._demo import tools as demo_tools

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


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value
