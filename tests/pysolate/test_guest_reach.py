"""What a Guest reaches outside its files: signals, pids, kernel memory, cgroups, the library.

Issue 35's attacks, each through a real ``Host(isolation=...)`` at every level it applies
to (``guest_levels``), with bubblewrap hidden too:

- ``F_SETOWN`` + ``F_SETSIG`` + ``O_ASYNC`` on a pipe delivered any signal to the Host (its
  pid from ``SO_PEERCRED`` on the broker socket) at ``seccomp``;
- ``F_SETOWN``'s ``ESRCH`` (and every other call that answers differently for a pid that
  does not exist) listed every Host pid at ``landlock``, although ``/proc`` is hidden;
- ``socketpair``s filled with data pinned ~1 GB of kernel memory at every level (20,000
  inherited file descriptors, no cgroup memory bound);
- an ``rlimits`` Guest, mapped to the Host's uid 0, moved a ``setsid()`` grandchild to the
  root cgroup and appended to the library's own ``_seccomp.py``.

Signals go to the test's own process, with a handler that counts them; files are opened
for writing without writing, so a failing test reports an escape without harming the tree.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import pytest
from guest_levels import params
from test_guest_hostile import SYSCALL, needs_x86_64, run

from pysolate import GuestLimits
from pysolate._guest import _cgroup, _isolation

pytestmark = pytest.mark.anyio

ALL, SECCOMP_UP = params("rlimits"), params("seccomp")
ROOT = os.geteuid() == 0


# -- signals and pids ----------------------------------------------------------------------------


SIGIO_TO_HOST = """
import fcntl, os, socket, sys
results = {}
r, w = os.pipe()
def attempt(name, act):
    try:
        act()
        results[name] = 'ESCAPED'
    except OSError as e:
        results[name] = type(e).__name__
broker = socket.fromfd(int(sys.argv[-1]), socket.AF_UNIX, socket.SOCK_STREAM)
attempt('SO_PEERCRED', lambda: broker.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
attempt('F_SETOWN', lambda: fcntl.fcntl(r, 8, HOST))
attempt('F_SETOWN_EX', lambda: fcntl.fcntl(os.pipe()[0], 15, bytes(8)))  # (on r it would undo F_SETOWN)
attempt('F_SETSIG', lambda: fcntl.fcntl(r, 10, SIGNAL))
attempt('O_ASYNC', lambda: fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK))
attempt('F_SETLEASE', lambda: fcntl.fcntl(r, 1024, fcntl.F_RDLCK))
attempt('F_NOTIFY', lambda: fcntl.fcntl(os.open('.', os.O_RDONLY), 1026, 0x80000001))
os.write(w, b'x')  # the SIGIO (here SIGNAL) the owner gets if the calls went through
results
"""


@pytest.mark.parametrize("mode", ALL)
async def test_no_sigio_reaches_the_host(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fcntl commands that aim a signal at a pid are refused from ``seccomp`` up; at
    ``rlimits`` they run, but the Guest is the kernel's ``nobody``, which may not signal
    a root Host (an unprivileged Host's ``rlimits`` Guest is its uid: docs/isolation.md)."""
    if mode == "rlimits" and not ROOT:
        pytest.skip(
            "an unprivileged Host's rlimits Guest runs as the Host's uid and may signal it (docs/isolation.md)"
        )
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: received.append(number))
    try:
        source = f"HOST = {os.getpid()}\nSIGNAL = {int(signal.SIGUSR1)}\n" + SIGIO_TO_HOST
        out = await run(source, mode, monkeypatch)
        await anyio.sleep(0.1)  # a signal sent is delivered at once; give it the loop's turn
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert out.status == "ok", out.error
    assert received == []
    if mode != "rlimits":
        assert out.value == dict.fromkeys(
            (
                "SO_PEERCRED",
                "F_SETOWN",
                "F_SETOWN_EX",
                "F_SETSIG",
                "O_ASYNC",
                "F_SETLEASE",
                "F_NOTIFY",
            ),
            "PermissionError",
        )


PID_PROBES = (
    SYSCALL
    + """
import fcntl
r, w = os.pipe()
def setown(pid):
    try:
        fcntl.fcntl(r, 8, pid)
        return 'ESCAPED'
    except OSError as e:
        return e.errno
def probes(pid):
    word = ctypes.c_uint32(pid)
    return {
        'F_SETOWN': setown(pid),
        'kill(0)': sys_(62, pid, 0),
        'sched_getparam': sys_(143, pid, ctypes.create_string_buffer(8)),
        'sched_getscheduler': sys_(145, pid),
        'sched_getaffinity': sys_(204, pid, 128, ctypes.create_string_buffer(128)),
        'getpgid': sys_(121, pid),
        'getsid': sys_(124, pid),
        'getpriority': sys_(140, 0, pid),
        'get_robust_list': sys_(274, pid, ctypes.create_string_buffer(8), ctypes.create_string_buffer(8)),
        'capget': sys_(125, (ctypes.c_uint32 * 2)(0x20080522, pid), (ctypes.c_uint32 * 6)()),
        'futex(TRYLOCK_PI)': sys_(202, ctypes.addressof(word), 8 | 128, 0, 0, 0, 0),
        'prlimit64': sys_(302, pid, 7, 0, ctypes.create_string_buffer(16)),
    }
(probes(ALIVE), probes(ABSENT))
"""
)


def _absent_pid() -> int:
    pid = int(Path("/proc/sys/kernel/pid_max").read_text()) - 1
    while Path(f"/proc/{pid}").exists():
        pid -= 1
    return pid


@pytest.mark.parametrize("mode", SECCOMP_UP)
@needs_x86_64
async def test_no_call_tells_a_live_pid_from_an_absent_one(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every allowed call that names a process answers the Host's pid exactly as a pid no
    process has, and none succeeds: at ``landlock`` (no pid namespace) ``F_SETOWN``'s
    ``ESRCH`` listed every Host pid although ``/proc`` is hidden."""
    out = await run(
        PID_PROBES.replace("ALIVE", str(os.getpid())).replace("ABSENT", str(_absent_pid())),
        mode,
        monkeypatch,
    )
    assert out.status == "ok", out.error
    alive, absent = out.value  # type: ignore[misc]
    assert alive == absent, {
        name: (alive[name], absent[name]) for name in alive if alive[name] != absent[name]
    }
    assert not any(
        (isinstance(answer, tuple) and answer[0] == "ESCAPED") or answer == "ESCAPED"
        for answer in alive.values()
    ), alive


# -- kernel memory ------------------------------------------------------------------------------


BUFFER_FILL = """
import fcntl, os, socket
made, kind = [], 'socketpair'
try:
    while True:
        made += socket.socketpair()
except OSError as e:
    first_error = type(e).__name__
if not made:  # refused: pipes are what is left
    kind = 'pipe'
    try:
        while True:
            made += os.pipe()
    except OSError as e:
        first_error = type(e).__name__
try:
    fcntl.fcntl(made[-1], 1031, 1 << 20)  # F_SETPIPE_SZ: 1 MiB instead of 64 KiB
    grown = 'ESCAPED'
except OSError as e:
    grown = type(e).__name__
pinned = 0
for end in made[1::2] if kind == 'pipe' else made:
    if kind == 'pipe':
        os.set_blocking(end, False)
    else:
        end.setblocking(False)
    while True:
        try:
            pinned += os.write(end, bytes(65536)) if kind == 'pipe' else end.send(bytes(65536))
        except (BlockingIOError, OSError):
            break
(kind, first_error, len(made), grown, pinned)
"""


@pytest.mark.parametrize("mode", ALL)
async def test_kernel_buffers_a_guest_can_fill_are_bounded(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RLIMIT_NOFILE`` (``max_open_files``) bounds how many buffers a Guest holds; from
    ``seccomp`` up they are pipes of 64 KiB (no ``socketpair``, no ``F_SETPIPE_SZ``), so
    it pins at most ``max_open_files / 2 * 64 KiB``. At ``rlimits`` socket pairs stay, as
    many as the limit allows (~1 GB pinned with the 20,000 descriptors inherited before)."""
    out = await run(BUFFER_FILL, mode, monkeypatch, memory_bytes=1 << 30)
    assert out.status == "ok", out.error
    kind, first_error, count, grown, pinned = out.value  # type: ignore[misc]
    files = GuestLimits().max_open_files
    assert first_error == "OSError" and count < files  # EMFILE: stdio and the broker hold the rest
    if mode == "rlimits":
        assert kind == "socketpair" and pinned < count * 2 * int(
            Path("/proc/sys/net/core/wmem_default").read_text()
        )
    else:
        assert (kind, grown) == ("pipe", "PermissionError")
        assert pinned <= count // 2 * 65536


@pytest.mark.parametrize("mode", params("rlimits", hidden_bwrap=False)[-1:])
async def test_memory_outside_the_address_space_is_a_memory_limit(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At ``rlimits`` (memfd allowed) memfd pages, which ``RLIMIT_AS`` does not count, stop
    at the cgroup's memory bound (v2 ``memory.max`` or, on a hybrid hierarchy, v1's)."""
    source = "import os\nfor _ in range(50):\n    fd = os.memfd_create('x')\n    for _ in range(64):\n        os.write(fd, bytes(1 << 20))\n"
    out = await run(source, mode, monkeypatch, memory_bytes=256 << 20)
    assert out.isolation is not None
    if "cgroup-memory" not in out.isolation.mechanisms:
        pytest.skip(
            "no cgroup memory controller the Host may use: docs/isolation.md says what bounds kernel memory then"
        )
    assert (
        out.guest_status == "limit" and out.error is not None and out.error.type == "MemoryLimit"
    ), out.error


# -- cgroups and the library's own files --------------------------------------------------------


def _cgroup_targets() -> list[str]:
    """Every hierarchy's root ``cgroup.procs`` and the Host's own cgroups' (where a Guest
    would move itself to outlive its run)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        kind = fields[fields.index("-") + 1]
        if kind in ("cgroup", "cgroup2"):
            points.append(os.path.join(fields[4], "cgroup.procs"))
    own = [_cgroup._base(), _cgroup._base("pids")]
    return sorted({*points, *(os.path.join(base, "cgroup.procs") for base in own if base)})


CGROUP_ESCAPE = """
import os
def escape():
    out = []
    for path in TARGETS:
        try:
            with open(path, 'w') as f:
                f.write(str(os.getpid()))
            out.append('ESCAPED ' + path)
        except OSError as e:
            out.append(type(e).__name__)
    return out
mine, theirs = escape(), None
r, w = os.pipe()
try:
    pid = os.fork()
except OSError:
    pid = None
if pid == 0:
    os.setsid()
    os.write(w, ','.join(escape()).encode())
    os._exit(0)
if pid:
    os.waitpid(pid, 0)
    theirs = os.read(r, 65536).decode().split(',')
(mine, theirs)
"""


@pytest.mark.parametrize("mode", ALL)
async def test_no_guest_process_can_leave_its_cgroup(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither the Guest nor (at ``rlimits``) a ``setsid()`` child can write any
    ``cgroup.procs``: an ``rlimits`` grandchild once moved itself to the root cgroup and
    outlived the run. Read-only mounts (and, for a root Host, the kernel uid ``nobody``)."""
    targets = _cgroup_targets()
    assert targets
    out = await run(f"TARGETS = {targets!r}\n" + CGROUP_ESCAPE, mode, monkeypatch)
    assert out.status == "ok", out.error
    mine, theirs = out.value  # type: ignore[misc]
    assert not [r for r in mine if r.startswith("ESCAPED")], mine
    if mode == "rlimits":
        assert theirs is not None and not [r for r in theirs if r.startswith("ESCAPED")], theirs
    else:
        assert theirs is None  # no process could be made


def _library_files() -> list[Path]:
    """Files whose change would weaken or take over later Guests or the Host itself."""
    root = _isolation.PACKAGE_ROOT
    import anyio as anyio_module

    return [
        root / "pysolate" / "_guest" / "child" / "_seccomp.py",
        root / "pysolate" / "_guest" / "child" / "_seccomp_rules.py",
        root / "pysolate" / "_guest" / "child" / "_child.py",
        root / "pysolate" / "_guest" / "_isolation.py",
        root / "pysolate" / "_guest_errors.py",
        root / "occurrences" / "plain.py",
        Path(anyio_module.__file__ or ""),
        Path(os.__file__),
    ]


LIBRARY_WRITE = """
import os
results = {}
for path in TARGETS:
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
        results[path] = 'ESCAPED'
    except OSError as e:
        results[path] = type(e).__name__
for path in NEW:
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        results[path] = 'ESCAPED'
    except OSError as e:
        results[path] = type(e).__name__
results
"""


@pytest.mark.parametrize("mode", ALL)
async def test_the_librarys_own_files_are_not_writable(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At every level: the package sources (the Host's own paths, and under bubblewrap the
    sandbox's), the Host's virtualenv and the stdlib open for writing in no Guest, and no
    new module can be added beside them. An ``rlimits`` run once appended a no-op
    ``install()`` to ``_seccomp.py``, and a later default Host ran its Guests unfiltered."""
    files = _library_files()
    sandboxed = [
        f"{_isolation.SANDBOX_ROOT}/{path.relative_to(_isolation.PACKAGE_ROOT)}"
        for path in files[:6]
    ]
    new = [
        str(_isolation.PACKAGE_ROOT / "pysolate" / "_guest" / "child" / f"_pwned_{os.getpid()}.py"),
        f"{_isolation.SANDBOX_ROOT}/pysolate/_guest/child/_pwned.py",
        str(Path(os.__file__).with_name(f"pwned_{os.getpid()}.py")),
    ]
    before = {path: (path.stat().st_size, path.stat().st_mtime_ns) for path in files}
    try:
        out = await run(
            f"TARGETS = {[*map(str, files), *sandboxed]!r}\nNEW = {new!r}\n" + LIBRARY_WRITE,
            mode,
            monkeypatch,
        )
    finally:
        created = [path for path in new if Path(path).exists()]
        for path in created:
            Path(path).unlink()
    assert not created, f"the Guest created {created}"
    assert out.status == "ok", out.error
    assert {path: answer for path, answer in out.value.items() if answer == "ESCAPED"} == {}  # type: ignore[union-attr]
    assert {path: (path.stat().st_size, path.stat().st_mtime_ns) for path in files} == before


@pytest.mark.parametrize("mode", params("rlimits", hidden_bwrap=False)[-1:])
async def test_an_rlimits_guest_writes_only_its_scratch(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At ``rlimits`` (no Landlock, no filter) the whole file system is read-only but the
    scratch dir: even the directories anyone may write (``EROFS``, not ``EACCES``)."""
    targets = [f"/tmp/pysolate-pwned-{os.getpid()}", f"/var/tmp/pysolate-pwned-{os.getpid()}"]
    source = (
        f"import os\nresults = []\nfor t in {targets!r}:\n    try:\n        open(t, 'w').close()\n        results.append('ESCAPED')\n"
        "    except OSError as e:\n        results.append(type(e).__name__)\nopen('scratch.txt', 'w').write('ok')\n(results, open('scratch.txt').read())"
    )
    out = await run(source, mode, monkeypatch)
    assert out.value == (["OSError"] * len(targets), "ok"), out.value  # EROFS
    assert not any(os.path.exists(t) for t in targets)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize("mode", params("rlimits", hidden_bwrap=False)[-1:])
async def test_an_rlimits_grandchild_that_tried_to_escape_is_gone_with_the_run(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's escape, whole: a ``setsid()`` grandchild that tried every ``cgroup.procs``
    is in the Guest's cgroup still, so it ends with the run."""
    source = (
        f"TARGETS = {_cgroup_targets()!r}\n"
        + """
import os, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        for path in TARGETS:
            try:
                with open(path, 'w') as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass
        os.write(w, str(os.getpid()).encode())
        time.sleep(60)
    os._exit(0)
os.waitpid(pid, 0)
int(os.read(r, 32))
"""
    )
    out = await run(source, mode, monkeypatch)
    assert out.status == "ok" and isinstance(out.value, int), out.error
    assert out.isolation is not None
    if "cgroup-kill" not in out.isolation.mechanisms:
        pytest.skip(
            "no cgroup v2 the Host may create: rlimits cannot end a setsid() grandchild (docs/isolation.md)"
        )
    deadline = time.monotonic() + 5
    while _alive(out.value) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert not _alive(out.value)
