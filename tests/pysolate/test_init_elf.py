"""The init's program (``_guest._init_elf``): its bytes are its assembly source, it reports a
child's raw wait status exactly as the Python init does, and its memfd is sealed,
close-on-exec and execute-only.

Each case runs in a fresh interpreter (``subprocess``): the init's steps close every fd
and exec, which the test process must not do. The namespaces Guest's own init is checked
in ``test_fork_namespaces.py``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pysolate._guest.child import _init_elf

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "pysolate" / "_guest" / "child" / "_init_x86_64.S"
X86_64 = os.uname().machine == "x86_64"
needs_x86_64 = pytest.mark.skipif(
    not X86_64, reason="the init's program is x86_64 only (elsewhere the init stays Python)"
)


@pytest.mark.skipif(
    not (shutil.which("as") and shutil.which("objcopy")), reason="needs binutils (as, objcopy)"
)
def test_the_bytes_are_the_assembly_source(tmp_path: Path) -> None:
    subprocess.run(["as", "--64", "-o", str(tmp_path / "init.o"), str(SOURCE)], check=True)
    subprocess.run(
        [
            "objcopy",
            "-O",
            "binary",
            "-j",
            ".text",
            str(tmp_path / "init.o"),
            str(tmp_path / "init.bin"),
        ],
        check=True,
    )
    assert (tmp_path / "init.bin").read_bytes() == _init_elf.X86_64


INIT = """
import array, os, signal, socket, sys, time
sys.path.insert(0, {root!r})
from pysolate._guest.child import _init_elf, _privileges, _unshare

ending, how = sys.argv[1], sys.argv[2]
host, status = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
program = _init_elf.load(5)
go, release = os.pipe()
init = os.fork()
if init == 0:
    host.close()
    guest = os.fork()
    if guest == 0:
        os.read(go, 1)  # until the test has seen what the init became
        exec(ending)
    if how == "python":
        os.close(program)
        program = None
    elif how == "broken":  # not an executable: the exec fails, the init goes on in Python
        os.close(program)
        program = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
    _unshare._init(_privileges._libc(), status.fileno(), guest, program)
status.close()
data, ancillary, _, _ = host.recvmsg(64, socket.CMSG_SPACE(8))
for _level, _kind, fds in ancillary:
    for fd in array.array("i", fds):
        os.close(fd)
assert data.startswith(b"pid "), data
deadline = time.monotonic() + (10 if how == "elf" else 0.2)
while not (became := os.readlink(f"/proc/{{init}}/exe")).startswith("/memfd:") and time.monotonic() < deadline:
    time.sleep(0.01)
os.write(release, b"x")
exit_message = host.recv(64)
_, init_status = os.waitpid(init, 0)
print(exit_message.decode(), init_status, os.pread(program, 4096, 0) == _init_elf.X86_64, became.startswith("/memfd:" + _init_elf.NAME))
"""


def init_reports(ending: str, how: str) -> tuple[str, int, bool]:
    """Run ``_unshare._init`` (the ELF, ``python``, or a ``broken`` program) over a child that
    runs ``ending``; its ``exit`` message, the init's own status, whether it became the ELF."""
    done = subprocess.run(
        [sys.executable, "-c", INIT.format(root=str(ROOT)), ending, how],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert len(words) == 5 and words[3] == "True", done.stdout  # (the memfd unchanged)
    return " ".join(words[:2]), int(words[2]), words[4] == "True"


def raw_status(ending: str) -> int:
    """What ``os.waitpid`` gives for a child that runs ``ending`` (the Python init's answer)."""
    child = subprocess.Popen([sys.executable, "-c", f"import os, signal\n{ending}"])
    _, status = os.waitpid(child.pid, 0)
    child.returncode = 0  # (reaped here)
    return status


ENDINGS = [
    "os._exit(0)",
    "os._exit(37)",
    "os.kill(os.getpid(), signal.SIGKILL)",
    "os.kill(os.getpid(), signal.SIGXCPU)",
    "os.kill(os.getpid(), signal.SIGTERM)",
]


@needs_x86_64
@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("how", ["elf", "python", "broken"])
def test_the_init_reports_the_raw_wait_status_whichever_program_waits(
    ending: str, how: str
) -> None:
    """The same ``exit S`` from the ELF, the Python init and the Python fallback after a
    failed exec: ``S`` the raw status ``os.waitpid`` gives (signals, SIGXCPU, exit codes)."""
    message, init_status, became_elf = init_reports(ending, how)
    assert message == f"exit {raw_status(ending)}"
    assert init_status == 0
    assert became_elf == (how == "elf")


@needs_x86_64
def test_the_memfd_is_sealed_close_on_exec_and_execute_only() -> None:
    program = _init_elf.load(10)
    assert program is not None and program >= 10
    try:
        assert fcntl.fcntl(program, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        seals = fcntl.fcntl(program, fcntl.F_GET_SEALS)
        wanted = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        assert seals & wanted == wanted, seals
        assert os.fstat(program).st_mode & 0o7777 == 0o100
        assert os.pread(program, 4096, 0) == _init_elf.X86_64
        for change in (
            lambda: os.pwrite(program, b"\x90", 200),
            lambda: os.ftruncate(program, 8),
            lambda: os.ftruncate(program, 8192),
        ):
            with pytest.raises(PermissionError):
                change()
        with pytest.raises(PermissionError):
            fcntl.fcntl(
                program, fcntl.F_ADD_SEALS, 0
            )  # F_SEAL_SEAL: no seal comes off, none is added
    finally:
        os.close(program)
