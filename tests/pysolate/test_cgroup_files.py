"""``_cgroup``'s file access: raw writes, a missing controller file remembered per base,
``cgroup.events`` read for ``populated`` (on plain files, so it runs anywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pysolate._guest import _cgroup


def test_a_write_reaches_the_file_and_a_missing_file_is_not_tried_again(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "pids.max").write_text("")
    assert _cgroup._set(str(first), "pids.max", 64)
    assert (first / "pids.max").read_text() == "64"
    assert not _cgroup._set(
        str(first), "memory.max", 1 << 20
    )  # no such controller file: never created
    assert not (first / "memory.max").exists()
    (second / "memory.max").write_text("")
    assert not _cgroup._set(
        str(second), "memory.max", 1 << 20
    )  # a sibling of the same base: known absent
    assert (second / "memory.max").read_text() == ""


def test_populated_reads_cgroup_events(tmp_path: Path) -> None:
    group = _cgroup.GuestCgroup(str(tmp_path), None, ("cgroup-kill",))
    (tmp_path / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    assert group.populated()
    (tmp_path / "cgroup.events").write_text("populated 0\nfrozen 0\n")
    assert not group.populated()
    (tmp_path / "cgroup.events").unlink()
    assert not group.populated()  # gone: nothing left in it


def test_kill_writes_one_and_never_raises(tmp_path: Path) -> None:
    group = _cgroup.GuestCgroup(str(tmp_path), None, ("cgroup-kill",))
    group.kill()  # no cgroup.kill file: suppressed
    (tmp_path / "cgroup.kill").write_text("")
    group.kill()
    assert (tmp_path / "cgroup.kill").read_text() == "1"


def _fake_cgroup(directory: Path, *files: str) -> Path:
    directory.mkdir(parents=True)
    for name in ("cgroup.kill", "cgroup.procs", *files):
        (directory / name).write_text("")
    return directory


def test_a_v2_memory_controller_gets_memory_max_no_swap_and_a_whole_tree_oom_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guest = _fake_cgroup(
        tmp_path / "v2" / "guest", "memory.max", "memory.swap.max", "memory.oom.group", "pids.max"
    )
    monkeypatch.setattr(
        _cgroup, "_base", lambda controller="": str(guest.parent) if not controller else None
    )
    monkeypatch.setattr(_cgroup, "_make", lambda base: str(guest) if base else None)
    made = _cgroup.GuestCgroup.create(memory_bytes=1 << 29, max_processes=64)
    assert made is not None and made.mechanisms == ("cgroup-kill", "cgroup-memory", "cgroup-pids")
    assert [
        (guest / name).read_text()
        for name in ("memory.max", "memory.swap.max", "memory.oom.group", "pids.max")
    ] == [str(1 << 29), "0", "1", "64"]
    assert not made.oom_killed()
    (guest / "memory.events").write_text(
        "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n"
    )
    assert made.oom_killed()


def test_without_a_v2_memory_controller_the_v1_one_bounds_memory_and_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hybrid hierarchy (this machine): v2 has neither memory nor pids, v1 has both."""
    v2 = _fake_cgroup(tmp_path / "v2" / "guest")
    memory = _fake_cgroup(
        tmp_path / "memory" / "guest",
        "memory.limit_in_bytes",
        "memory.memsw.limit_in_bytes",
        "memory.oom_control",
    )
    pids = _fake_cgroup(tmp_path / "pids" / "guest", "pids.max")
    dirs = {"": v2, "memory": memory, "pids": pids}
    monkeypatch.setattr(_cgroup, "_base", lambda controller="": str(dirs[controller].parent))
    monkeypatch.setattr(
        _cgroup, "_make", lambda base: str(next(d for d in dirs.values() if str(d.parent) == base))
    )
    made = _cgroup.GuestCgroup.create(memory_bytes=1 << 29, max_processes=64)
    assert made is not None and made.mechanisms == ("cgroup-kill", "cgroup-memory", "cgroup-pids")
    assert (
        (memory / "memory.limit_in_bytes").read_text()
        == (memory / "memory.memsw.limit_in_bytes").read_text()
        == str(1 << 29)
    )
    made.add(4242)
    assert [(d / "cgroup.procs").read_text() for d in (v2, memory, pids)] == ["4242"] * 3
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    assert not made.oom_killed()
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert made.oom_killed()
