"""Every version of a playbook in the run store, recoverable and diffable.

Layout under the run directory (``<run>/context/<name>/``): ``versions/00007.md`` is version 7's
full text, written atomically before its line in ``history.jsonl`` (what changed it: the
operations applied, the problems returned to the curator, the duplicates folded, the trajectory).
A run killed between the two leaves a version file without its line: the learner resumes from the
last version that has its line, relearns that trajectory and writes the file again. The playbook's
own file is saved after both, and a learner that finds the history ahead of it loads the history.
"""

from __future__ import annotations

import difflib
import time
from typing import Any

from ratchet.context.playbook import Playbook, PlaybookError
from ratchet.context.roles import playbook_tokens
from ratchet.store import files
from ratchet.store.run import Run, safe_name

HISTORY = "history.jsonl"


class PlaybookHistory:
    def __init__(self, run: Run, name: str = "playbook") -> None:
        self.run = run
        self.name = safe_name(name, "playbook name")
        self.base = f"context/{self.name}"

    def _version_path(self, version: int) -> str:
        return f"{self.base}/versions/{version:05d}.md"

    def record(self, book: Playbook, entry: dict[str, Any]) -> None:
        """Keep ``book`` as its version with ``entry`` saying how it came to be."""
        files.write_bytes_atomic(self.run.path(self._version_path(book.version)), book.render().encode("utf-8"))
        self.run.append_jsonl(f"{self.base}/{HISTORY}", {"version": book.version, "items": len(book),
                                                          "at": time.time(), **entry})

    def entries(self) -> list[dict[str, Any]]:
        return self.run.read_jsonl(f"{self.base}/{HISTORY}")

    def sizes(self) -> list[dict[str, Any]]:
        """The playbook's size after each learning step: ``step`` (1-based), ``version``, the
        ``trajectory`` learned from, ``items`` and ``tokens`` (what a prompt holding all of it
        pays; read from the version's file where a line written before tokens were recorded
        lacks them)."""
        out, kept = [], set(self.versions())
        for step, entry in enumerate(self.entries(), 1):
            tokens = entry.get("tokens")
            if tokens is None and entry.get("version") in kept:
                tokens = playbook_tokens(self.load(entry["version"]))
            out.append({"step": step, "version": entry.get("version"), "trajectory": entry.get("trajectory"),
                        "items": entry.get("items"), "tokens": tokens})
        return out

    def versions(self) -> list[int]:
        directory = self.run.path(f"{self.base}/versions")
        if not directory.is_dir():
            return []
        return sorted(int(p.stem) for p in directory.glob("*.md") if p.stem.isdigit())

    def load(self, version: int | None = None) -> Playbook:
        """Version ``version`` (the latest when None)."""
        known = self.versions()
        if not known:
            raise PlaybookError(f"run {self.run.id} keeps no versions of playbook {self.name!r}",
                                hint="learn into it first: ratchet context learn --from RUN --playbook PATH")
        version = known[-1] if version is None else version
        if version not in known:
            raise PlaybookError(f"playbook {self.name!r} has no version {version} in run {self.run.id}",
                                hint=f"known versions: {known[0]}..{known[-1]}")
        path = self.run.path(self._version_path(version))
        return Playbook.parse(path.read_text(encoding="utf-8"), str(path))

    def diff(self, old: int, new: int) -> str:
        """A unified diff between two versions' texts."""
        a, b = self.load(old).render(), self.load(new).render()
        return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True),
                                            f"{self.name}@{old}", f"{self.name}@{new}"))
