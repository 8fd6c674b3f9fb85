"""The harness library: the best harness per game, kept in a directory, found again for variants
of the same game (``TicTacToe-v0`` → ``TicTacToe-v0-large``) and for similar games, whose
harnesses seed a new search.

Layout: ``<dir>/<family>/<env_id>.<mode>.py`` (exported, self-contained files) plus
``<dir>/index.json`` mapping ``env_id|mode`` to its provenance. A harness replaces the stored
one only if its score is at least as high.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from platformdirs import user_data_dir

from ratchet.autoharness.export import HARNESS_MARK, export_harness
from ratchet.envs.notes import family_of
from ratchet.store.files import read_json, write_json_atomic


def default_dir() -> Path:
    return Path(os.environ.get("RATCHET_HARNESS_LIBRARY") or Path(user_data_dir("ratchet")) / "harnesses")


def _words(family: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Z][a-z]+|[a-z]+|\d+", family) if len(w) > 2}


class HarnessLibrary:
    """Best harness per (game, mode) in a directory."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root else default_dir()

    def _index(self) -> dict[str, Any]:
        return read_json(self.root / "index.json", {})

    def _write_index(self, index: dict[str, Any]) -> None:
        write_json_atomic(self.root / "index.json", index)

    def add(self, env_id: str, mode: str, code: str, score: float, **provenance: Any) -> bool:
        """Store ``code`` as the harness for ``env_id`` unless a better one is already there."""
        index = self._index()
        key = f"{env_id}|{mode}"
        if key in index and index[key]["score"] > score:
            return False
        path = self.root / family_of(env_id) / f"{env_id}.{mode}.py"
        export_harness(code, path, {"env": env_id, "mode": mode, "score": score, **provenance})
        index[key] = {"env": env_id, "mode": mode, "family": family_of(env_id), "score": score,
                      "path": str(path.relative_to(self.root)), **{k: v for k, v in provenance.items() if isinstance(v, (str, int, float))}}
        self._write_index(index)
        return True

    def withdraw(self, env_id: str, mode: str, *, run_id: str) -> bool:
        """Remove the stored harness for ``env_id`` if run ``run_id`` put it there (a later check
        rejected it); a better harness from another run stays."""
        index = self._index()
        key = f"{env_id}|{mode}"
        entry = index.get(key)
        if not entry or entry.get("run_id") != run_id:
            return False
        (self.root / entry["path"]).unlink(missing_ok=True)
        del index[key]
        self._write_index(index)
        return True

    def code_of(self, entry: dict[str, Any]) -> str:
        """The harness code of a library entry (the part after the exported file's prelude)."""
        text = (self.root / entry["path"]).read_text()
        return text.split(HARNESS_MARK, 1)[1] if HARNESS_MARK in text else text

    def lookup(self, env_id: str, mode: str, limit: int = 2) -> list[dict[str, Any]]:
        """Harnesses to seed a search for ``env_id``, best first: the same game, then variants of
        the same family, then games whose names share a word (TicTacToe ↔ UltimateTicTacToe).
        Each entry has ``env``, ``score`` and ``code``."""
        family = family_of(env_id)
        ranked: list[tuple[int, float, dict[str, Any]]] = []
        for entry in self._index().values():
            if entry["mode"] != mode and not (mode != "policy" and entry["mode"] != "policy"):
                continue
            if entry["env"] == env_id:
                rank = 0
            elif entry["family"] == family:
                rank = 1
            elif _words(family) & _words(entry["family"]) or family.lower() in entry["family"].lower() or entry["family"].lower() in family.lower():
                rank = 2
            else:
                continue
            ranked.append((rank, -entry["score"], entry))
        ranked.sort(key=lambda r: (r[0], r[1]))
        return [{**e, "code": self.code_of(e)} for _, _, e in ranked[:limit]]
