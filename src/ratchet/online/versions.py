"""Weight versions: every trained LoRA kept on disk, one of them current, any of them restorable.

Layout under the versions directory::

    current            the number of the version serving should use ("0" = the base model)
    v000001/           one directory per published version, never modified after publication
        adapter/       the peft adapter (adapter_config.json + adapter_model.safetensors)
        adapter.gguf   the same LoRA converted for llama.cpp (absent if conversion was skipped)
        version.json   number, promoted flag, metrics (training loss, KL to base, evaluation)

A version directory is written under a temporary name and renamed into place, and ``current`` is
replaced atomically, so a reader (the serving process hot-swapping adapters) never sees half a
version. Version 0 is the base model: it has no directory and is always available to roll back to.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ratchet.contracts import FORMAT_VERSION, RatchetError

#: The file name of the converted llama.cpp adapter inside a version directory.
GGUF_NAME = "adapter.gguf"


@dataclass(frozen=True)
class Version:
    """One weight version. ``number`` 0 is the base model (no adapter)."""

    number: int
    lora_gguf: Path | None
    adapter_dir: Path | None
    metrics: dict[str, Any] = field(default_factory=dict)
    promoted: bool = True
    created_at: float = 0.0
    #: Why the version was rolled back automatically after it served (its record's ``rolled_back``),
    #: or None.
    rolled_back: str | None = None


BASE = Version(number=0, lora_gguf=None, adapter_dir=None, metrics={}, promoted=True)


@dataclass(frozen=True)
class Lineage:
    """The versions as a tree: each version's parent and the optimizer steps of the update that made it.

    Staleness is measured on this tree, not on version numbers: a refused version takes a number
    but its weights are never trained on, and a rollback moves the trainer back up the tree, so
    the distance in numbers between two versions says nothing about how far apart their weights are.
    It counts updates (edges of the tree), not optimizer steps: why is on
    :attr:`~ratchet.online.trainer_config.TrainerConfig.max_staleness`.
    """

    #: version number -> (parent version number, optimizer steps from the parent's weights to it);
    #: the steps are what the version's record says, kept for people reading it.
    parents: dict[int, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, versions: list[Version]) -> Lineage:
        """From published versions; one written before versions recorded their parent is taken to
        follow the version numbered just before it, by one step."""
        parents = {}
        for v in versions:
            if v.number:
                parent = v.metrics.get("parent_version", v.number - 1)
                parents[v.number] = (int(parent), int(v.metrics.get("optimizer_steps", 1) or 1))
        return cls(parents)

    def staleness(self, served: int, current: int) -> int:
        """Updates the weights ``current`` took since they last had the weights that ``served``
        descends from: 0 for ``current`` itself, one of its ancestors' samples count the updates
        down to ``current``, however many optimizer steps each took; a sample of another branch
        (served before a rollback) counts from the branches' common ancestor. Versions missing from
        the tree fall back to the number distance.
        """
        updates_to_current = {current: 0}
        node, total = current, 0
        while node in self.parents:
            node = self.parents[node][0]
            if node in updates_to_current:  # a malformed record making a cycle: stop where it closes
                break
            total += 1
            updates_to_current[node] = total
        node = served
        seen = set()
        while node not in updates_to_current:
            if node not in self.parents or node in seen:
                return max(0, current - served)
            seen.add(node)
            node = self.parents[node][0]
        return updates_to_current[node]


@dataclass(frozen=True)
class TooStale:
    """Whether a sample served by a version is too stale to train the weights ``current`` on: more
    than ``max_updates`` updates behind on ``lineage``. A value (not a closure over the trainer) so
    that it travels with a claim to a queue on another machine."""

    lineage: Lineage
    current: int
    max_updates: int

    def __call__(self, served: int) -> bool:
        return self.lineage.staleness(served, self.current) > self.max_updates


def open_versions(where: Any) -> Any:
    """The version store at a path, or ``where`` itself when it already is one (the serving
    machine's, relayed: :class:`ratchet.online.relayed.RelayedVersions`)."""
    return VersionStore(where) if isinstance(where, (str, os.PathLike)) else where


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class VersionStore:
    """The versions directory. Safe for one writer (the trainer, or a rollback) and many readers."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ reading

    def _dir(self, number: int) -> Path:
        return self.root / f"v{number:06d}"

    def get(self, number: int) -> Version:
        """The version ``number``; 0 is the base model. Unknown numbers are an error."""
        if number == 0:
            return BASE
        vdir = self._dir(number)
        try:
            meta = json.loads((vdir / "version.json").read_text())
        except (OSError, ValueError):
            known = ", ".join(str(v.number) for v in self.list())
            raise RatchetError(
                f"weight version {number} does not exist in {self.root}",
                hint=f"known versions: {known}",
            ) from None
        gguf = vdir / GGUF_NAME
        adapter = vdir / "adapter"
        return Version(
            number=number,
            lora_gguf=gguf if gguf.is_file() else None,
            adapter_dir=adapter if adapter.is_dir() else None,
            metrics=meta.get("metrics", {}),
            promoted=bool(meta.get("promoted", False)),
            created_at=float(meta.get("created_at", 0.0)),
            rolled_back=(meta.get("rolled_back") or {}).get("reason"),
        )

    def list(self) -> list[Version]:
        """Every version, the base model first, in publication order."""
        numbers = sorted(
            int(p.name[1:]) for p in self.root.glob("v[0-9]*") if p.is_dir() and p.name[1:].isdigit()
        )
        return [BASE, *(self.get(n) for n in numbers)]

    def lineage(self) -> Lineage:
        """Every published version's parent and optimizer steps (see :class:`Lineage`)."""
        return Lineage.of(self.list())

    def latest_number(self) -> int:
        """The highest published number (promoted or not); 0 when nothing was published."""
        return max(v.number for v in self.list())

    def current_number(self) -> int:
        """The number serving should use: cheap to poll (one small file read)."""
        try:
            return int((self.root / "current").read_text().strip())
        except (OSError, ValueError):
            return 0

    def current(self) -> Version:
        """The version serving should use."""
        return self.get(self.current_number())

    # ------------------------------------------------------------------ writing

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        with open(self.root / ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def publish(
        self,
        adapter_dir: str | Path,
        metrics: dict[str, Any],
        promote: bool,
        lora_gguf: str | Path | None = None,
        *,
        if_current: int | None = None,
    ) -> Version:
        """Store a trained adapter as the next version; make it current when ``promote``.

        ``adapter_dir`` is a saved peft adapter; ``lora_gguf`` (optional) its llama.cpp
        conversion. Both are copied, so the caller may reuse its own directories afterwards.
        ``if_current``: promote only if that version is still current, checked under the same
        lock a rollback takes. A trainer passes the version it trained from, so a rollback made
        while it trained is not undone by its promotion; such a version is kept unpromoted, its
        ``metrics["not_promoted"]`` saying why.
        """
        adapter_dir = Path(adapter_dir)
        if not (adapter_dir / "adapter_config.json").is_file():
            raise RatchetError(f"{adapter_dir} is not a saved peft adapter (no adapter_config.json)")
        with self._lock():
            number = self.latest_number() + 1
            current = self.current_number()
            if promote and if_current is not None and current != if_current:
                promote = False
                metrics = {**metrics, "not_promoted": f"trained from v{if_current}, but v{current} was made "
                                                      "current while it trained (a rollback)"}
            tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=f".v{number:06d}."))
            try:
                shutil.copytree(adapter_dir, tmp / "adapter")
                if lora_gguf is not None:
                    shutil.copyfile(lora_gguf, tmp / GGUF_NAME)
                meta = {
                    "format_version": FORMAT_VERSION,
                    "number": number,
                    "promoted": bool(promote),
                    "metrics": metrics,
                    "created_at": time.time(),
                }
                (tmp / "version.json").write_text(json.dumps(meta, indent=2, default=float))
                os.rename(tmp, self._dir(number))
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            if promote:
                _write_atomic(self.root / "current", f"{number}\n")
        return self.get(number)

    def rollback(self, number: int, *, reason: str | None = None, if_current: int | None = None) -> Version:
        """Make version ``number`` current (0 = the base model). Later versions are kept.

        Rolling back to a version that evaluation had refused is allowed (it is the person's call),
        and the version's record then says it was promoted by hand. ``reason`` marks an automatic
        rollback (the served-reward watch): the version left gets ``rolled_back`` in its record with
        the reason, and the log line carries it. ``if_current``: only if that version is still
        current, checked under the lock (a watch that decided on stale numbers does nothing).
        """
        version = self.get(number)
        with self._lock():
            current = self.current_number()
            if if_current is not None and current != if_current:
                return self.get(current)
            if number and not version.promoted:
                vdir = self._dir(number)
                meta = json.loads((vdir / "version.json").read_text())
                meta["promoted"] = True
                meta["promoted_by"] = "rollback"
                _write_atomic(vdir / "version.json", json.dumps(meta, indent=2, default=float))
            at = time.time()
            if reason is not None and current and current != number:
                vdir = self._dir(current)
                meta = json.loads((vdir / "version.json").read_text())
                meta["rolled_back"] = {"to": number, "reason": reason, "at": at}
                _write_atomic(vdir / "version.json", json.dumps(meta, indent=2, default=float))
            _write_atomic(self.root / "current", f"{number}\n")
            self._log_rollback({"to": number, "at": at, "from": current,
                                **({"by": "watch", "reason": reason} if reason is not None else {})})
        return self.get(number)

    def promote(self, number: int, *, by: str) -> Version:
        """Make the published version ``number`` current because a gate outside the training loop
        accepted it (``by`` names that gate; kept in the record as ``promoted_by``). Unlike a
        rollback, no earlier version is marked as left. Promoting the current version again does
        nothing."""
        self.get(number)  # an unknown number is an error naming the known ones
        with self._lock():
            if number and self.current_number() != number:
                vdir = self._dir(number)
                meta = json.loads((vdir / "version.json").read_text())
                meta.update(promoted=True, promoted_by=by)
                _write_atomic(vdir / "version.json", json.dumps(meta, indent=2, default=float))
                _write_atomic(self.root / "current", f"{number}\n")
        return self.get(number)

    def rollbacks(self) -> list[dict[str, Any]]:
        """Every rollback so far, oldest first: ``to``, ``at``, and (when recorded) ``from``, ``by``
        and ``reason``."""
        path = self.root / "rollbacks.jsonl"
        if not path.is_file():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut by a crash mid-append
                continue
        return out

    def _log_rollback(self, entry: dict[str, Any]) -> None:
        # Appending one line is atomic enough for a log that is only read by people and the watch.
        with open(self.root / "rollbacks.jsonl", "a") as handle:
            handle.write(json.dumps(entry) + "\n")
