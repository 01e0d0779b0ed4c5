"""Hostile programs reach nothing the Host did not grant, at every isolation level.

Each test is a program trying one escape, run through a real ``Host(isolation=...)`` at
every level this machine offers (``guest_levels``: namespaces, landlock, seccomp, rlimits,
and the default Host with bubblewrap hidden). A test runs at the levels meant to stop its
attack — ``params("seccomp")`` is seccomp and up, ``params("landlock")`` the levels with
file-system isolation — and docs/isolation.md lists what each level does not stop.
Signals are sent with signal 0 and files are written in the test's own tmp dir, so a
failing test reports an escape without harming the machine.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import sys
import time
from pathlib import Path

import anyio
import pytest
from guest_levels import RAY, choice, expected_level, guest_factory, params, with_ray

from pysolate import Effect, GuestLimits, Host, RunResult, capability
from pysolate._guest import _filesystem, _isolation

pytestmark = pytest.mark.anyio

SECRET = "hunter2-pysolate-fake-secret"
X86_64 = platform.machine() == "x86_64"
needs_x86_64 = pytest.mark.skipif(not X86_64, reason="raw syscall numbers below are x86_64's")


class Workspace:
    def __init__(self) -> None:
        self.calls: list[str] = []

    @capability(effect=Effect.PURE, version="1")
    def read_text(self, path: str) -> str:
        self.calls.append(path)
        return "granted"


async def run(
    source: str,
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
    workspace: Workspace | None = None,
    **limits: float,
) -> RunResult:
    async with contextlib.AsyncExitStack() as stack:
        if mode == RAY:
            factory = await stack.enter_async_context(guest_factory(mode, monkeypatch))
            host = Host(guest_factory=factory, limits=GuestLimits(**limits))
        else:
            host = Host(isolation=choice(mode, monkeypatch), limits=GuestLimits(**limits))  # type: ignore[arg-type]
        host.register("workspace", workspace or Workspace())
        with anyio.fail_after(30):
            result = await host.run_source(source, speculate=False)
    assert result.isolation is not None and result.isolation.level == expected_level(mode)
    return result


def attempt(statement: str) -> str:
    """A program that runs ``statement`` and evaluates to 'ESCAPED' or the error class."""
    return f"try:\n    {statement}\n    r = 'ESCAPED'\nexcept BaseException as e:\n    r = type(e).__name__\nr"


SYSCALL = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sys_(number, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(number, *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return (rc, ctypes.get_errno()) if rc < 0 else ('ESCAPED', rc)
"""
"""Prelude: ``sys_(nr, ...)`` makes a raw syscall; ``(-1, errno)`` or ``('ESCAPED', rc)``."""

EPERM, ENOSYS = 1, 38
ALL, SECCOMP_UP, FILE_SYSTEM = (
    with_ray(params(minimum)) for minimum in ("rlimits", "seccomp", "landlock")
)


# -- environment and other processes -------------------------------------------------------


@pytest.mark.parametrize("mode", ALL)
async def test_host_environment_does_not_leak(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSOLATE_FAKE_SECRET", SECRET)
    out = await run("import os\ndict(os.environ)", mode, monkeypatch)
    assert out.status == "ok" and SECRET not in repr(out.value)


@pytest.mark.parametrize("mode", ALL)
async def test_no_other_process_is_visible_in_proc(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Host's ``/proc/<pid>/environ`` and ``mem`` held the secret at the old weak levels."""
    monkeypatch.setenv("PYSOLATE_FAKE_SECRET", SECRET)
    host_pid = os.getpid()
    source = f"""
import os
seen = []
for path in ['/proc/{host_pid}/environ', f'/proc/{{os.getppid()}}/environ', '/proc/1/environ', '/proc/{host_pid}/mem', '/proc/{host_pid}/cwd/pyproject.toml']:
    try:
        with open(path, 'rb') as f:
            seen.append(f.read(1 << 16))
    except OSError as e:
        seen.append(type(e).__name__)
try:
    listing = os.listdir('/proc')
except OSError as e:
    listing = [type(e).__name__]
(seen, listing)
"""
    out = await run(source, mode, monkeypatch)
    assert out.status == "ok", out.error
    seen, listing = out.value  # type: ignore[misc]
    assert SECRET.encode() not in b"".join(s for s in seen if isinstance(s, bytes))
    assert all(isinstance(s, str) for s in (seen[0], seen[3], seen[4])), (
        seen
    )  # the Host's: unreachable
    assert str(host_pid) not in listing


# -- processes -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", SECCOMP_UP)
async def test_no_program_can_be_started(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    statements = [
        "import subprocess; subprocess.run(['/bin/sh', '-c', 'echo pwned'])",
        "import os; os.fork()",
        "import os; os.execv('/bin/sh', ['sh', '-c', 'echo pwned'])",
        "import os; os.posix_spawn('/bin/sh', ['sh', '-c', 'echo pwned'], {})",
        "import pty; pty.spawn(['/bin/sh', '-c', 'echo pwned'])",
        "import multiprocessing; p = multiprocessing.Process(target=print, args=('pwned',)); p.start(); p.join()",
        "import _posixsubprocess, os; _posixsubprocess.fork_exec(['/bin/sh'], [b'/bin/sh'], True, (), None, None, -1, -1, -1, -1, -1, -1, *os.pipe(), False, False, 0, None, None, None, -1, None, False)",
        "import asyncio; asyncio.run(asyncio.create_subprocess_exec('/bin/sh', '-c', 'echo pwned'))",
    ]
    for statement in statements:
        out = await run(attempt(statement), mode, monkeypatch)
        assert out.value != "ESCAPED" and "pwned" not in out.stdout, statement


@pytest.mark.parametrize("mode", SECCOMP_UP)
async def test_smolagents_escapes_do_nothing(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """smolagents' executor escapes (CVE-2025-5120 class walk, CVE-2025-9959 import tricks)."""
    programs = [
        "rc = None\nfor cls in ().__class__.__base__.__subclasses__():\n    if cls.__name__ == '_wrap_close':\n"
        "        rc = cls.__init__.__globals__['system']('echo pwned')\nrc",
        "__import__('posix').system('echo pwned')",
        "getattr(__builtins__, '__import__')('os').popen('echo pwned').read()",
        "import sys\nsys.modules['os'].system('echo pwned')",
        "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'BuiltinImporter'][0]"
        ".load_module('posix').system('echo pwned')",
    ]
    for source in programs:
        out = await run(source, mode, monkeypatch)
        assert "pwned" not in out.stdout and out.value != 0, source  # os.system's 0: the shell ran


@pytest.mark.parametrize("mode", ALL)
async def test_a_pickled_object_is_never_unpickled_by_the_host(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """smolagents' remote executor unpickled Guest values (RCE); only plain data crosses here."""
    marker = Path(os.environ.get("TMPDIR", "/tmp")) / f"pysolate-unpickled-{os.getpid()}"
    source = f"import os\nclass Evil:\n    def __reduce__(self):\n        return (os.system, ('touch {marker}',))\nEvil()"
    out = await run(source, mode, monkeypatch)
    assert out.status == "ok" and isinstance(out.value, str) and "Evil" in out.value
    assert not marker.exists()


@pytest.mark.parametrize("mode", SECCOMP_UP)
async def test_ctypes_fork_and_socket_are_refused(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n(libc.fork(), libc.socket(2, 1, 0), ctypes.get_errno())"
    out = await run(source, mode, monkeypatch)
    assert out.value == (-1, -1, EPERM)


@pytest.mark.parametrize("mode", SECCOMP_UP)
@needs_x86_64
async def test_clone_may_make_threads_only(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """clone3 is ENOSYS (glibc falls back to clone), clone with a namespace flag or without
    CLONE_THREAD is refused, and threads still work."""
    source = (
        SYSCALL
        + """
import threading
done = []
t = threading.Thread(target=done.append, args=(1,))
t.start()
t.join()
(sys_(435, 0, 0), sys_(56, 0x10000000 | 17, 0, 0, 0, 0), sys_(56, 0x00010000 | 0x40000000, 0, 0, 0, 0), done)
"""
    )
    out = await run(source, mode, monkeypatch)
    assert out.value == ((-1, ENOSYS), (-1, EPERM), (-1, ENOSYS), [1]), out.error


DANGEROUS = {
    "io_uring_setup": "sys_(425, 8, ctypes.create_string_buffer(120))",
    "io_uring_register": "sys_(427, 0, 0, 0, 0)",
    "rt_sigqueueinfo(ppid)": "sys_(129, os.getppid(), 0, ctypes.create_string_buffer(128))",
    "rt_tgsigqueueinfo(ppid)": "sys_(297, os.getppid(), os.getppid(), 0, ctypes.create_string_buffer(128))",
    "pidfd_open(ppid)": "sys_(434, os.getppid(), 0)",
    "pidfd_open(self)": "sys_(434, os.getpid(), 0)",
    "pidfd_send_signal": "sys_(424, 0, 0, 0, 0)",
    "pidfd_getfd": "sys_(438, 0, 0, 0)",
    "fchmodat2": "sys_(452, -100, TARGET, 0o777, 0)",
    "chmod": "sys_(90, TARGET, 0o777)",
    "ptrace(attach ppid)": "sys_(101, 16, os.getppid(), 0, 0)",
    "ptrace(traceme)": "sys_(101, 0, 0, 0, 0)",
    "process_vm_readv(self)": "sys_(310, os.getpid(), IOV, 1, IOV, 1, 0)",
    "mount": "sys_(165, b'none', b'/tmp', b'tmpfs', 0, 0)",
    "fsopen": "sys_(430, b'tmpfs', 0)",
    "open_tree": "sys_(428, -100, b'/', 0)",
    "move_mount": "sys_(429, -100, b'/', -100, b'/tmp', 0)",
    "open_by_handle_at": "sys_(304, -100, ctypes.create_string_buffer(136), 0)",
    "bpf": "sys_(321, 0, ctypes.create_string_buffer(128), 128)",
    "perf_event_open": "sys_(298, ctypes.create_string_buffer(128), 0, -1, -1, 0)",
    "userfaultfd": "sys_(323, 0)",
    "keyctl(get keyring)": "sys_(250, 0, -3, 0)",
    "reboot": "sys_(169, 0, 0, 0, 0)",
    "sethostname": "sys_(170, b'pwned', 5)",
    "unshare(user)": "sys_(272, 0x10000000)",
    "setns": "sys_(308, 0, 0)",
    "memfd_create": "sys_(319, b'x', 0)",
    "shmget": "sys_(29, 0, 4096, 0o1600)",
    "kill(ppid, 0)": "sys_(62, os.getppid(), 0)",
    "kill(-1, 0)": "sys_(62, -1, 0)",
    "kill(1, 0)": "sys_(62, 1, 0)",
    "tgkill(ppid)": "sys_(234, os.getppid(), os.getppid(), 0)",
    "setrlimit(as)": "sys_(160, 9, ctypes.create_string_buffer(b'\\xff' * 16, 16))",
    "setsid": "sys_(112)",
    "socket": "sys_(41, 2, 1, 0)",
}
"""Raw syscalls an escape would use, with arguments that make them act if they are allowed."""


def _dangerous_program(target: str) -> str:
    lines = [
        SYSCALL,
        f"TARGET = {target.encode()!r}",
        "buffer = ctypes.create_string_buffer(8)",
        "IOV = (ctypes.c_void_p * 2)(ctypes.cast(buffer, ctypes.c_void_p), 8)",
        "results = {}",
    ]
    lines += [f"results[{name!r}] = {call}" for name, call in DANGEROUS.items()]
    return "\n".join(lines) + "\nresults"


@pytest.mark.parametrize("mode", SECCOMP_UP)
@needs_x86_64
async def test_dangerous_syscalls_are_refused(
    mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every call of the issue's list fails with EPERM, whatever its arguments."""
    target = tmp_path / "host-file"
    target.write_text("host")
    target.chmod(0o600)
    out = await run(_dangerous_program(str(target)), mode, monkeypatch)
    assert out.status == "ok", out.error
    assert out.value == {name: (-1, EPERM) for name in DANGEROUS}
    assert target.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("mode", params("rlimits", hidden_bwrap=False)[-1:])
@needs_x86_64
async def test_without_seccomp_the_probe_sees_the_unprivileged_calls(
    mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The probe above can fail: at ``rlimits`` (no filter) the unprivileged calls go through."""
    out = await run(_dangerous_program(str(tmp_path / "absent")), mode, monkeypatch)
    assert isinstance(out.value, dict)
    for name in (
        "io_uring_setup",
        "pidfd_open(self)",
        "process_vm_readv(self)",
        "memfd_create",
        "unshare(user)",
    ):
        assert out.value[name][0] == "ESCAPED", (name, out.value[name])
    for name in ("reboot", "sethostname", "mount", "setrlimit(as)"):
        assert out.value[name] == (-1, EPERM), name  # no privilege: refused by the kernel itself


@pytest.mark.parametrize("mode", ALL)
async def test_the_guest_holds_no_privilege(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the Host's uid, no group, no capability, no_new_privs, not dumpable. From the
    ``seccomp`` level up ``capget`` itself is refused (its pid sits in a struct the filter
    cannot read: a pid oracle); the Host reads the capability sets from ``/proc`` instead
    (``test_guest_verified``)."""
    source = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
header = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)()
rc = libc.capget(header, data)
rc = rc if rc == 0 else -ctypes.get_errno()
(os.getuid(), os.geteuid(), os.getgid(), os.getgroups(), rc, list(data), libc.prctl(39, 0, 0, 0, 0), libc.prctl(3, 0, 0, 0, 0))
"""
    out = await run(source, mode, monkeypatch)
    assert out.status == "ok", out.error
    uid, euid, gid, groups, rc, caps, no_new_privs, dumpable = out.value  # type: ignore[misc]
    assert (uid, euid, gid) == (65534, 65534, 65534)
    assert groups == [] or os.geteuid() != 0  # an unprivileged Host keeps its own groups
    assert rc == (0 if mode == "rlimits" else -EPERM)
    assert (caps, no_new_privs, dumpable) == ([0] * 6, 1, 0)


@pytest.mark.parametrize("mode", ALL)
async def test_limits_cannot_be_raised(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = "import resource\n" + attempt(
        "resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)"
    )
    out = await run(source, mode, monkeypatch)
    assert out.value in ("PermissionError", "ValueError")


@pytest.mark.parametrize("mode", ALL)
async def test_threads_and_processes_are_bounded(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = """
import threading
threading.stack_size(64 * 1024)  # so the address-space limit is not what stops them
stop = threading.Event()
started = 0
try:
    for _ in range(500):
        threading.Thread(target=stop.wait).start()
        started += 1
except RuntimeError:
    pass
stop.set()
started
"""
    out = await run(source, mode, monkeypatch)
    assert out.status == "ok", out.error
    assert out.isolation is not None
    if not {"cgroup-pids", "process-count-bound"} & set(out.isolation.mechanisms):
        pytest.skip(
            "no pids cgroup the Host may create and no RLIMIT_NPROC that applies (docs/isolation.md)"
        )
    assert isinstance(out.value, int) and 8 <= out.value < GuestLimits().max_processes


@pytest.mark.parametrize("mode", ALL)
async def test_a_setsid_grandchild_does_not_outlive_the_run(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = """
import os, time
r, w = os.pipe()
try:
    pid = os.fork()
except OSError as e:
    result = type(e).__name__
else:
    if pid == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            time.sleep(60)
            os._exit(0)
        os.write(w, str(grandchild).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    result = int(os.read(r, 32))
result
"""
    out = await run(source, mode, monkeypatch)
    if mode in ("rlimits",):
        assert out.isolation is not None
        if "cgroup-kill" not in out.isolation.mechanisms:
            pytest.skip(
                "no cgroup v2 the Host may create: rlimits cannot end a setsid() grandchild (docs/isolation.md)"
            )
        assert isinstance(out.value, int)
        deadline = time.monotonic() + 5
        while _alive(out.value) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert not _alive(out.value)
    else:
        assert out.value == "PermissionError"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


# -- memory that no limit counted ------------------------------------------------------------


@pytest.mark.parametrize("mode", ALL)
async def test_dev_shm_is_not_writable(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the namespaces level ``/dev/shm`` was an unbounded tmpfs (1 GiB written)."""
    name = f"pysolate-hostile-{os.getpid()}"
    source = attempt(f"open('/dev/shm/{name}', 'wb').write(b'x' * (1 << 20))")
    out = await run(source, mode, monkeypatch)
    assert out.value in ("PermissionError", "OSError", "FileNotFoundError")
    assert not os.path.exists(f"/dev/shm/{name}")


@pytest.mark.parametrize("mode", SECCOMP_UP)
async def test_memfd_is_refused(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = await run("import os\n" + attempt("os.memfd_create('x')"), mode, monkeypatch)
    assert out.value == "PermissionError"


@pytest.mark.parametrize("mode", ALL)
async def test_scratch_space_is_bounded(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = "import os\n" + attempt(
        "\n    ".join(
            [
                "for i in range(8):",
                "    with open(f'big{i}', 'wb') as f:",
                "        f.write(b'x' * (32 * 1024 * 1024))",
            ]
        )
    )
    out = await run(source, mode, monkeypatch, memory_bytes=1 << 30)
    assert out.value in ("OSError", "PermissionError", "MemoryError")


# -- network ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", SECCOMP_UP)
async def test_no_socket_not_even_to_the_hosts_loopback(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        out = await run(
            "import socket\n"
            + attempt(f"socket.create_connection(('127.0.0.1', {port}), timeout=2)"),
            mode,
            monkeypatch,
        )
        assert out.value == "PermissionError"
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


@pytest.mark.parametrize("mode", SECCOMP_UP)
async def test_no_unix_socket_of_the_host_is_reachable(
    mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Landlock does not govern pathname unix sockets; the filter does (and abstract ones)."""
    path = str(tmp_path / "host.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()
    listener.setblocking(False)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0pysolate-hostile-{os.getpid()}")
    abstract.listen()
    abstract.setblocking(False)
    try:
        for address in (path, f"\\0pysolate-hostile-{os.getpid()}"):
            source = "import socket\n" + attempt(
                f"socket.socket(socket.AF_UNIX).connect({address!r})"
            )
            out = await run(source, mode, monkeypatch)
            assert out.value == "PermissionError", address
        for sock in (listener, abstract):
            with pytest.raises(BlockingIOError):
                sock.accept()
    finally:
        listener.close()
        abstract.close()


@pytest.mark.parametrize("mode", ALL)
async def test_asyncio_still_runs(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its self-pipe is a local socketpair, which the filter allows."""
    source = "import asyncio\nasync def main():\n    await asyncio.sleep(0.01)\n    return 7\nasyncio.run(main())"
    out = await run(source, mode, monkeypatch)
    assert (out.status, out.value) == ("ok", 7), out.error


# -- files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", FILE_SYSTEM)
async def test_host_files_are_unreadable(
    mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    site = next(iter(_filesystem._site_packages()), None)
    paths = [
        str(secret),
        "/etc/shadow",
        "/etc/passwd",
        "/etc/hostname",
        str(_isolation.PACKAGE_ROOT / "pyproject.toml"),
        os.path.expanduser("~/.bashrc"),
        os.path.join(sys.prefix, "pyvenv.cfg"),
        *([os.path.join(site, "pydantic", "__init__.py")] if site else []),
    ]
    source = (
        f"results = []\nfor p in {paths!r}:\n    try:\n        results.append(open(p).read())\n"
        "    except OSError as e:\n        results.append(type(e).__name__)\n"
        "for d in ['/', '/root', '/etc', '/home', '/tmp', '/var']:\n    try:\n        results.append(__import__('os').listdir(d) if d != '/' else 'listed /')\n"
        "    except OSError as e:\n        results.append(type(e).__name__)\nresults"
    )
    out = await run(source, mode, monkeypatch)
    assert out.status == "ok", out.error
    read, listed = out.value[: len(paths)], out.value[len(paths) :]  # type: ignore[index]
    assert all(r in ("PermissionError", "FileNotFoundError") for r in read), read
    assert SECRET not in repr(out.value)
    assert all(r in ("PermissionError", "FileNotFoundError") for r in listed[1:4]), listed


@pytest.mark.parametrize("mode", params("namespaces", hidden_bwrap=False))
async def test_host_files_are_invisible_in_namespaces(
    mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """bubblewrap hides even their existence (Landlock stops opening, not ``stat``)."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    paths = [
        str(secret),
        "/etc/passwd",
        str(_isolation.PACKAGE_ROOT),
        sys.prefix,
        os.path.expanduser("~/.bashrc"),
    ]
    out = await run(f"import os\n[os.path.exists(p) for p in {paths!r}]", mode, monkeypatch)
    assert out.value == [False] * len(paths)


@pytest.mark.parametrize("mode", params("namespaces", hidden_bwrap=False))
async def test_only_the_needed_package_sources_are_visible(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [
        "/pysolate/pysolate/_guest/child/_child.py",
        "/pysolate/occurrences/plain.py",
        "/pysolate/pysolate/_guest_errors.py",
        "/pysolate/pysolate/_run/_host.py",
        "/pysolate/pysolate/_guest/_process.py",
        "/pysolate/scheduler",
        "/pysolate/pyproject.toml",
        "/etc",
        "/home",
    ]
    out = await run(f"import os\n[os.path.exists(p) for p in {paths!r}]", mode, monkeypatch)
    assert out.value == [True, True, True] + [False] * 6


@pytest.mark.parametrize("mode", FILE_SYSTEM)
async def test_the_interpreters_site_packages_are_unreachable(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = sorted(_filesystem._site_packages())
    out = await run(
        f"import sys\nsys.path += {site!r}\n" + attempt("import pydantic"), mode, monkeypatch
    )
    assert out.value in ("ModuleNotFoundError", "PermissionError")


@pytest.mark.parametrize("mode", FILE_SYSTEM)
async def test_writes_outside_the_scratch_dir_fail_and_scratch_works(
    mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    targets = [
        "/usr/pwned",
        str(_isolation.PACKAGE_ROOT / "occurrences" / "pwned.py"),
        sys.executable + ".pwned",
        "/pwned",
        str(tmp_path / "pwned"),
        "/var/tmp/pysolate-pwned",
        "/dev/pwned",
    ]
    source = "\n".join(
        ["import os", "results = []"]
        + [
            f"try:\n    open({t!r}, 'w').close()\n    results.append('ESCAPED')\nexcept OSError:\n    results.append('refused')"
            for t in targets
        ]
        + [
            "with open('scratch.txt', 'w') as f:\n    f.write('ok')",
            "(results, open('scratch.txt').read())",
        ]
    )
    out = await run(source, mode, monkeypatch)
    assert out.value == (["refused"] * len(targets), "ok"), out.error
    assert not any(os.path.exists(t) for t in targets)


@pytest.mark.parametrize("mode", params("seccomp", hidden_bwrap=False)[-1:])
async def test_without_file_system_isolation_seccomp_forbids_all_file_writes(
    mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    target = tmp_path / "pwned"
    for statement in (
        f"open({str(target)!r}, 'w')",
        f"os.mkdir({str(target)!r})",
        "open('scratch.txt', 'w')",
    ):
        out = await run("import os\n" + attempt(statement), mode, monkeypatch)
        assert out.value == "PermissionError" and not target.exists(), statement


# -- the channel and the proxies -------------------------------------------------------------


@pytest.mark.parametrize("mode", ALL)
async def test_walking_gc_to_the_broker_gains_no_new_method(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reaching the child's own call function by introspection still only reaches granted methods."""
    workspace = Workspace()
    source = """
import gc
guest = next(o for o in gc.get_objects() if type(o).__name__ == '_Guest')
try:
    guest.call('secrets', 'steal', (), {})
    r = 'ESCAPED'
except AttributeError:
    r = 'refused'
(r, guest.call('workspace', 'read_text', ('a',), {}))
"""
    out = await run(source, mode, monkeypatch, workspace)
    assert out.value == ("refused", "granted")
    assert workspace.calls == ["a"]


@pytest.mark.parametrize("mode", ALL)
async def test_no_host_file_descriptor_is_inherited(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only stdin, stdout, stderr and the child's end of the broker socket are open."""
    keep_open = os.open(os.devnull, os.O_RDONLY)  # a Host fd that must not leak
    source = (
        "import os, sys\nopen_fds = []\nfor fd in range(1024):\n    try:\n        os.fstat(fd)\n"
        "        open_fds.append(fd)\n    except OSError:\n        pass\nsorted(set(open_fds) - {0, 1, 2, int(sys.argv[-1])})"
    )
    try:
        out = await run(source, mode, monkeypatch)
    finally:
        os.close(keep_open)
    assert (out.status, out.value) == ("ok", [])


# -- resource abuse --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ALL)
async def test_memory_bomb_is_a_limit(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = await run("x = [0] * 10**10", mode, monkeypatch, memory_bytes=256 * 1024 * 1024)
    assert out.guest_status == "limit" and out.error is not None and out.error.type == "MemoryLimit"


@pytest.mark.parametrize("mode", ALL)
async def test_raw_fd_output_flood_is_a_limit(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = await run(
        "import os\nwhile True:\n    os.write(1, b'x' * 65536)",
        mode,
        monkeypatch,
        output_bytes=100_000,
    )
    assert out.guest_status == "limit" and out.error is not None and out.error.type == "OutputLimit"


@pytest.mark.parametrize("mode", ALL)
async def test_uncatchable_wall_time(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
    out = await run(source, mode, monkeypatch, wall_time=0.3)
    assert (
        out.guest_status == "limit" and out.error is not None and out.error.type == "WallTimeLimit"
    )


@pytest.mark.parametrize("mode", ALL)
async def test_unbounded_c_recursion_crashes_only_the_guest(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1)\nf(0)"
    out = await run(source, mode, monkeypatch, memory_bytes=128 * 1024 * 1024, wall_time=5)
    assert out.guest_status in ("crashed", "error", "limit")
