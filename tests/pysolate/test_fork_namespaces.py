"""Forked ``namespaces`` Guests: each has namespaces of its own, shared with no sibling and
not with the fork server, and reports its end exactly as a spawned one.

The Guest cannot see its own namespace identity (``/proc`` is covered), so the Host reads
``/proc/<pid>/ns/*`` of the processes running the programs and of the server and compares
the inodes. The generic fork-server tests (``test_fork_server.py``) and the Guest suites
run at this level too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
import threading

import anyio
import pytest

from pysolate._guest import _forked, _isolation, start_subprocess_guest
from pysolate._guest._process import SubprocessGuest
from pysolate._guest.child import _init_elf
from pysolate._guest_api import GuestLimits, GuestOutcome

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        bool(_isolation.machine().missing("namespaces")),
        reason="isolation='namespaces' unavailable here",
    ),
]

CAPS = {"tools": ["wait"]}
NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")


async def echo(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    return None


async def start(**limits: float) -> SubprocessGuest:
    guest = await start_subprocess_guest(CAPS, GuestLimits(**limits), isolation="namespaces")
    assert "fork-server" in guest.isolation.mechanisms and guest.isolation.level == "namespaces"
    return guest


def identity(pid: int) -> dict[str, int]:
    return {name: os.stat(f"/proc/{pid}/ns/{name}").st_ino for name in NAMESPACES}


def program_pid(guest: SubprocessGuest) -> int:
    process = guest._process
    assert isinstance(process, _forked.ForkedProcess)
    return process.guest_pid


async def test_two_guests_share_no_namespace_with_each_other_or_the_server() -> None:
    first, second = await start(), await start()
    try:
        server = _forked.server_for("namespaces").pid()
        assert server is not None
        ids = [identity(program_pid(first)), identity(program_pid(second)), identity(server)]
        for name in NAMESPACES:
            assert len({found[name] for found in ids}) == 3, (name, ids)
    finally:
        await first.aclose()
        await second.aclose()


async def test_the_init_holds_none_of_the_guests_fds() -> None:
    """Pid 1 of the Guest's namespace keeps no fd of the Guest's (stdio, broker, the
    server's prepared Landlock rules) once the Guest runs: only its status socket (the
    program's memfd too, until the exec closes it)."""
    guest = await start()
    try:
        init = guest._process.pid
        await became_program(init)
        held = fd_links(init)
        assert len(held) <= 1, (
            held
        )  # at most the socket on which it tells the Host the Guest's status
        assert all(target.startswith("socket:") for target in held.values()), held
    finally:
        await guest.aclose()


def fd_links(pid: int) -> dict[str, str]:
    """What each open fd of ``pid`` refers to. An fd closed between the listing and its
    ``readlink`` is left out: the fork server closes a Guest's fds when it is reaped, and
    the reaper thread may be ending an earlier test's Guests meanwhile."""
    links = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            links[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
    return links


async def became_program(init: int) -> None:
    """Once the init runs ``_init_elf``'s program (on x86_64; elsewhere it stays Python)."""
    if os.uname().machine == "x86_64":
        with anyio.fail_after(10):
            while not os.readlink(f"/proc/{init}/exe").startswith(f"/memfd:{_init_elf.NAME}"):
                await anyio.sleep(0.01)


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(found) for found in f.read().split()]


async def test_two_processes_per_guest_the_init_a_child_of_the_server() -> None:
    """No process between the server and the Guest's init (no reaper), and exactly one
    below the init: the Guest, pid 2 of the namespace whose pid 1 is the init."""
    guest = await start()
    try:
        process = guest._process
        assert isinstance(process, _forked.ForkedProcess)
        init, program = process.pid, program_pid(guest)
        assert parent(init) == _forked.server_for("namespaces").pid()
        assert children(init) == [program] and children(program) == []
        assert os.stat(f"/proc/{init}/ns/pid").st_ino == os.stat(f"/proc/{program}/ns/pid").st_ino
        with open(f"/proc/{program}/status") as f:
            ns_pids = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        assert ns_pids[-1] == "2", ns_pids  # (the Host's pid, the server's namespace's, its own)
    finally:
        await guest.aclose()


async def test_the_init_holds_no_capability() -> None:
    guest = await start()
    try:
        await became_program(guest._process.pid)  # (the exec grants none)
        with open(f"/proc/{guest._process.pid}/status") as f:
            caps = {
                line.split(":")[0]: int(line.split()[1], 16) for line in f if line.startswith("Cap")
            }
        assert caps["CapEff"] == caps["CapPrm"] == caps["CapInh"] == caps["CapAmb"] == 0, caps
    finally:
        await guest.aclose()


async def test_only_nobody_is_mapped_into_the_guests_user_namespace() -> None:
    """One uid and one gid, ``nobody`` inside, the Host's own outside (read from the Host,
    so shown relative to its namespace): a root Host lends the Guest no uid 0, and
    ``setgroups`` stays denied."""
    guest = await start()
    try:
        pid = program_pid(guest)
        for name, outside in (("uid_map", os.getuid()), ("gid_map", os.getgid())):
            with open(f"/proc/{pid}/{name}") as f:
                assert [line.split() for line in f] == [["65534", str(outside), "1"]], name
        with open(f"/proc/{pid}/setgroups") as f:
            assert f.read().strip() == "deny"
    finally:
        await guest.aclose()


async def test_a_dead_server_takes_the_init_and_the_guest_with_it() -> None:
    """Nothing outlives the server, with no kill from the Host (it runs nothing here): the
    init dies with it (PDEATHSIG; bubblewrap's pid namespace, which holds the Guest's,
    ends with the server too), the Guest with the init's pid namespace."""
    guest = await start()
    try:
        process = guest._process
        assert isinstance(process, _forked.ForkedProcess)
        fds = [os.pidfd_open(process.pid), os.pidfd_open(program_pid(guest))]
        await became_program(process.pid)  # (its death signal must outlive the exec)
        server = _forked.server_for("namespaces")
        server_pid = server.pid()
        assert server_pid is not None
        os.kill(server_pid, signal.SIGKILL)
        try:
            with anyio.fail_after(10):
                for fd in fds:
                    await anyio.wait_readable(fd)
        finally:
            for fd in fds:
                os.close(fd)
    finally:
        await guest.aclose()


async def test_a_guest_never_sees_a_siblings_tmp() -> None:
    entered, release = anyio.Event(), anyio.Event()

    async def hold(
        capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        entered.set()
        await release.wait()
        return None

    writer, reader = await start(), await start()
    results: list[GuestOutcome] = []
    async with anyio.create_task_group() as tasks:

        async def write() -> None:
            results.append(
                await writer.run(
                    "open('/tmp/mine', 'w').write('x')\ntools.wait()\nimport os\nos.listdir('/tmp')",
                    hold,
                )
            )

        tasks.start_soon(write)
        await entered.wait()
        outside = ["/etc", "/home", "/var", str(_isolation.PACKAGE_ROOT), "/usr"]
        seen = await reader.run(
            f"import os\n(os.getcwd(), os.listdir('/tmp'), [os.path.exists(p) for p in {outside!r}])",
            echo,
        )
        release.set()
    await writer.aclose()
    await reader.aclose()
    assert results[0].value == ["mine"]
    assert seen.status == "ok", seen.error
    cwd, tmp, exists = seen.value  # type: ignore[misc]
    assert cwd == "/tmp" and tmp == []
    assert exists == [False] * 4 + [True]  # only the minimal root: /usr, not the Host's files


async def test_no_socket_and_no_network() -> None:
    guest = await start()
    try:
        out = await guest.run(
            "import socket\nseen = []\nfor family in (socket.AF_INET, socket.AF_UNIX, socket.AF_NETLINK):\n"
            "    try:\n        socket.socket(family, socket.SOCK_DGRAM if family == socket.AF_NETLINK else socket.SOCK_STREAM)\n"
            "        seen.append('ESCAPED')\n    except OSError as exc:\n        seen.append(type(exc).__name__)\nseen",
            echo,
        )
    finally:
        await guest.aclose()
    assert out.status == "ok", out.error
    assert out.value == ["PermissionError"] * 3


async def test_the_program_is_not_pid_1_and_a_crash_is_reported_with_its_signal() -> None:
    guest = await start()
    try:
        out = await guest.run(
            "import ctypes, os\nprint(os.getpid(), flush=True)\nctypes.string_at(0)", echo
        )
    finally:
        await guest.aclose()
    assert out.stdout.strip() == "2"  # pid 1 is its own init, which ignores unhandled signals
    assert out.status == "crashed" and out.error is not None and "status -11" in out.error.message


@pytest.mark.parametrize(
    ("ending", "status"), [("os._exit(37)", 37), ("os.kill(os.getpid(), signal.SIGTERM)", -15)]
)
async def test_the_guests_own_exit_status_reaches_the_host(ending: str, status: int) -> None:
    """The init's own status (0) never stands in for the Guest's: an exit code and a
    signal the Guest sent itself (no fault, no limit) arrive as they were."""
    guest = await start()
    try:
        out = await guest.run(f"import os, signal\n{ending}", echo)
    finally:
        await guest.aclose()
    assert (
        out.status == "crashed"
        and out.error is not None
        and f"status {status} " in out.error.message
    ), out.error


async def test_the_cpu_limit_is_reported_as_sigxcpu() -> None:
    guest = await start(cpu_time=1, wall_time=20)
    try:
        out = await guest.run("while True:\n    pass", echo)
    finally:
        await guest.aclose()
    assert out.status == "limit" and out.error is not None and out.error.type == "CPUTimeLimit"


def test_the_server_outlives_the_event_loop_and_thread_that_started_it() -> None:
    """bubblewrap's ``--die-with-parent`` follows the thread that started it; the server
    must not die with an event loop's worker threads (its Guests would die with it)."""
    server = _forked.server_for("namespaces")
    live = server.live_control()
    if live is not None:
        server.replace(live)  # the next Guest starts a fresh server

    async def one() -> str:
        guest = await start()
        try:
            return (await guest.run("'ok'", echo)).status
        finally:
            await guest.aclose()

    outcomes: list[str] = []
    thread = threading.Thread(target=lambda: outcomes.append(anyio.run(one)))
    thread.start()
    thread.join()
    started = server.pid()
    for worker in [
        t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon
    ]:
        worker.join(timeout=30)  # the loop's worker threads are gone
    outcomes.append(anyio.run(one))
    assert outcomes == ["ok", "ok"]
    assert server.pid() == started


@pytest.mark.skipif(
    os.uname().machine != "x86_64",
    reason="the init's program is x86_64 only (elsewhere the init stays Python)",
)
async def test_the_init_becomes_the_tiny_program_and_the_guest_holds_none_of_it() -> None:
    """Once the Guest runs, its init is ``_init_elf``'s program (no Python address space),
    the memfd it came from is held by the server alone, sealed and close-on-exec, and the
    Guest holds no fd of it."""
    guest = await start()
    try:
        init, program = guest._process.pid, program_pid(guest)
        await became_program(init)
        with open(f"/proc/{init}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[:2] == [_init_elf.NAME.encode(), b"2"]
        assert not [fd for fd, target in fd_links(program).items() if "memfd:" in target]
        server = _forked.server_for("namespaces").pid()
        held = [
            fd
            for fd, target in fd_links(server).items()
            if target.startswith(f"/memfd:{_init_elf.NAME}")
        ]
        assert len(held) == 1, held
        with open(f"/proc/{server}/fdinfo/{held[0]}") as f:
            flags = int(next(line.split()[1] for line in f if line.startswith("flags:")), 8)
        assert flags & os.O_CLOEXEC
        reopened = os.open(f"/proc/{server}/fd/{held[0]}", os.O_RDONLY)
        try:
            wanted = (
                fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
            )
            assert fcntl.fcntl(reopened, fcntl.F_GET_SEALS) & wanted == wanted
        finally:
            os.close(reopened)
        out = await guest.run(
            "import os\nos._exit(37)", echo
        )  # the program reports the Guest's end
        assert (
            out.status == "crashed" and out.error is not None and "status 37 " in out.error.message
        ), out.error
    finally:
        await guest.aclose()


PEEK = """
import ctypes, os, sys, time
sys.path.insert(0, sys.argv[2])
from pysolate._guest.child import _privileges

init = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
if libc.setns(os.open(f"/proc/{init}/ns/user", os.O_RDONLY), 0x10000000) != 0:
    raise OSError(ctypes.get_errno(), "setns")
_privileges._clear_capabilities(_privileges._libc())  # the Guest's footing: its namespace, no capability
twin = os.fork()
if twin == 0:
    time.sleep(60)
    os._exit(0)
seen = []
for pid in (twin, init):
    try:
        open(f"/proc/{pid}/environ", "rb").close()
        seen.append("read")
    except PermissionError:
        seen.append("refused")
os.kill(twin, 9)
print(*seen)
"""


async def test_the_init_is_not_dumpable_for_a_process_in_the_guests_namespace() -> None:
    """A process of the same uid in the Guest's user namespace, with no capability (where
    the Guest stands, without its seccomp filter and hidden ``/proc``), cannot read the
    init's memory: it is not dumpable, before and after it execs its program. The same
    process can read a dumpable twin of its own (so a dumpable init would be caught)."""
    guest = await start()
    try:
        init = guest._process.pid
        await became_program(init)
        peek = await anyio.run_process(
            [sys.executable, "-c", PEEK, str(init), str(_isolation.PACKAGE_ROOT)], check=False
        )
        assert peek.returncode == 0, peek.stderr
        assert peek.stdout.decode().split() == ["read", "refused"]
    finally:
        await guest.aclose()
