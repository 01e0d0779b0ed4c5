"""A workspace branch's own writes over its frozen root: what the branch holds and shows.

``Workspace`` (``_workspace``) is the capability a program calls and the branch's
lifecycle; this is the state beneath it, kept apart so that the one invariant below is
maintained in one place: the files a branch shows are the root's, overridden by what the
branch wrote or deleted, plus the directories those writes created. Each write is
numbered, so a read's view id (``view_id``) changes exactly when a write it could see
does (docs/contract.md, rule 3).

Prior art: overlayfs' upper layer over a read-only lower one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._tree import Root, ancestors, related


@dataclass(slots=True, eq=False)
class Overlay:
    """One branch's writes and deletes over ``tree`` (empty on a root)."""

    tree: Root
    written: dict[str, bytes | None] = field(default_factory=dict)
    """Path -> the content written there, None where deleted. Invariant: the visible tree
    is the root's files overridden by ``written``, plus ``dirs_added``."""
    held: int = 0
    """Bytes of content in ``written`` (``Workspace.held_bytes``)."""
    dirs_added: set[str] = field(default_factory=set)
    touched: dict[str, int] = field(default_factory=dict)
    """Path -> ``seq`` of the last write to it."""
    seq: int = 0

    def copy(self) -> Overlay:
        """An independent copy (a layer's state, or the state a branch adopts)."""
        return Overlay(
            self.tree,
            dict(self.written),
            self.held,
            set(self.dirs_added),
            dict(self.touched),
            self.seq,
        )

    def clear(self) -> None:
        """Drop every write (a discarded branch)."""
        self.written.clear()
        self.held = 0
        self.dirs_added.clear()

    def file(self, p: str) -> bytes | None:
        if p in self.written:
            return self.written[p]
        return self.tree.file(p)

    def is_file(self, p: str) -> bool:
        if p in self.written:
            return self.written[p] is not None
        return self.tree.kind(p) == "file"

    def is_dir(self, p: str) -> bool:
        return p in self.dirs_added or self.tree.kind(p) == "dir"

    def exists(self, p: str) -> bool:
        return self.is_dir(p) or self.is_file(p)

    def visible_dirs(self) -> set[str]:
        return {*self.tree.dirs(), *self.dirs_added}

    def names(self, p: str) -> list[str]:
        """The sorted names in directory ``p`` (a refused name is listed, as the root lists it)."""
        names = set(self.tree.names(p))
        for q in (*self.written, *self.dirs_added):
            parent, _, name = q.rpartition("/")
            if parent == p:
                names.add(name)
        prefix = f"{p}/" if p else ""
        tree = self.tree
        return sorted(
            n for n in names if self.exists(prefix + n) or tree.refused(prefix + n) is not None
        )

    def view_id(self, p: str) -> str:
        """The root id while nothing related to ``p`` was written, else one per such write."""
        last = max((seq for q, seq in self.touched.items() if related(q, p)), default=0)
        return self.tree.root_id if last == 0 else f"{self.tree.root_id}+w{last}"

    def files(self) -> dict[str, bytes]:
        """Path -> content of every file shown, sorted (a lazy or git root's all read)."""
        out = {path: self.tree.file(path) for path in self.tree.files() if path not in self.written}
        for path, data in self.written.items():
            if data is not None:
                out[path] = data
        return {path: data for path, data in sorted(out.items()) if data is not None}

    def changes(self) -> dict[str, bytes | None]:
        """Paths written (content) or deleted (None) that differ from the root, sorted."""
        tree = self.tree
        out: dict[str, bytes | None] = {}
        for path, data in self.written.items():
            if (tree.kind(path) == "file") if data is None else tree.differs(path, data):
                out[path] = data
        return dict(sorted(out.items()))

    def above_a_file(self, p: str) -> bool:
        """Whether a file stands where a directory above ``p`` would be."""
        return any(self.is_file(a) for a in ancestors(p))

    def write(self, p: str, data: bytes) -> None:
        """Record ``data`` at ``p``, with every directory above it that the root lacks."""
        self.dirs_added.update(a for a in ancestors(p) if self.tree.kind(a) != "dir")
        self.record(p, data)

    def record(self, p: str, data: bytes | None) -> None:
        """Record a write (``data``) or a delete (None) at ``p``."""
        self.seq += 1
        self.touched[p] = self.seq
        before = self.written.get(p)
        self.held += (0 if data is None else len(data)) - (0 if before is None else len(before))
        self.written[p] = data
