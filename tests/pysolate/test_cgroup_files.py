"""``_cgroup``'s file access: raw writes, a missing controller file remembered per base,
``cgroup.events`` read for ``populated`` (on plain files, so it runs anywhere)."""

from __future__ import annotations

from pathlib import Path

from pysolate._guest import _cgroup


def test_a_write_reaches_the_file_and_a_missing_file_is_not_tried_again(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "pids.max").write_text("")
    assert _cgroup._set(str(first), "pids.max", 64)
    assert (first / "pids.max").read_text() == "64"
    assert not _cgroup._set(str(first), "memory.max", 1 << 20)  # no such controller file: never created
    assert not (first / "memory.max").exists()
    (second / "memory.max").write_text("")
    assert not _cgroup._set(str(second), "memory.max", 1 << 20)  # a sibling of the same base: known absent
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
