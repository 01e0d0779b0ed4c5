"""The Guest's Landlock ruleset and seccomp allow-list hold a real workload on 3.11-3.13.

Each supported interpreter runs a stdlib workload (threads, asyncio, files, hashing,
sqlite, ctypes, ...) after confining itself with the child's own modules, the filter in
``strict`` mode: any syscall the lists do not name kills the interpreter (SIGSYS), so an
interpreter that needs a new syscall fails here, loudly, and not quietly at a user's site.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pysolate._guest import _isolation
from pysolate._guest.child import _landlock

GUEST = Path(_isolation.PACKAGE_ROOT) / "pysolate" / "_guest" / "child"

CONFINE_AND_WORK = r"""
import importlib, os, sys, sysconfig, types
guest = types.ModuleType('guest')
guest.__path__ = [GUEST]
sys.modules['guest'] = guest
landlock, seccomp, privileges, view, self_pipe = (importlib.import_module('guest.' + name) for name in ('_landlock', '_seccomp', '_privileges', '_view', '_self_pipe'))
import ctypes, json, re, decimal, hashlib, zlib, asyncio, socket, datetime, tempfile, threading, select
import mmap, random, uuid, sqlite3, unicodedata, pickle, struct, concurrent.futures, queue, gc, resource
import fcntl, signal, shutil, pathlib, csv, io, textwrap, locale, time, math, statistics, fractions, itertools
stdlib = sysconfig.get_paths()['stdlib']
site = {sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']}
reads = [os.path.join(stdlib, e) for e in os.listdir(stdlib) if os.path.join(stdlib, e) not in site]
reads += [d for d in ('/usr/lib', '/lib', '/usr/lib64', '/lib64') if os.path.isdir(d)] + ['/dev/urandom']
covers, _ = view.covers([sys.base_prefix, os.path.dirname(GUEST), SCRATCH])
privileges.enter_user_namespace(SCRATCH, 64 << 20, covers if os.geteuid() == 0 else ())
privileges.drop()
landlock.restrict(reads, [SCRATCH, '/dev/null'], version=landlock.abi(), list_only=[stdlib])
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
seccomp.install(LIBRARY, restrict_files=False, strict=True)
self_pipe.install()

import email.parser, html.parser, xml.etree.ElementTree, urllib.parse, base64, difflib, heapq, bisect
def work(n):
    return hashlib.sha256(json.dumps({'n': n, 'd': str(decimal.Decimal(n) / 7)}).encode()).hexdigest()
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    digests = list(pool.map(work, range(64)))
async def main():
    await asyncio.sleep(0.01)
    results = await asyncio.gather(*(asyncio.to_thread(work, n) for n in range(8)))
    return len(results)
assert asyncio.run(main()) == 8
path = os.path.join(SCRATCH, 'f.txt')
with open(path, 'w') as f:
    f.write('x' * 10000)
shutil.copyfile(path, path + '.copy')
os.rename(path + '.copy', path + '.moved')
assert sorted(os.listdir(SCRATCH)) == ['f.txt', 'f.txt.moved']
os.unlink(path + '.moved')
db = sqlite3.connect(':memory:')
db.execute('create table t (x)')
db.executemany('insert into t values (?)', [(i,) for i in range(100)])
assert db.execute('select sum(x) from t').fetchone() == (4950,)
with mmap.mmap(-1, 4096) as m:
    m.write(b'abc')
try:
    socket.socketpair()
    raise SystemExit('made a socketpair')
except PermissionError:
    pass
a, b = os.pipe()
os.write(b, b'ping')
assert select.select([a], [], [], 0)[0] == [a] and os.read(a, 4) == b'ping'
fcntl.fcntl(a, fcntl.F_SETFL, os.O_NONBLOCK)
for command in (fcntl.F_SETOWN, fcntl.F_SETSIG, fcntl.F_SETPIPE_SZ):
    try:
        fcntl.fcntl(a, command, os.getppid())
        raise SystemExit(f'fcntl {command} allowed')
    except PermissionError:
        pass
signal.setitimer(signal.ITIMER_REAL, 0)
time.sleep(0.001)
q = queue.Queue()
t = threading.Thread(target=q.put, args=(1,))
t.start(); t.join()
assert q.get() == 1
assert zlib.decompress(zlib.compress(b'x' * 1000)) == b'x' * 1000
pickle.loads(pickle.dumps({'a': [1, 2.5, None]}))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.fork() == -1 and ctypes.get_errno() == 1
try:
    open('/etc/passwd').read()
    raise SystemExit('read /etc/passwd')
except PermissionError:
    pass
uuid.uuid4(); random.random(); gc.collect(); resource.getrlimit(resource.RLIMIT_AS); os.cpu_count()
datetime.datetime.now().isoformat(); locale.getlocale(); statistics.mean([1, 2, 3])
print('OK', len(digests))
"""


def _interpreters() -> list[object]:
    found = []
    for version in ("3.11", "3.12", "3.13"):
        candidates = sorted(
            glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}"))
        )
        candidates += [shutil.which(f"python{version}") or ""]
        path = next((os.path.realpath(c) for c in candidates if c and "shims" not in c), None)
        reason = f"python{version} is not installed (pyenv install {version})"
        found.append(
            pytest.param(path, id=version, marks=pytest.mark.skipif(path is None, reason=reason))
        )
    return found


@pytest.mark.skipif(_isolation.seccomp_library() is None, reason="libseccomp is not installed")
@pytest.mark.skipif(_landlock.abi() < 1, reason="this kernel has no Landlock")
@pytest.mark.parametrize("python", _interpreters())
def test_a_confined_interpreter_runs_the_stdlib_workload(python: str, tmp_path: Path) -> None:
    preamble = f"GUEST = {str(GUEST)!r}\nSCRATCH = {str(tmp_path)!r}\nLIBRARY = {_isolation.seccomp_library()!r}\n"
    done = subprocess.run(
        [python, "-I", "-S", "-B", "-c", preamble + CONFINE_AND_WORK],
        capture_output=True,
        text=True,
        timeout=120,
        env={},
        cwd=tmp_path,
    )
    assert done.returncode == 0, (
        f"exit {done.returncode} (-31: a syscall outside the allow-list)\n{done.stderr[-3000:]}"
    )
    assert done.stdout.strip() == "OK 64"


@pytest.mark.skipif(_isolation.seccomp_library() is None, reason="libseccomp is not installed")
def test_strict_mode_kills_on_an_unlisted_syscall(tmp_path: Path) -> None:
    """The check above can fail: a syscall outside the lists ends the interpreter."""
    script = (
        f"import importlib, sys, types, ctypes\nguest = types.ModuleType('guest'); guest.__path__ = [{str(GUEST)!r}]\n"
        "sys.modules['guest'] = guest; s = importlib.import_module('guest._seccomp')\n"
        f"s.install({_isolation.seccomp_library()!r}, restrict_files=False, strict=True)\n"
        "ctypes.CDLL(None).syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1))\nprint('survived')"
    )
    done = subprocess.run(
        ["python3", "-I", "-S", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={},
        cwd=tmp_path,
    )
    assert done.returncode == -31 and "survived" not in done.stdout
