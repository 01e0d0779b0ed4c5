"""The isolation a Host reports is what ``/proc`` shows of the Guest, not what the Guest says.

``RunResult.isolation`` and a ``SubprocessGuest``'s ``isolation`` list the mechanisms the
Host read in the child's ``/proc/<pid>`` (``_verify``) plus Landlock and the filter's
contents, which no other process can see. Here the test reads ``/proc`` itself, with its
own parsing, and compares; a child whose library was tampered with (the issue's no-op
``install()`` appended to ``_seccomp.py``) reports the full level and is caught; and a
copy of a real Guest's ``/proc`` with one field changed at a time fails each check.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from guest_levels import params

from pysolate import Host, IsolationMismatch, IsolationUnavailable
from pysolate._guest import _isolation, _process, _verify, start_subprocess_guest
from pysolate._guest_api import GuestLimits

pytestmark = pytest.mark.anyio

CAPS = {"tools": ["echo"]}
LEVELS = params("rlimits", hidden_bwrap=False)
FORKED = params("seccomp", hidden_bwrap=False)


async def echo(
    capability: str, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    return args[0]


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def _limit(pid: int, name: str) -> tuple[str, str]:
    line = next(
        line
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines()
        if line.startswith(name)
    )
    soft, hard = line[len(name) :].split()[:2]
    return soft, hard


def _writable_mounts(pid: int, scratch: str) -> list[str]:
    """The mount points whose uppermost mount (the last listed there) is writable, but the
    scratch. (A root Host's child writes its maps through ``/proc`` before covering it.)"""
    top: dict[str, list[str]] = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        top[fields[4]] = fields[5].split(",")
    return [point for point, options in top.items() if "ro" not in options and point != scratch]


@pytest.mark.parametrize("fork", [True, False], ids=["fork", "spawn"])
@pytest.mark.parametrize("level", LEVELS)
async def test_the_reported_isolation_is_what_proc_shows(level: str, fork: bool) -> None:
    guest = await start_subprocess_guest(CAPS, GuestLimits(), isolation=level, fork_server=fork)  # type: ignore[arg-type]
    try:
        plan = _isolation.plan(level, _process.SCRATCH_BYTES)  # type: ignore[arg-type]
        pid = await _verify.guest_pid(guest._process, plan)
        mechanisms = set(guest.isolation.mechanisms)
        status = _status(pid)
        uids = {int(u) for u in status["Uid"].split()}
        assert (
            ("seccomp-allowlist" in mechanisms)
            == (status["Seccomp"] == "2")
            == (level != "rlimits")
        )
        assert ("no-new-privs" in mechanisms) == (status["NoNewPrivs"] == "1")
        caps = [
            int(status[name], 16) for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
        ]
        assert ("no-capabilities" in mechanisms) == (caps == [0] * 5)
        assert ("not-traced" in mechanisms) == (status["TracerPid"] == "0")
        assert ("open-file-bound" in mechanisms) == (_limit(pid, "Max open files") == ("64", "64"))
        uid_map = Path(f"/proc/{pid}/uid_map").read_text().split()
        assert ("userns-nobody" in mechanisms) == (
            uid_map[0] == "65534" and uid_map[2] == "1" and len(uid_map) == 3
        )
        if level != "namespaces":
            assert ("not-root" in mechanisms) == (0 not in uids)
            assert 0 not in uids and 0 not in {int(u) for u in uid_map}  # uid 0 is never mapped
            assert ("readonly-fs" in mechanisms) == (
                _writable_mounts(pid, guest._scratch or "") == []
            )
            assert uids == ({65534} if os.geteuid() == 0 else {os.getuid()})
        else:
            assert (
                "not-root" not in mechanisms and "readonly-fs" not in mechanisms
            )  # (bubblewrap's mount table)
        if level in ("landlock", "namespaces"):
            assert {
                "landlock-fs",
                "no-exec",
            } <= mechanisms  # the child's report: no one else can see a domain
        assert set(Host(isolation=level).isolation().mechanisms) <= mechanisms  # type: ignore[arg-type,union-attr]
        assert (await guest.run("1", echo)).value == 1
    finally:
        await guest.aclose()


@pytest.fixture
def tampered_library() -> Iterator[Path]:
    """A copy of the child's sources whose ``_seccomp.install`` reports the filter without
    loading it: what an ``rlimits`` run once wrote into the real library."""
    top = Path(tempfile.mkdtemp(prefix="pysolate-tampered-"))
    try:
        for relative in ("occurrences", "pysolate/_guest", "pysolate/_guest_errors.py"):
            source, target = _isolation.PACKAGE_ROOT / relative, top / relative
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, target)
        with open(top / "pysolate" / "_guest" / "child" / "_seccomp.py", "a") as f:
            f.write(
                "\n\ndef install(library_path, *, restrict_files, strict=False):\n"
                "    return ['seccomp-allowlist', 'no-fork', 'no-sockets', 'no-io-uring', 'no-memfd', 'no-sigio']"
                " + (['no-file-writes'] if restrict_files else [])\n"
            )
        for path in [top, *top.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)  # a root Host's Guest is nobody
        yield top
    finally:
        shutil.rmtree(top)


def _run_from(monkeypatch: pytest.MonkeyPatch, library: Path, level: str) -> None:
    real = _isolation.plan(level, _process.SCRATCH_BYTES)  # type: ignore[arg-type]
    tampered = dataclasses.replace(
        real, argv=(*real.argv[:-1], str(library / "pysolate" / "_guest" / "child" / "_child.py"))
    )
    monkeypatch.setattr(_isolation, "planned", lambda choice, scratch_bytes: tampered)


@pytest.mark.skipif("seccomp" not in _isolation.machine().levels(), reason="no seccomp level here")
async def test_a_child_that_reports_a_filter_it_did_not_load_is_refused(
    monkeypatch: pytest.MonkeyPatch, tampered_library: Path
) -> None:
    _run_from(monkeypatch, tampered_library, "seccomp")
    with (
        anyio.fail_after(20),
        pytest.raises(IsolationMismatch, match="seccomp-allowlist") as raised,
    ):
        await start_subprocess_guest(CAPS, GuestLimits(), isolation="seccomp", fork_server=False)
    assert "it reported" in str(raised.value) and isinstance(raised.value, IsolationUnavailable)


@pytest.mark.skipif("seccomp" not in _isolation.machine().levels(), reason="no seccomp level here")
async def test_the_tampered_child_would_run_unfiltered_without_the_check(
    monkeypatch: pytest.MonkeyPatch, tampered_library: Path
) -> None:
    """The test above can fail: trusting the report, the same child starts, says it is
    at ``seccomp`` with the filter, and forks (what the filter refuses)."""
    _run_from(monkeypatch, tampered_library, "seccomp")
    monkeypatch.setattr(
        _verify,
        "verify_started",
        lambda process, pid, plan, limits, scratch, size, reported: tuple(reported),
    )
    guest = await start_subprocess_guest(
        CAPS, GuestLimits(), isolation="seccomp", fork_server=False
    )
    try:
        assert "seccomp-allowlist" in guest.isolation.mechanisms
        out = await guest.run(
            "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)[0] == pid",
            echo,
        )
        assert out.value is True
    finally:
        await guest.aclose()


PROC_FILES = ("status", "uid_map", "gid_map", "setgroups", "limits", "mountinfo")

MUTATIONS = {
    "seccomp-allowlist": ("status", "Seccomp:\t2", "Seccomp:\t0"),
    "no-new-privs": ("status", "NoNewPrivs:\t1", "NoNewPrivs:\t0"),
    "no-capabilities": ("status", "CapEff:\t0000000000000000", "CapEff:\t0000000000000020"),
    "not-traced": ("status", "TracerPid:\t0", "TracerPid:\t1"),
    "not-root": ("status", "Uid:\t65534\t65534\t65534\t65534", "Uid:\t65534\t0\t65534\t65534"),
    "userns-nobody": ("uid_map", "65534", "0"),
    "open-file-bound": (
        "limits",
        "Max open files            64                   64",
        "Max open files            64                   20000",
    ),
    "rlimits": (
        "limits",
        "Max core file size        0                    0",
        "Max core file size        0                    unlimited",
    ),
    "readonly-fs": ("mountinfo", " / / ro,", " / / rw,"),
    "private-proc": (
        "mountinfo",
        "/proc ro,nosuid,nodev,noexec,relatime - tmpfs",
        "/proc ro,nosuid,nodev,noexec,relatime - proc",
    ),
    "bounded-scratch": ("mountinfo", "size=65536k", "size=12334760k"),
}
"""One field of a real Guest's ``/proc`` changed, for each mechanism the Host reads there."""


@pytest.fixture
async def proc_copy(tmp_path: Path) -> tuple[_verify.Expected, int, tuple[str, ...], Path]:
    """A copy of a live seccomp-level Guest's ``/proc/<pid>`` files, the Host's expectation
    of it and what the child reported."""
    if os.geteuid() != 0:
        pytest.skip(
            "a copy made by an unprivileged user is owned by it: not-dumpable cannot hold on it"
        )
    guest = await start_subprocess_guest(
        CAPS, GuestLimits(), isolation="seccomp", fork_server=False
    )
    try:
        pid = guest._process.pid
        (tmp_path / str(pid)).mkdir()
        for name in PROC_FILES:
            (tmp_path / str(pid) / name).write_text(Path(f"/proc/{pid}/{name}").read_text())
        plan = _isolation.plan("seccomp", _process.SCRATCH_BYTES)
        expected = _verify.Expected(
            plan, GuestLimits(), guest._scratch or "", _process.SCRATCH_BYTES, forked=False
        )
        reported = tuple(
            m
            for m in guest.isolation.mechanisms
            if m not in plan.mechanisms and not m.startswith("cgroup-")
        )
    finally:
        await guest.aclose()
    return expected, pid, reported, tmp_path


@pytest.mark.skipif("seccomp" not in _isolation.machine().levels(), reason="no seccomp level here")
@pytest.mark.parametrize("mechanism", sorted(MUTATIONS))
async def test_each_check_fails_on_a_proc_that_shows_otherwise(
    mechanism: str,
    proc_copy: tuple[_verify.Expected, int, tuple[str, ...], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected, pid, reported, copy = proc_copy
    monkeypatch.setattr(_verify, "PROC", str(copy))
    assert set(_verify.verify(expected, pid, reported)) >= set(expected.plan.requires()) - {
        "not-traced"
    } | {"seccomp-allowlist"}
    name, before, after = MUTATIONS[mechanism]
    path = copy / str(pid) / name
    text = path.read_text()
    assert before in text, (name, before)
    path.write_text(text.replace(before, after, 1))
    with pytest.raises(IsolationMismatch, match=mechanism):
        _verify.verify(expected, pid, reported)


@pytest.mark.skipif("seccomp" not in _isolation.machine().levels(), reason="no seccomp level here")
async def test_a_guest_whose_proc_cannot_be_read_is_refused(
    proc_copy: tuple[_verify.Expected, int, tuple[str, ...], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected, pid, reported, copy = proc_copy
    monkeypatch.setattr(_verify, "PROC", str(copy))
    (copy / str(pid) / "limits").unlink()
    with pytest.raises(IsolationMismatch, match="could not read"):
        _verify.verify(expected, pid, reported)
