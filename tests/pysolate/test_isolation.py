"""The Host fails closed: it names its isolation level, and never runs a Guest below it.

``Host(isolation=...)`` is the level every Guest runs at; the default (``"strongest"``)
must include file-system isolation. When the machine cannot give it, ``IsolationUnavailable``
is raised before any source reaches a Guest. Machines without bubblewrap or Landlock are
simulated by replacing the probe's answer.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import anyio
import pytest
from guest_levels import params
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pysolate
from pysolate import Effect, Host, IsolationUnavailable, PysolateError, capability
from pysolate._guest import _isolation, _process, start_subprocess_guest
from pysolate._guest_api import GuestLimits
from pysolate.tracing import OTelInstrument

pytestmark = pytest.mark.anyio


class Docs:
    def __init__(self) -> None:
        self.calls = 0

    @capability(effect=Effect.PURE, version="1")
    def search(self, query: str) -> str:
        self.calls += 1
        return f"found {query}"

    @capability(effect=Effect.LIVE_READ)
    def now(self) -> int:
        self.calls += 1
        return 1


@pytest.fixture
def bare_machine(monkeypatch: pytest.MonkeyPatch) -> _isolation.Machine:
    """This machine without bubblewrap and without Landlock."""
    bare = dataclasses.replace(_isolation.machine(), bwrap=None, landlock_abi=0)
    monkeypatch.setattr(_isolation, "machine", lambda: bare)
    return bare


def test_isolation_unavailable_is_a_public_pysolate_error() -> None:
    assert (
        issubclass(IsolationUnavailable, PysolateError)
        and "IsolationUnavailable" in pysolate.__all__
    )


@pytest.mark.skipif(_isolation.seccomp_library() is None, reason="libseccomp is not installed")
async def test_the_default_host_refuses_without_file_system_isolation(
    bare_machine: _isolation.Machine,
) -> None:
    with pytest.raises(IsolationUnavailable) as raised:
        Host()
    message = str(raised.value)
    assert "bubblewrap" in message and "Landlock" in message and "isolation='seccomp'" in message
    for level in ("namespaces", "landlock"):
        with pytest.raises(IsolationUnavailable, match=level):
            Host(isolation=level)  # type: ignore[arg-type]
    host = Host(isolation="seccomp")  # the explicit opt-in still runs
    host.register("docs", Docs())
    result = await host.run_source("docs.search('x')", speculate=False)
    assert (result.status.value, result.value) == ("ok", "found x")
    assert result.isolation is not None and result.isolation.level == "seccomp"


async def test_no_source_reaches_a_guest_when_the_level_is_missing(
    bare_machine: _isolation.Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The factory refuses too (before it starts any child), for code that bypasses Host()."""
    spawned: list[object] = []
    monkeypatch.setattr(_process.anyio, "open_process", lambda *a, **k: spawned.append(a))
    with pytest.raises(IsolationUnavailable):
        await start_subprocess_guest({"docs": ["search"]}, GuestLimits())
    assert spawned == []


def test_an_unknown_level_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="isolation must be"):
        Host(isolation="chroot")  # type: ignore[arg-type]


def test_root_without_user_namespaces_refuses_every_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """A root Host's Guest must not keep its uid; without user namespaces only bubblewrap can do that."""
    found = dataclasses.replace(_isolation.machine(), bwrap=None, root=True, user_namespaces=False)
    monkeypatch.setattr(_isolation, "machine", lambda: found)
    for level in ("landlock", "seccomp", "rlimits"):
        with pytest.raises(IsolationUnavailable, match="user namespaces"):
            Host(isolation=level)  # type: ignore[arg-type]


def test_a_root_host_whose_interpreter_nobody_may_not_read_refuses_the_levels_outside_bubblewrap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Outside bubblewrap a root Host's Guest is the kernel's ``nobody``: directories on the
    way are covered (``_view.reveal``), but a file nobody may not read stays unreadable."""
    found = dataclasses.replace(
        _isolation.machine(), root=True, unreadable=("/opt/python/lib/python3.11",)
    )
    monkeypatch.setattr(_isolation, "machine", lambda: found)
    for level in ("landlock", "seccomp", "rlimits"):
        with pytest.raises(IsolationUnavailable, match="nobody"):
            Host(isolation=level)  # type: ignore[arg-type]
    assert not any(
        "nobody" in need for need in found.missing("namespaces")
    )  # bubblewrap binds them itself


def test_the_covers_reach_what_nobody_must_read() -> None:
    """The topmost directory nobody may not enter is covered, with the paths beneath it;
    a file nobody may not read is named (a bind cannot change its mode)."""
    import shutil
    import tempfile

    from pysolate._guest.child import _view

    top = tempfile.mkdtemp(dir="/tmp")  # (pytest's tmp_path lies beneath a 0700 directory)
    os.chmod(top, 0o755)
    closed = os.path.join(top, "home")
    os.makedirs(os.path.join(closed, "py", "lib"))
    os.chmod(closed, 0o700)
    secret = os.path.join(closed, "py", "secret.txt")
    with open(secret, "w") as f:
        f.write("x")
    os.chmod(secret, 0o600)
    covers, unreadable = _view.covers([os.path.join(closed, "py", "lib"), secret, "/usr/lib"])
    try:
        assert covers == ((closed, (os.path.join(closed, "py", "lib"), secret)),)
        assert unreadable == (secret,)
    finally:
        shutil.rmtree(top)


@pytest.mark.parametrize("level", params("rlimits", hidden_bwrap=False))
async def test_the_level_is_known_before_a_run_and_is_the_level_that_ran(level: str) -> None:
    host = Host(isolation=level)  # type: ignore[arg-type]
    host.register("docs", Docs())
    before = host.isolation()
    assert before is not None and before.level == level
    result = await host.run_source("docs.search('x')", speculate=False)
    assert result.isolation is not None and result.isolation.level == level
    missing = set(before.mechanisms) - set(result.isolation.mechanisms)
    assert not missing, missing


async def test_the_default_is_the_strongest_level_with_file_system_isolation() -> None:
    isolation = Host().isolation()
    offered = _isolation.machine().levels()
    assert (
        isolation is not None
        and isolation.level == offered[-1]
        and isolation.level in ("namespaces", "landlock")
    )


def test_a_custom_guest_factory_decides_its_own_isolation() -> None:
    from pysolate.testing import in_process_guest

    assert Host(guest_factory=in_process_guest).isolation() is None


@pytest.mark.parametrize("speculate", [False, True])
async def test_the_level_is_recorded_on_the_run_span(speculate: bool) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host = Host(instrument=OTelInstrument(provider))
    host.register("docs", Docs())
    await host.run_source("docs.search('x')", speculate=speculate)
    level = host.isolation()
    assert level is not None
    runs = [s for s in exporter.get_finished_spans() if s.name == "pysolate.run"]
    assert [s.attributes.get("pysolate.isolation") for s in runs] == [level.level]  # type: ignore[union-attr]


@pytest.mark.parametrize("speculate", [False, True])
async def test_a_child_that_cannot_confine_itself_never_runs_the_program(
    speculate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mechanism failing inside the child is IsolationUnavailable, not a weaker run."""
    real = _isolation.Plan.confinement

    def broken(self: _isolation.Plan, *args: object, **kwargs: object) -> dict[str, object]:
        spec = real(self, *args, **kwargs)  # type: ignore[arg-type]
        spec["seccomp"] = {"library": "/nonexistent/libseccomp.so.2", "restrict_files": False}
        return spec

    monkeypatch.setattr(_isolation.Plan, "confinement", broken)
    host = Host(isolation="seccomp")
    docs = Docs()
    host.register("docs", docs)
    with anyio.fail_after(20), pytest.raises(IsolationUnavailable, match="seccomp"):
        await host.run_source("docs.now()", speculate=speculate)  # a live read never runs early
    assert docs.calls == 0


@pytest.mark.skipif(_isolation.machine().landlock_abi < 1, reason="this kernel has no Landlock")
def test_the_cli_prints_the_level_and_the_hidden_bwrap_knob_lowers_it_to_landlock(
    tmp_path: os.PathLike[str],
) -> None:
    program = os.path.join(tmp_path, "agent.py")
    with open(program, "w") as f:
        f.write('docs.search("retry")\n')
    env = {**os.environ, _isolation.HIDE_BWRAP_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pysolate", "run", program, "--rate", "1000"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "isolation" in done.stdout and "landlock" in done.stdout
