"""Crash safety of ``branch.apply`` (issue 38): a process applying a run's changes is
SIGKILLed at random instants, many times. After each kill every file is wholly old or
wholly new (absent, for one deleted or added), and the next ``apply`` of the same changes
(a new process's, from the same root) completes: it finishes the interrupted apply or
rolls it back and does its own; nothing of the journal is left behind.

The default run kills ``QUICK_KILLS`` times per root kind; ``pytest -m soak`` kills
``SOAK_KILLS`` times. The instants are drawn over the length of one whole apply, measured
first, so kills land before, during and after it.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from crash_apply_child import FILES, edit, new_content, root
from git_repos import make_repo, snapshot

from pysolate._workspace._journal import journal_path

QUICK_KILLS = 8
"""Kills per root kind in the default run."""

SOAK_KILLS = 150
"""Kills per root kind under the ``soak`` marker."""

CHILD = Path(__file__).with_name("crash_apply_child.py")


def _template(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"template-{kind}"
    if kind == "git":
        make_repo(path, FILES)
    else:
        path.mkdir()
        for name, text in FILES.items():
            (path / name).write_text(text)
    return path


def _allowed(rel: str) -> set[tuple[str, bytes] | None]:
    if rel.startswith("added/"):
        return {None, ("file", new_content(100 + int(rel[7:-4])))}
    i = int(rel[1:3])
    old = ("file", FILES[rel].encode())
    if i < 30:
        return {old, ("file", new_content(i))}
    return {old, None} if i < 40 else {old}


def _check_old_or_new(path: Path) -> bool:
    """Every file wholly old or wholly new; True when all are new (the apply had finished)."""
    seen = {
        k: v for k, v in snapshot(path).items() if not k.startswith(".git") and ".pysolate" not in k
    }
    touched = [*FILES, *(f"added/n{i}.txt" for i in range(10))]
    for rel in touched:
        assert seen.get(rel) in _allowed(rel), (rel, seen.get(rel))
    extra = set(seen) - set(touched) - {"added"}
    assert not extra, extra
    return all(seen.get(rel) == _new(rel) for rel in touched)


def _new(rel: str) -> tuple[str, bytes] | None:
    """What ``edit`` leaves at ``rel``."""
    if rel.startswith("added/"):
        return ("file", new_content(100 + int(rel[7:-4])))
    i = int(rel[1:3])
    return ("file", new_content(i)) if i < 30 else None if i < 40 else ("file", FILES[rel].encode())


def _no_leftovers(path: Path) -> None:
    assert not journal_path(path).exists()
    assert [p for p in path.rglob("*") if ".pysolate" in p.name or "pysolate-apply" in p.name] == []


def _one_apply_seconds(template: Path, tmp_path: Path, kind: str) -> float:
    target = tmp_path / f"calibrate-{kind}"
    shutil.copytree(template, target, symlinks=True)
    with subprocess.Popen(
        [sys.executable, str(CHILD), str(target), kind], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "go"
        start = time.perf_counter()
        assert child.stdout.readline().strip() == "done"
        took = time.perf_counter() - start
    return took


def _kill_and_recover(tmp_path: Path, kind: str, kills: int) -> dict[str, int]:
    template = _template(tmp_path, kind)
    window = 1.5 * _one_apply_seconds(template, tmp_path, kind)
    rng = random.Random(38)
    outcomes = {"finished by the killed process": 0, "completed by the next apply": 0}
    for n in range(kills):
        target = tmp_path / f"{kind}-{n}"
        shutil.copytree(template, target, symlinks=True)
        base = root(target, kind)  # the root the killed process froze too
        with subprocess.Popen(
            [sys.executable, str(CHILD), str(target), kind], stdout=subprocess.PIPE, text=True
        ) as child:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "go"
            time.sleep(rng.uniform(0, window))
            child.send_signal(signal.SIGKILL)
        finished = _check_old_or_new(target)
        if finished and not journal_path(target).exists():
            outcomes["finished by the killed process"] += 1
        else:
            anyio.run(edit, base.for_run()).apply(target)
            assert _check_old_or_new(target), "the next apply left old files"
            outcomes["completed by the next apply"] += 1
        _no_leftovers(target)
        shutil.rmtree(target)
    return outcomes


@pytest.mark.parametrize("kind", ["eager", "git"])
def test_a_killed_apply_leaves_old_or_new_files_and_the_next_one_completes(
    tmp_path: Path, kind: str
) -> None:
    outcomes = _kill_and_recover(tmp_path, kind, QUICK_KILLS)
    assert sum(outcomes.values()) == QUICK_KILLS


@pytest.mark.soak
@pytest.mark.parametrize("kind", ["eager", "git"])
def test_a_killed_apply_soak(tmp_path: Path, kind: str) -> None:
    outcomes = _kill_and_recover(tmp_path, kind, SOAK_KILLS)
    assert sum(outcomes.values()) == SOAK_KILLS
    assert outcomes["completed by the next apply"] > 0  # kills did land inside applies
