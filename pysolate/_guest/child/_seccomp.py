"""The Guest child's seccomp filter: compiled through ``libseccomp`` by ctypes, then installed.

Stdlib-only (the child imports it; the few calls we need are five C functions of the
system's ``libseccomp.so.2``). What the filter allows and refuses, and why, is
``_seccomp_rules``; this module turns those rules into one BPF program and loads it.

It is one filter, the same for every Guest but for its own pid in the ``kill``/``tgkill``
rules (signals to any other pid fail with EPERM) and the other calls that name a process: compiled to BPF once per process with a
placeholder pid (the fork server compiles it before it forks), each Guest only patches its
pid in and loads it.

``libseccomp`` also kills a process that switches syscall ABI (i386/x32), so the list
cannot be sidestepped that way. ``install(..., strict=True)`` kills the process on any
syscall the lists do not name: the compatibility tests use it on every supported
interpreter so that a new Python needing a new syscall fails loudly in a test instead of
quietly at a user's.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys
from collections.abc import Callable

from ._seccomp_rules import Condition, Rule, allow_list, errno_action

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_KILL_PROCESS = 0x80000000
_ATTR_OPTIMIZE, _OPTIMIZE_BINARY_TREE = 8, 2  # SCMP_FLTATR_CTL_OPTIMIZE


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


_LOADED: dict[str, tuple[ctypes.CDLL, dict[str, int]]] = {}
"""libseccomp and its syscall numbers by library path, once per process (``warm``)."""


def warm(library_path: str) -> None:
    """Load libseccomp, resolve every syscall name and compile the allow-lists now, so
    ``install`` only sets its pid and loads (the fork server does this once for all its
    children)."""
    for restrict_files in (False, True):
        compiled(library_path, restrict_files=restrict_files, strict=False)


def _library(library_path: str) -> tuple[ctypes.CDLL, dict[str, int]]:
    loaded = _LOADED.get(library_path)
    if loaded is not None:
        return loaded
    lib = ctypes.CDLL(library_path, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_attr_set.restype = ctypes.c_int
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    numbers = {name: lib.seccomp_syscall_resolve_name(name.encode()) for name in _named_syscalls()}
    _LOADED[library_path] = lib, numbers
    return lib, numbers


def _named_syscalls() -> set[str]:
    """Every syscall the rules name, found by stating them (no second list to keep in step)."""
    names: set[str] = set()

    def record(action: int, name: str, *conditions: Condition) -> None:
        names.add(name)

    for restrict_files in (False, True):
        allow_list(record, restrict_files=restrict_files, pid=0)
    return names


def install(library_path: str, *, restrict_files: bool, strict: bool = False) -> list[str]:
    """Load the filter into this process (irrevocably); returns the mechanisms applied.

    One filter: the allow-list, compiled once per process (``compiled``; the fork server
    compiles it before it forks) with a placeholder where ``kill``/``tgkill`` compare their
    pid, then that placeholder set to ours. ``strict`` makes every unlisted syscall kill
    the process (tests only, see module docstring). Raises ``OSError`` if the filter cannot
    be built or loaded: the caller must then not run the program.
    """
    template, offsets = compiled(library_path, restrict_files=restrict_files, strict=strict)
    program = bytearray(template)
    own = os.getpid().to_bytes(4, sys.byteorder)
    for at in offsets:
        program[at : at + 4] = own
    _load(bytes(program))
    return ["seccomp-allowlist", "no-fork", "no-sockets", "no-io-uring", "no-memfd", "no-sigio"] + (
        ["no-file-writes"] if restrict_files else []
    )


_COMPILED: dict[tuple[str, bool, bool], tuple[bytes, tuple[int, ...]]] = {}

_PID_PLACEHOLDERS = (0x7FFFFFFE, 0x7FFFFFFD)
"""Stand for the Guest's pid in the compiled allow-list (above any real pid); it is
compiled with each, and the operands that differ are exactly the pid comparisons."""


def compiled(
    library_path: str, *, restrict_files: bool, strict: bool
) -> tuple[bytes, tuple[int, ...]]:
    """The allow-list as a BPF program with the first placeholder for our pid, and the
    byte offsets of every operand holding it; built by libseccomp once per process.

    Raises ``OSError`` unless the two compilations differ in pid operands alone."""
    key = (library_path, restrict_files, strict)
    if key not in _COMPILED:
        lib, numbers = _library(library_path)
        default = _KILL_PROCESS if strict else errno_action(errno.ENOSYS)
        first, second = (
            _build(
                lib,
                default,
                functools.partial(allow_list, restrict_files=restrict_files, pid=pid),
                numbers,
            )
            for pid in _PID_PLACEHOLDERS
        )
        if len(first) != len(second):
            raise OSError("the allow-list compiles to different programs for different pids")
        offsets = tuple(
            at for at in range(0, len(first), 4) if first[at : at + 4] != second[at : at + 4]
        )
        expected = [placeholder.to_bytes(4, sys.byteorder) for placeholder in _PID_PLACEHOLDERS]
        if not offsets or any(
            at % 8 != 4 or [first[at : at + 4], second[at : at + 4]] != expected for at in offsets
        ):
            raise OSError(
                "the compiled allow-list does not compare the pid where expected"
            )  # only a ``k`` operand may differ
        _COMPILED[key] = first, offsets
    return _COMPILED[key]


def _build(
    lib: ctypes.CDLL, default: int, rules: Callable[[Rule], object], numbers: dict[str, int]
) -> bytes:
    """A filter with ``default`` and the ``rules`` it adds, exported as BPF by libseccomp."""
    ctx = lib.seccomp_init(default)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        # A binary tree of syscall numbers (libseccomp >= 2.5; older ones keep the list):
        # the same filter, but the kernel's per-syscall action cache, built at every load,
        # walks O(log n) instructions per syscall instead of O(n) (load 0.40 -> 0.23 ms).
        lib.seccomp_attr_set(ctx, _ATTR_OPTIMIZE, _OPTIMIZE_BINARY_TREE)

        def rule(action: int, name: str, *conditions: Condition) -> None:
            if action == default:
                return  # libseccomp refuses a rule that repeats the default
            number = numbers.get(name, -1)
            if number < 0:
                return  # not a syscall here (``fork`` on arm64) or newer than libseccomp: denied by default
            array = (_ArgCmp * max(1, len(conditions)))(*[_ArgCmp(*c) for c in conditions])
            rc = lib.seccomp_rule_add_array(ctx, action, number, len(conditions), array)
            if rc < 0:
                raise OSError(-rc, f"seccomp rule for {name}: {os.strerror(-rc)}")

        rules(rule)
        read_end, write_end = os.pipe()
        try:
            rc = lib.seccomp_export_bpf(ctx, write_end)
            os.close(write_end)
            write_end = -1
            if rc < 0:
                raise OSError(-rc, f"seccomp_export_bpf: {os.strerror(-rc)}")
            chunks = []
            while chunk := os.read(read_end, 65536):
                chunks.append(chunk)
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
    finally:
        lib.seccomp_release(ctx)
    program = b"".join(chunks)
    if not program or len(program) % 8:
        raise OSError("seccomp_export_bpf returned no program")
    return program


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_LIBC = ctypes.CDLL(None, use_errno=True)
"""This module's own handle, made at import (a fork server's children inherit it ready)."""
_LIBC.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_void_p,
    ctypes.c_ulong,
    ctypes.c_ulong,
]


def _load(program: bytes) -> None:
    """Install one BPF filter (``no_new_privs`` is already set: ``_privileges.drop``)."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    if _LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_SECCOMP): {os.strerror(code)}")
