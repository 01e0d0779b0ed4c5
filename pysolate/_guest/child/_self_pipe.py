"""asyncio's self-pipe as a pipe, in a Guest whose filter refuses ``socketpair``.

An ``AF_UNIX`` socket pair holds up to its send buffer in the kernel on each end
(``net.core.wmem_default``, 208 KiB here, plus overhead), which no ``RLIMIT_AS`` or
``memory_bytes`` counts: a program that filled one pair per free file descriptor pinned
about 1 GB of kernel memory at every level. So the seccomp filter refuses ``socketpair``
(``_seccomp``) and a Guest's kernel buffers are pipes of a fixed 64 KiB
(``F_SETPIPE_SZ`` is refused too), at most ``GuestLimits.max_open_files`` / 2 of them.

asyncio's selector loop makes one ``socket.socketpair()`` per loop to wake itself
(``BaseSelectorEventLoop._make_self_pipe``; the same six lines in CPython 3.11-3.13) and
only ever reads, writes, closes it and hands its write end to ``signal.set_wakeup_fd``,
all of which a pipe does as well (Tornado and Twisted wake their loops with one). The
child installs ``install()`` after it confined itself: an import hook that replaces that
one method once ``asyncio.selector_events`` has run. Nothing else changes: an explicit
``socket.socketpair()`` in the program is still ``PermissionError``. Not a security
boundary (the program may remove the hook and break only its own asyncio).
"""

from __future__ import annotations

import os
import sys
from typing import Any

_MODULE = "asyncio.selector_events"


class _End:
    """One end of the pipe, with the socket methods asyncio calls on its self-pipe."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def setblocking(self, flag: bool) -> None:
        os.set_blocking(self._fd, flag)

    def recv(self, size: int) -> bytes:
        return os.read(self._fd, size)

    def send(self, data: bytes) -> int:
        return os.write(self._fd, data)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def _make_self_pipe(self: Any) -> None:
    """``BaseSelectorEventLoop._make_self_pipe`` with ``os.pipe()`` for ``socket.socketpair()``."""
    read, write = os.pipe()
    self._ssock, self._csock = _End(read), _End(write)
    self._ssock.setblocking(False)
    self._csock.setblocking(False)
    self._internal_fds += 1
    self._add_reader(self._ssock.fileno(), self._read_from_self)


def _patch(module: Any) -> None:
    module.BaseSelectorEventLoop._make_self_pipe = _make_self_pipe


class _Loader:
    """The real loader of ``asyncio.selector_events``, patching the module once it ran."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str) -> Any:  # get_source (tracebacks), get_filename...
        return getattr(self._inner, name)


class _Finder:
    """A ``sys.meta_path`` finder for ``asyncio.selector_events`` alone."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
        if name != _MODULE:
            return None
        for finder in sys.meta_path:
            if finder is _Finder or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)  # type: ignore[assignment]  # (it loads as the real one does)
                return spec
        return None


def install() -> None:
    """Make asyncio's loops wake themselves through a pipe (see module docstring)."""
    loaded = sys.modules.get(_MODULE)
    if loaded is not None:
        _patch(loaded)
    elif _Finder not in sys.meta_path:
        sys.meta_path.insert(0, _Finder)
