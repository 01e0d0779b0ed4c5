"""Hostile programs reach nothing the Host did not grant.

Each test is a program trying one escape. The file-system tests need the namespace
sandbox (bubblewrap); the process, network and environment tests also run at the weaker
``seccomp`` level, which is what a machine without working bubblewrap gets.
"""

from __future__ import annotations

import os
import platform
import socket
import sys

import anyio
import pytest

from pysolate._guest import _isolation, start_subprocess_guest
from pysolate._guest_api import GuestLimits, GuestOutcome

pytestmark = pytest.mark.anyio

CAPS = {"workspace": ["read_text"]}
SECRET = "hunter2-pysolate-fake-secret"

NAMESPACES = _isolation.plan("strongest", 1 << 20).namespaces
needs_namespaces = pytest.mark.skipif(not NAMESPACES, reason="bubblewrap is not installed or user namespaces are disabled")
SECCOMP = _isolation.seccomp_library() is not None
needs_seccomp = pytest.mark.skipif(not SECCOMP, reason="libseccomp is not installed")

LEVELS = [pytest.param("strongest", marks=needs_namespaces), pytest.param("seccomp", marks=needs_seccomp)]


class Tools:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        self.calls.append((capability, method))
        return "granted"


async def run(source: str, isolation: str = "strongest", tools: Tools | None = None, **limits: float) -> GuestOutcome:
    guest = await start_subprocess_guest(CAPS, GuestLimits(**limits), isolation=isolation)  # type: ignore[arg-type]
    try:
        with anyio.fail_after(20):
            return await guest.run(source, tools or Tools())
    finally:
        await guest.aclose()


def attempt(statement: str) -> str:
    """A program that runs ``statement`` and evaluates to 'ESCAPED' or the error class."""
    return f"try:\n    {statement}\n    r = 'ESCAPED'\nexcept BaseException as e:\n    r = type(e).__name__\nr"


# -- environment ---------------------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["strongest", "seccomp", "rlimits"])
async def test_host_environment_does_not_leak(isolation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSOLATE_FAKE_SECRET", SECRET)
    out = await run("import os\ndict(os.environ)", isolation)
    assert out.status == "ok" and SECRET not in repr(out.value)


@needs_namespaces
async def test_no_process_environment_is_readable_through_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSOLATE_FAKE_SECRET", SECRET)
    source = """
import os
seen = b''
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            seen += open(f'/proc/{pid}/environ', 'rb').read()
        except OSError:
            pass
seen
"""
    out = await run(source)
    assert out.status == "ok" and isinstance(out.value, bytes) and SECRET.encode() not in out.value


# -- processes -----------------------------------------------------------------------------


@pytest.mark.parametrize("isolation", LEVELS)
async def test_subprocess_cannot_run(isolation: str) -> None:
    out = await run("import subprocess\n" + attempt("subprocess.run(['/bin/sh', '-c', 'echo pwned'])"), isolation)
    assert out.value != "ESCAPED" and "pwned" not in out.stdout


@pytest.mark.parametrize("isolation", LEVELS)
async def test_fork_and_exec_are_refused(isolation: str) -> None:
    for statement in ("os.fork()", "os.execv('/bin/sh', ['sh', '-c', 'echo pwned'])", "os.posix_spawn('/bin/sh', ['sh'], {})"):
        out = await run("import os\n" + attempt(statement), isolation)
        assert out.value == "PermissionError", statement


@pytest.mark.parametrize("isolation", LEVELS)
async def test_os_system_through_a_subclass_walk_does_nothing(isolation: str) -> None:
    """The smolagents escape (CVE-2025-5120): reach ``os.system`` from ``object``."""
    source = """
rc = None
for cls in ().__class__.__base__.__subclasses__():
    if cls.__name__ == '_wrap_close':
        rc = cls.__init__.__globals__['system']('echo pwned')
rc
"""
    out = await run(source, isolation)
    assert out.status == "ok" and out.value not in (None, 0) and "pwned" not in out.stdout


@pytest.mark.parametrize("isolation", LEVELS)
async def test_ctypes_syscalls_are_refused(isolation: str) -> None:
    source = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
(libc.fork(), libc.socket(2, 1, 0), ctypes.get_errno())
"""
    out = await run(source, isolation)
    assert out.value == (-1, -1, 1)  # EPERM


@pytest.mark.parametrize("isolation", LEVELS)
@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="clone3 is syscall 435 here only")
async def test_clone3_is_enosys_so_threads_still_work(isolation: str) -> None:
    source = """
import ctypes, threading
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.syscall(435, 0, 0)
errno = ctypes.get_errno()
done = []
t = threading.Thread(target=done.append, args=(1,))
t.start()
t.join()
(rc, errno, done)
"""
    out = await run(source, isolation)
    assert out.value == (-1, 38, [1])  # ENOSYS: glibc falls back to clone(CLONE_THREAD)


@pytest.mark.parametrize("isolation", LEVELS)
async def test_other_processes_cannot_be_signalled(isolation: str) -> None:
    for statement in ("os.kill(os.getppid(), 9)", "os.kill(-1, 9)", "os.kill(1, 9)"):
        out = await run("import os\n" + attempt(statement), isolation)
        assert out.value in ("PermissionError", "ProcessLookupError"), statement


@pytest.mark.parametrize("isolation", LEVELS)
async def test_limits_cannot_be_raised(isolation: str) -> None:
    source = "import resource\n" + attempt("resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)")
    out = await run(source, isolation)
    assert out.value in ("PermissionError", "ValueError")


# -- network -------------------------------------------------------------------------------


@pytest.mark.parametrize("isolation", LEVELS)
async def test_no_socket_not_even_to_the_hosts_loopback(isolation: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        out = await run("import socket\n" + attempt(f"socket.create_connection(('127.0.0.1', {port}), timeout=2)"), isolation)
        assert out.value == "PermissionError"
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


# -- files ---------------------------------------------------------------------------------


@needs_namespaces
async def test_host_files_are_invisible(tmp_path: os.PathLike[str]) -> None:
    secret = os.path.join(tmp_path, "secret.txt")
    with open(secret, "w") as f:
        f.write(SECRET)
    work_tree_file = str(_isolation.PACKAGE_ROOT / "pyproject.toml")
    paths = [
        secret, "/etc/passwd", "/etc/shadow", "/etc/hostname", work_tree_file, os.path.expanduser("~/.bashrc"),
        str(_isolation.PACKAGE_ROOT), sys.prefix, os.path.join(sys.prefix, "pyvenv.cfg"),  # the Host's venv
    ]
    source = f"import os\n[os.path.exists(p) for p in {paths!r}]"
    out = await run(source)
    assert out.value == [False] * len(paths)


@needs_namespaces
async def test_only_the_needed_package_sources_are_visible() -> None:
    out = await run("import os\n(sorted(os.listdir('/pysolate')), sorted(os.listdir('/pysolate/pysolate')), os.path.exists('/etc'))")
    assert out.value == (["occurrences", "pysolate"], ["_guest", "_guest_errors.py"], False)


@needs_namespaces
async def test_the_interpreters_site_packages_are_hidden() -> None:
    out = await run(attempt("import pydantic"))
    assert out.value == "ModuleNotFoundError"


@needs_namespaces
async def test_writes_outside_the_scratch_dir_fail_and_scratch_works() -> None:
    targets = ["/usr/pwned", "/pysolate/occurrences/pwned.py", sys.executable + ".pwned", "/pwned"]
    source = "\n".join(
        ["import os", "results = []"]
        + [f"try:\n    open({t!r}, 'w').close()\n    results.append('ESCAPED')\nexcept OSError as e:\n    results.append('refused')" for t in targets]
        + ["with open('scratch.txt', 'w') as f:\n    f.write('ok')", "(results, open('/tmp/scratch.txt').read(), os.getcwd())"]
    )
    out = await run(source)
    assert out.value == (["refused"] * len(targets), "ok", "/tmp")


@needs_namespaces
async def test_scratch_space_is_bounded() -> None:
    out = await run(attempt("open('/tmp/big', 'wb').write(b'x' * (200 * 1024 * 1024))"))
    assert out.value in ("OSError", "MemoryError")


@needs_seccomp
async def test_without_namespaces_seccomp_forbids_all_file_writes(tmp_path: os.PathLike[str]) -> None:
    target = os.path.join(tmp_path, "pwned")
    out = await run("import os\n" + attempt(f"open({target!r}, 'w')"), "seccomp")
    assert out.value == "PermissionError" and not os.path.exists(target)
    out = await run("import os\n" + attempt(f"os.mkdir({target!r})"), "seccomp")
    assert out.value == "PermissionError" and not os.path.exists(target)


# -- the channel and the proxies -------------------------------------------------------------


async def test_walking_gc_to_the_broker_gains_no_new_method() -> None:
    """Reaching the child's own call function by introspection still only reaches granted methods."""
    tools = Tools()
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
    out = await run(source, tools=tools)
    assert out.value == ("refused", "granted")
    assert tools.calls == [("workspace", "read_text")]


@pytest.mark.parametrize("isolation", ["strongest", "seccomp", "rlimits"])
async def test_no_host_file_descriptor_is_inherited(isolation: str) -> None:
    """Only stdin, stdout, stderr and the child's end of the broker socket are open."""
    keep_open = os.open(os.devnull, os.O_RDONLY)  # a Host fd that must not leak
    source = "import os, sys\nfds = {int(fd) for fd in os.listdir('/proc/self/fd')}\nlen(fds - {0, 1, 2, int(sys.argv[-1])})"
    try:
        out = await run(source, isolation)
    finally:
        os.close(keep_open)
    assert (out.status, out.value) == ("ok", 1)  # the one fd listdir itself opened


# -- resource abuse --------------------------------------------------------------------------


async def test_memory_bomb_is_a_limit() -> None:
    out = await run("x = [0] * 10**10", memory_bytes=256 * 1024 * 1024)
    assert out.status == "limit" and out.error is not None and out.error.type == "MemoryLimit"


async def test_raw_fd_output_flood_is_a_limit() -> None:
    out = await run("import os\nwhile True:\n    os.write(1, b'x' * 65536)", output_bytes=100_000)
    assert out.status == "limit" and out.error is not None and out.error.type == "OutputLimit"


async def test_uncatchable_wall_time() -> None:
    source = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
    out = await run(source, wall_time=0.3)
    assert out.status == "limit" and out.error is not None and out.error.type == "WallTimeLimit"


async def test_deep_recursion_is_an_error() -> None:
    out = await run("def f(n):\n    return f(n + 1)\nf(0)")
    assert out.status == "error" and out.error is not None
    assert (out.error.type, out.error.line) == ("RecursionError", 2)


async def test_unbounded_c_recursion_crashes_only_the_guest() -> None:
    source = "import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1)\nf(0)"
    out = await run(source, memory_bytes=128 * 1024 * 1024, wall_time=5)
    assert out.status in ("crashed", "error", "limit")
