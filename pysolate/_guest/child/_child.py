"""The Guest child: the entry point of the isolated interpreter that runs a sealed program.

Run as ``python -I -S -B -X utf8 .../pysolate/_guest/child/_child.py FD`` with its end of the
broker socket at fd ``FD``. Standard library only, and it never imports the ``pysolate``
or ``occurrences`` packages' ``__init__`` (which pull in pydantic and anyio): it registers
bare package objects for them and imports just ``occurrences.plain`` (the codec),
``pysolate._guest_errors`` (what the program sees) and ``pysolate._guest.child._wire`` (framing).
That keeps start-up at the cost of a bare interpreter.

Life of a child: read ``init`` → confine itself (``_confine.confine``: rlimits, no
privileges, Landlock, seccomp; or exit with ``_confine.EXIT_CODE``) → send ``ready`` →
block until ``run`` → execute the program, one blocking ``call`` frame per capability call →
send ``done`` → wait for the Host to hang up → ``os._exit``. All of this happens before the
program runs or on paths the program cannot skip (``os._exit`` ends the process even
inside ``try/finally``).

A session's child gets ``turn`` instead of ``run``, and after each turn sends ``turn_done``
(its outcome, the turn's stdout, the plain-data globals left: ``_turn_report``) and waits
for the next ``turn`` in the same globals, until the Host hangs up. A turn's stdout is
captured in the child (``sys.stdout`` is a bounded buffer), so it arrives with its
``turn_done`` instead of racing it on the pipe. A limit (memory, output) ends the process
after ``turn_done``: the Host then treats the session as broken.

Nothing here is a security boundary: the program can import ``os`` and write anything to
the channel. The boundary is the process (namespaces, Landlock, seccomp, rlimits, no
privileges) and the Host, which
validates every frame and grants only the declared methods.
"""

from __future__ import annotations

import _thread
import json
import os
import sys
import types
from typing import Any, NoReturn


def _register_packages(root: str) -> None:
    """Make ``pysolate`` and ``occurrences`` importable without running their ``__init__``."""
    for name, path in (
        ("occurrences", os.path.join(root, "occurrences")),
        ("pysolate", os.path.join(root, "pysolate")),
        ("pysolate._guest", os.path.join(root, "pysolate", "_guest")),
        ("pysolate._guest.child", os.path.join(root, "pysolate", "_guest", "child")),
    ):
        module = types.ModuleType(name)
        module.__path__ = [path]
        sys.modules[name] = module


class _Channel:
    """Blocking frame I/O on the broker fd (no ``socket`` import: plain reads and writes)."""

    def __init__(self, fd: int, header: Any, encode: Any) -> None:
        self._fd = fd
        self._header = header
        self._encode = encode

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = os.read(self._fd, n)
            if not chunk:
                os._exit(0)  # the Host hung up: nothing is waiting for us any more
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> dict[str, Any]:
        (length,) = self._header.unpack(self._read_exact(self._header.size))
        message: dict[str, Any] = json.loads(self._read_exact(length))
        return message

    def wait_hang_up(self) -> None:
        """Block until the Host closes its end (whatever it sends meanwhile is dropped)."""
        while os.read(self._fd, 65536):
            pass

    def send_bytes(self, frame: bytes) -> None:
        view = memoryview(frame)
        while view:
            view = view[os.write(self._fd, view) :]

    def encode(self, message: dict[str, object]) -> bytes:
        frame: bytes = self._encode(message)
        return frame


class _Guest:
    """The child's state between ``init`` and ``done``."""

    def __init__(self, channel: _Channel, init: dict[str, Any]) -> None:
        from occurrences import plain
        from pysolate import _guest_errors

        self._channel = channel
        self._plain = plain
        self._errors = _guest_errors
        self._limits: dict[str, Any] = init["limits"]
        self._capabilities: dict[str, list[str]] = init["capabilities"]
        self._calls = 0  # calls sent so far; the Host numbers its replies the same way
        self._lock = _thread.allocate_lock()  # one call in flight, even from program threads

    # -- the program's side of a call -------------------------------------------------------

    def call(
        self, capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        try:
            tagged_args = self._plain.to_tagged(args)
            tagged_kwargs = self._plain.to_tagged(kwargs)
        except self._plain.NotPlain as exc:
            raise self._errors.arguments_not_plain(capability, method, exc) from None
        frame = self._channel.encode(
            {
                "t": "call",
                "capability": capability,
                "method": method,
                "args": tagged_args,
                "kwargs": tagged_kwargs,
            }
        )
        if len(frame) - 4 > self._limits["max_frame_bytes"]:
            self.finish_limit(
                "FrameLimit",
                f"a call to {capability}.{method} exceeds {self._limits['max_frame_bytes']} bytes",
            )
        with self._lock:
            self._calls += 1
            self._channel.send_bytes(frame)
            reply = self._channel.receive()
            if reply.get("id") != self._calls:
                os._exit(70)  # the Host never does this; a confused child must not guess
        if reply["t"] == "result":
            return self._plain.from_tagged(reply["value"])
        args_back = self._plain.from_tagged(reply["args"])
        raise self._errors.rebuild_exception(reply["type"], reply["message"], tuple(args_back))  # type: ignore[arg-type]

    def proxies(self) -> dict[str, object]:
        globals_: dict[str, object] = {}
        for name, methods in self._capabilities.items():
            if name == _FUNCTIONS:
                globals_.update({method: _function(method, self.call) for method in methods})
            else:
                globals_[name] = _proxy(name, methods, self.call)
        return globals_

    def warm(self) -> None:
        """Compile a program like an agent's once, while the model still streams: in a
        freshly forked child the first compile touches memory shared copy-on-write with the
        fork server and cold caches, 0.35-0.45 ms of the path from ``run`` to the first
        call (measured). The code is thrown away, never run; a failure is ignored."""
        try:  # noqa: SIM105 (contextlib would be one more import at start-up)
            self._errors.split_program(_WARM_UP)
        except Exception:
            pass

    # -- running the program ----------------------------------------------------------------

    def execute(self, source: str, proxies: dict[str, object]) -> NoReturn:
        import builtins

        namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": builtins, **proxies}
        errors = self._errors
        try:
            body, final = errors.split_program(source)
            exec(body, namespace)
            value = eval(final, namespace) if final is not None else None
        except MemoryError as exc:
            self.finish(
                "limit",
                None,
                ("MemoryLimit", errors.safe_str(exc) or "out of memory", errors.error_line(exc)),
            )
        except BaseException as exc:
            self.finish(
                "error", None, (type(exc).__name__, errors.safe_str(exc), errors.error_line(exc))
            )
        try:
            tagged = self._plain.to_tagged(value)
        except self._plain.NotPlain:
            tagged = self._plain.to_tagged(self._errors.safe_repr(value))
        self.finish("ok", tagged, None)

    # -- a session: turns in one namespace ----------------------------------------------------

    def turns(self, first: dict[str, Any], proxies: dict[str, object]) -> NoReturn:
        import builtins
        import io

        from pysolate._guest.child import _turn_report

        namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": builtins, **proxies}
        sink = _TurnOutput(self)
        out = io.TextIOWrapper(sink, encoding="utf-8", errors="surrogateescape", write_through=True)  # type: ignore[type-var]
        sys.stdout = out
        message = first
        while True:
            if message.get("t") != "turn":
                os._exit(70)  # the Host never does this
            sink.limit = message["output_bytes"]
            status, value, error = self.run_turn(message["source"], namespace)
            try:  # noqa: SIM105 (contextlib would be one more import)
                out.flush()
            except BaseException:
                pass
            known, opaque = _turn_report.reported_globals(namespace, proxies)
            report = {
                "t": "turn_done",
                "status": status,
                "value": value,
                "error": error,
                "stdout": sink.take(),
                "known": {name: self._plain.to_tagged(v) for name, v in known},
                "opaque": opaque,
            }
            frame = self._channel.encode(report)
            if len(frame) - 4 > self._limits["max_frame_bytes"]:
                report["known"], report["opaque"] = {}, [*opaque, *(name for name, _ in known)]
                frame = self._channel.encode(report)
            if len(frame) - 4 > self._limits["max_frame_bytes"]:
                self.finish_limit(
                    "FrameLimit",
                    f"the turn's result exceeds {self._limits['max_frame_bytes']} bytes",
                )
            self._channel.send_bytes(frame)
            if status == "limit":
                os._exit(0)
            message = self._channel.receive()

    def run_turn(
        self, source: str, namespace: dict[str, object]
    ) -> tuple[str, object, dict[str, object] | None]:
        """Run one turn in ``namespace``: (status, tagged value, error); what ran before an
        exception stays in ``namespace``, as in a REPL."""
        errors = self._errors
        try:
            body, final = errors.split_program(source)
            exec(body, namespace)
            value = eval(final, namespace) if final is not None else None
        except MemoryError as exc:
            info = ("MemoryLimit", errors.safe_str(exc) or "out of memory", errors.error_line(exc))
            return "limit", None, {"type": info[0], "message": info[1], "line": info[2]}
        except BaseException as exc:
            return (
                "error",
                None,
                {
                    "type": type(exc).__name__,
                    "message": errors.safe_str(exc),
                    "line": errors.error_line(exc),
                },
            )
        try:
            tagged = self._plain.to_tagged(value)
        except self._plain.NotPlain:
            tagged = self._plain.to_tagged(errors.safe_repr(value))
        return "ok", tagged, None

    def finish_limit(self, type_name: str, message: str) -> NoReturn:
        self.finish("limit", None, (type_name, message, None))

    def finish(
        self, status: str, value: object, error: tuple[str, str, int | None] | None
    ) -> NoReturn:
        """Flush the program's output, send ``done`` and end the process once the Host has
        it (unskippable: after ``done`` this thread only waits, then ``os._exit``)."""
        for stream in (sys.stdout, sys.stderr):
            try:  # noqa: SIM105 (contextlib would be one more import at start-up)
                stream.flush()
            except BaseException:
                pass
        # The Host has the whole output at EOF of both pipes. At exit the kernel closes
        # them only after unmapping the address space (0.4-2 ms measured): close them
        # now, so the output is complete when ``done`` arrives.
        for fd in (1, 2):
            try:  # noqa: SIM105
                os.close(fd)
            except OSError:
                pass
        message: dict[str, object] = {"t": "done", "status": status, "value": value, "error": None}
        if error is not None:
            message["error"] = {"type": error[0], "message": error[1], "line": error[2]}
        frame = self._channel.encode(message)
        if len(frame) - 4 > self._limits["max_frame_bytes"]:
            limit = self._limits["max_frame_bytes"]
            frame = self._channel.encode(
                {
                    "t": "done",
                    "status": "limit",
                    "value": None,
                    "error": {
                        "type": "FrameLimit",
                        "message": f"the program's result exceeds {limit} bytes",
                        "line": None,
                    },
                }
            )
        try:
            self._channel.send_bytes(frame)
            # Exiting unmaps the address space, in this process's time slice: with the Host
            # woken on this CPU by ``done`` (batch work does not yield to it), it read
            # ``done`` 0.8-1.5 ms late (measured). Wait, asleep, until the Host has it and
            # hangs up (it does at once; a Host that dies hangs up too), then exit.
            self._channel.wait_hang_up()
        finally:
            os._exit(0)


class _TurnOutput:
    """A session's ``sys.stdout`` buffer: one turn's output, at most ``output_bytes``.

    Passing the bound ends the turn with ``OutputLimit`` at once (``finish`` cannot be
    skipped), as the pipe's bound ends a single run.
    """

    def __init__(self, guest: _Guest) -> None:
        self._guest = guest
        self.limit = 0  # set per turn (the ``turn`` frame's ``output_bytes``)
        self._data = bytearray()
        self.closed = False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        return None

    def write(self, data: bytes) -> int:
        if len(self._data) + len(data) > self.limit:
            self._guest.finish_limit(
                "OutputLimit", f"the program printed more than {self.limit} bytes"
            )
        self._data += data
        return len(data)

    def take(self) -> str:
        text = self._data.decode("utf-8", "surrogateescape")
        self._data.clear()
        return text


_WARM_UP = """\
pages = docs.search(query="retry with backoff", limit=3)
notes = [fs.read(path=f"notes/{day}.md") for day in ("mon", "tue") if day]
if len(pages) > 1:
    total = {"pages": pages[0], "count": len(notes) + 1.5}
else:
    total = None
for i, note in enumerate(notes):
    print(f"{i}: {note.splitlines()[0]!r}")
try:
    value = kb.get(key="region")
except KeyError as exc:
    value = str(exc)
(total, value)
"""
"""``_Guest.warm``'s program: calls with keyword arguments, an f-string, a comprehension,
the statements agents write, a final expression (``split_program``'s second compile)."""

_FUNCTIONS = ""
"""``occurrences.FUNCTIONS`` (not imported: the child stays off the package ``__init__``)."""


def _function(name: str, call: Any) -> object:
    """A function tool as the program sees it: a global function, nothing else."""

    def invoke(*args: object, **kwargs: object) -> object:
        return call(_FUNCTIONS, name, args, kwargs)

    invoke.__name__ = invoke.__qualname__ = name
    return invoke


def _proxy(name: str, methods: list[str], call: Any) -> object:
    """A capability as the program sees it: one attribute per granted method, nothing else."""

    def method_for(method: str) -> Any:
        def invoke(*args: object, **kwargs: object) -> object:
            return call(name, method, args, kwargs)

        invoke.__name__ = method
        invoke.__qualname__ = f"{name}.{method}"
        return staticmethod(invoke)

    attrs: dict[str, object] = {m: method_for(m) for m in methods}
    attrs["__slots__"] = ()
    attrs["__repr__"] = lambda self: f"<capability {name}>"
    return type(name, (), attrs)()


def preload(root: str, seccomp_library: str | None) -> None:
    """Import everything a child needs before the program runs, and load libseccomp (the
    fork server's warm-up: its children start with all of it already in memory)."""
    _register_packages(root)
    import builtins  # noqa: F401
    import io  # noqa: F401
    import math  # noqa: F401
    import resource  # noqa: F401

    from occurrences import plain  # noqa: F401
    from pysolate import _guest_errors  # noqa: F401
    from pysolate._guest.child import (  # noqa: F401
        _confine,
        _landlock,
        _privileges,
        _seccomp,
        _self_pipe,
        _turn_report,
        _unshare,
        _view,
        _wire,
    )

    if seccomp_library:
        _seccomp.warm(seccomp_library)


def serve(fd: int, made: list[str] | None = None) -> NoReturn:
    """Be a Guest child on the broker socket ``fd``: ``init``, confine, ``ready``, run.

    ``made``: mechanisms the child already applied to itself (a forked ``namespaces``
    Guest's own namespaces, ``_unshare``), reported in ``ready`` with the rest."""
    from pysolate._guest.child import _wire

    try:  # noqa: SIM105
        # The program is batch work: a Guest woken by a reply must not preempt the Host's
        # event loop, which then stalled until the Guest blocked or exited (1.0-1.4 ms
        # measured at the last reply of a run). Not a confinement: a failure is harmless.
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except OSError:
        pass
    channel = _Channel(fd, _wire.HEADER, _wire.encode_frame)
    init = channel.receive()
    guest = _Guest(channel, init)
    from pysolate._guest.child import _confine

    try:
        mechanisms = _confine.confine(init["confinement"])
    except _confine.ConfinementFailed as exc:
        os.write(2, f"{_confine.STDERR_PREFIX}{exc}\n".encode())
        os._exit(_confine.EXIT_CODE)  # never run a program less isolated than planned
    channel.send_bytes(channel.encode({"t": "ready", "mechanisms": [*(made or ()), *mechanisms]}))
    proxies = guest.proxies()  # while the Host has no program to send yet, not after it did
    guest.warm()
    start = channel.receive()
    if start.get("t") == "turn":
        guest.turns(start, proxies)
    guest.execute(start["source"], proxies)


def main() -> None:
    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    _register_packages(root)
    serve(int(sys.argv[1]))


if __name__ == "__main__":
    main()
