"""The init of a forked ``namespaces`` Guest leaves Python once the Guest exists.

Pid 1 of a forked ``namespaces`` Guest's pid namespace (``_unshare``) is a clone of the fork
server: a whole copy-on-write Python address space. Once it has forked the Guest and handed
the Host its pidfds, all it does is wait for the Guest and send its raw wait status, yet
that address space cost 1.3-1.4 MiB of PSS per Guest (0.8 MiB of it pages only it had
written: every page the Guest later writes that only the init still shared with the server
stays the init's). So it replaces itself, with ``execveat``, by a 305-byte static ELF that
does just that: ``wait4`` the Guest, ``write`` ``exit S`` to fd 0 (the status socket),
``exit_group`` (source, headers included: ``_init_x86_64.S``; its bytes are ``X86_64``).

The fork server makes its memfd once (``load``) and every init execs that fd:

- sealed (``F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL``, and
  ``F_SEAL_EXEC`` where the kernel has it): nobody can change the program, its size or its
  mode once the server wrote it;
- close-on-exec, at an fd above a child's own (``lowest``): the exec'd init holds only the
  status socket, the Guest closes it right after its fork, the server never execs;
- mode ``0100``, executable but not readable by its owner: an exec of a file its caller
  cannot read leaves the process not dumpable (as for set-uid programs), so the init stays
  what the fork server made it, non-dumpable, with no moment in between when a process of
  its uid could attach to it or read its memory.

Where this is not x86_64, or the memfd cannot be made, or the exec fails, the init stays
Python (``_unshare._init``), as before: same protocol, same statuses.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

X86_64 = bytes.fromhex(
    "7f454c4602010100000000000000000002003e0001000000b00040000000000040000000000000000000000000000000"
    "000000004000380002000000000000000100000005000000000000000000000000004000000000000000400000000000"
    "31010000000000003101000000000000001000000000000051e574640600000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000001000000000000000488b74241031db0fb60683e83083f809"
    "770a6bdb0a01c348ffc6ebeb4883ec2089df4889e631d24531d2b83d0000000f054883f8fc74e94885c0783c8b042448"
    "8d742420b90a00000031d2f7f180c23048ffce881685c075f04883ee05c70665786974c6460420488d5424204829f231"
    "ffb8010000000f0531ffb8e70000000f05"
)
"""``_init_x86_64.S`` assembled (``tests/pysolate/test_init_elf.py`` reassembles it)."""

NAME = "pysolate-init"
_MFD_EXEC = 0x0010  # Linux 6.3: executable even where ``vm.memfd_noexec`` makes memfds not
_F_SEAL_EXEC = 0x0020  # Linux 6.3: the mode bits are fixed too
_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def load(lowest: int) -> int | None:
    """In the fork server: a sealed, close-on-exec, execute-only memfd holding the init's
    program, at an fd number of at least ``lowest``; None where there is none (not x86_64,
    or any step failed: the inits stay Python)."""
    if os.uname().machine != "x86_64":
        return None
    try:
        made = _memfd()
    except OSError:
        return None
    try:
        if os.write(made, X86_64) != len(X86_64):
            return None
        os.fchmod(made, 0o100)
        try:
            fcntl.fcntl(made, fcntl.F_ADD_SEALS, _SEALS | _F_SEAL_EXEC)
        except OSError:  # (before Linux 6.3: no F_SEAL_EXEC)
            fcntl.fcntl(made, fcntl.F_ADD_SEALS, _SEALS)
        return fcntl.fcntl(made, fcntl.F_DUPFD_CLOEXEC, lowest)
    except OSError:
        return None
    finally:
        os.close(made)


def _memfd() -> int:
    flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
    try:
        return os.memfd_create(NAME, flags | _MFD_EXEC)
    except OSError:  # (before Linux 6.3: no MFD_EXEC, and every memfd may be executed)
        return os.memfd_create(NAME, flags)


def execute(program: int, guest: int) -> None:
    """In the init, its status socket at fd 0 and no other fd but ``program`` (``load``'s):
    become the ELF, waiting for the Guest ``guest`` (its pid in the init's namespace).
    Returns only if the exec failed (then nothing changed), and then with ``program`` closed."""
    with contextlib.suppress(OSError):
        os.execve(program, [NAME, str(guest)], {})
    os.close(program)
