"""The process ``test_apply_crash`` kills: it applies ``edit``'s changes to a directory.

    python crash_apply_child.py DIR KIND     (KIND: eager | git)

Prints ``go`` (flushed) just before ``apply`` starts, so the killer's clock starts there.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from pysolate import Workspace

FILES = {f"f{i:02d}.txt": f"old {i}\n" * 50 for i in range(60)}
"""The project before: 60 files, of which ``edit`` rewrites 30, deletes 10 and adds 10."""


def new_content(i: int) -> bytes:
    return f"new {i}\n".encode() * 80


async def edit(branch: Workspace) -> Workspace:
    for i in range(30):
        await branch.write_bytes(f"f{i:02d}.txt", new_content(i))
    for i in range(30, 40):
        await branch.delete(f"f{i:02d}.txt")
    for i in range(10):
        await branch.write_bytes(f"added/n{i}.txt", new_content(100 + i))
    return branch


def root(path: Path, kind: str) -> Workspace:
    return Workspace.git(path) if kind == "git" else Workspace.frozen(path)


def main() -> None:
    path, kind = Path(sys.argv[1]), sys.argv[2]
    branch = anyio.run(edit, root(path, kind).for_run())
    print("go", flush=True)
    branch.apply(path)
    print("done", flush=True)


if __name__ == "__main__":
    main()
