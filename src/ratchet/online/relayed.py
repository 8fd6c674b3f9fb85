"""The session queue and the version store of the serving machine, reached from other machines.

The judging and training loops on Ray actors (:class:`~ratchet.online.loops.RayLoops`) are handed
a :class:`RelayedQueue` and a :class:`RelayedVersions` in place of the two paths: each call goes
through a :class:`~ratchet.executors.gateway.Relay` to the serving process, which answers it on its
own :class:`~ratchet.online.queue.TurnQueue` and :class:`~ratchet.online.versions.VersionStore`
(:class:`StoreGateway`). So turns to judge, judgements and training batches travel as actor calls,
trained adapters as objects in Ray's object store, and only the serving machine ever opens the
SQLite file or writes the version directory — its actors need no shared filesystem.

An adapter the trainer publishes, or a version it loads (a rollback moved ``current``), is kept
in a cache directory on the trainer's machine, so the paths in the :class:`Version` it gets back
are paths there. The files the trainer's settings name on the serving machine — the held-out,
guard and task sets, and the model it trains — are sent to its node the same way, chunk by chunk
through the relay and named by their content's hash (:class:`SentInputs`,
:mod:`ratchet.executors.files`), unless the node already has them. ``ray`` is imported where a
call is made (an optional, slow-to-import dependency).
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ratchet.contracts import RatchetError
from ratchet.executors.files import FileServer, SentFile, receive
from ratchet.executors.gateway import Gateway, relay_call
from ratchet.models.registry import model_path
from ratchet.online.claims import Claimer, default_claimer
from ratchet.online.config import OnlineConfig
from ratchet.online.queue import TurnQueue
from ratchet.online.versions import BASE, GGUF_NAME, Lineage, Version, VersionStore
from ratchet.online.weights import gguf_sha256, resolve_gguf

log = logging.getLogger("ratchet.online.relayed")

#: What the loops may ask of the queue; anything else is refused by the serving side.
QUEUE_CALLS = frozenset({"turns_to_judge", "add_judgement", "take_batch", "renew", "held", "mark_trained",
                         "release", "abandon", "reclaim_lost", "stats", "hold_out", "heldout_samples",
                         "corrections", "holdout"})
#: What they may ask of the version store (``files`` and ``publish`` carry the adapters).
VERSION_CALLS = frozenset({"current_number", "latest_number", "lineage", "files", "publish"})

#: A version's files as they travel: path relative to the version directory -> bytes.
Files = dict[str, bytes]


def read_files(adapter_dir: Path, lora_gguf: Path | None) -> Files:
    """An adapter directory (as ``adapter/…``) and its GGUF conversion (as ``adapter.gguf``)."""
    files = {f"adapter/{p.relative_to(adapter_dir).as_posix()}": p.read_bytes()
             for p in sorted(adapter_dir.rglob("*")) if p.is_file()}
    if lora_gguf is not None:
        files[GGUF_NAME] = Path(lora_gguf).read_bytes()
    return files


def write_files(files: Files, root: Path) -> Path:
    """``files`` under ``root`` (made under a temporary name and renamed, so it is whole or absent)."""
    if root.is_dir():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}."))
    for rel, data in files.items():
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RatchetError(f"a version file outside its directory: {rel!r}")
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    try:
        os.rename(tmp, root)
    except OSError:  # another thread of this process wrote it first: the same files
        shutil.rmtree(tmp, ignore_errors=True)
    return root


class StoreGateway(Gateway):
    """The serving side: answers relayed calls on this machine's queue file and version directory.
    ``queue`` and ``versions`` are what to hand the loops; ``answered`` counts the calls answered
    by ``store.method``; ``files`` holds the files offered to the loops' nodes (:class:`SentInputs`)."""

    def __init__(self, ray: Any, queue_path: str | Path, versions_dir: str | Path, threads: int = 4) -> None:
        self._queue = TurnQueue(queue_path)
        self._versions = VersionStore(versions_dir)
        self.files = FileServer()
        self.answered: Counter[str] = Counter()
        super().__init__(ray, self._dispatch, threads)
        self.queue = RelayedQueue(self.relay)
        self.versions = RelayedVersions(self.relay)

    def _dispatch(self, request: tuple[str, str, tuple[Any, ...], dict[str, Any]]) -> Any:
        store, method, args, kwargs = request
        self.answered[f"{store}.{method}"] += 1
        if store == "queue" and method in QUEUE_CALLS:
            return getattr(self._queue, method)(*args, **kwargs)
        if store == "versions" and method == "files":
            return self._files(*args)
        if store == "versions" and method == "publish":
            return self._publish(*args, **kwargs)
        if store == "versions" and method in VERSION_CALLS:
            return getattr(self._versions, method)(*args, **kwargs)
        if store == "files" and method == "chunk":
            return self.files.chunk(*args)
        raise RatchetError(f"the serving process answers no {store}.{method} call")

    def _files(self, number: int) -> tuple[Version, Any]:
        version = self._versions.get(number)
        files = read_files(version.adapter_dir, version.lora_gguf) if version.adapter_dir else {}
        return version, self._ray.put(files)  # the bytes go through the object store, not the relay

    def _publish(self, files_ref: Any, metrics: dict[str, Any], promote: bool, if_current: int | None = None) -> Version:
        with tempfile.TemporaryDirectory(prefix="ratchet-publish-") as tmp:
            root = write_files(self._ray.get(files_ref), Path(tmp) / "version")
            gguf = root / GGUF_NAME
            return self._versions.publish(root / "adapter", metrics, promote=promote,
                                          lora_gguf=gguf if gguf.is_file() else None, if_current=if_current)


def _with_claimer(kwargs: dict[str, Any]) -> dict[str, Any]:
    # A claim defaults to the caller's process, not to the serving process that records it.
    if kwargs.get("claimer") is None:
        kwargs["claimer"] = default_claimer()
    return kwargs


class RelayedQueue:
    """The serving machine's :class:`TurnQueue`, as the loops use it, through the relay. Picklable."""

    def __init__(self, relay: Any) -> None:
        self.relay = relay

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return relay_call(self.relay, ("queue", method, args, kwargs))

    def turns_to_judge(self, limit: int) -> list[Any]:
        return self._call("turns_to_judge", limit)

    def add_judgement(self, judgement: Any) -> None:
        self._call("add_judgement", judgement)

    def take_batch(self, n: int, min_version: int = 0, **kwargs: Any) -> list[Any]:
        """As :meth:`TurnQueue.take_batch`; ``stale`` must pickle (see ``versions.TooStale``)."""
        return self._call("take_batch", n, min_version, **_with_claimer(kwargs))

    def renew(self, claimer: Claimer, lease_s: float) -> int:
        return self._call("renew", claimer, lease_s)

    def held(self, claimer: Claimer | None = None) -> set[str]:
        return self._call("held", **_with_claimer({"claimer": claimer}))

    def mark_trained(self, turn_ids: Any, version: int) -> None:
        self._call("mark_trained", list(turn_ids), version)

    def release(self, turn_ids: Any, claimer: Claimer | None = None) -> int:
        return self._call("release", list(turn_ids), **_with_claimer({"claimer": claimer}))

    def abandon(self, turn_ids: Any, reason: str, claimer: Claimer | None = None, **kwargs: Any) -> int:
        return self._call("abandon", list(turn_ids), reason, **_with_claimer({"claimer": claimer, **kwargs}))

    def reclaim_lost(self, *args: Any) -> int:
        return self._call("reclaim_lost", *args)

    def stats(self) -> dict[str, int]:
        return self._call("stats")

    def hold_out(self, share: float, policy: Any = None) -> int:
        return self._call("hold_out", share, policy)

    def holdout(self) -> dict[str, Any]:
        return self._call("holdout")

    def heldout_samples(self, limit: int = 64) -> list[Any]:
        return self._call("heldout_samples", limit)

    def corrections(self, limit: int = 200) -> list[str]:
        return self._call("corrections", limit)

    def close(self) -> None:
        """Nothing to close here: the serving process holds the connection."""


class RelayedVersions:
    """The serving machine's :class:`VersionStore`, as the trainer uses it, through the relay.

    Adapters travel whole: ``publish`` sends the files, ``get`` brings a version's files into a
    cache directory here (once per version: a published version never changes). Picklable; the
    cache is made on first use where it is used.
    """

    def __init__(self, relay: Any) -> None:
        self.relay = relay
        self._cache: Path | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"relay": self.relay, "_cache": None}

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return relay_call(self.relay, ("versions", method, args, kwargs))

    @property
    def cache(self) -> Path:
        if self._cache is None:
            self._cache = Path(tempfile.mkdtemp(prefix="ratchet-versions-"))
        return self._cache

    def current_number(self) -> int:
        return self._call("current_number")

    def latest_number(self) -> int:
        return self._call("latest_number")

    def lineage(self) -> Lineage:
        return self._call("lineage")

    def _local(self, version: Version, files: Files) -> Version:
        root = write_files(files, self.cache / f"v{version.number:06d}")
        gguf = root / GGUF_NAME
        return replace(version, adapter_dir=root / "adapter" if (root / "adapter").is_dir() else None,
                       lora_gguf=gguf if gguf.is_file() else None)

    def get(self, number: int) -> Version:
        """The version ``number`` with its files here (0: the base model, no files)."""
        import ray  # deferred: optional; a worker that runs this has it loaded

        if number == 0:
            return BASE
        version, files_ref = self._call("files", number)
        return self._local(version, ray.get(files_ref))

    def publish(self, adapter_dir: str | Path, metrics: dict[str, Any], promote: bool,
                lora_gguf: str | Path | None = None, *, if_current: int | None = None) -> Version:
        """As :meth:`VersionStore.publish`: the files go to the serving machine, which stores them."""
        import ray  # deferred: optional; a worker that runs this has it loaded

        adapter_dir = Path(adapter_dir)
        if not (adapter_dir / "adapter_config.json").is_file():
            raise RatchetError(f"{adapter_dir} is not a saved peft adapter (no adapter_config.json)")
        files = read_files(adapter_dir, Path(lora_gguf) if lora_gguf is not None else None)
        version = self._call("publish", ray.put(files), metrics, promote, if_current)
        return self._local(version, files)


# ---------------------------------------------------------------------------------------------
# The files the trainer's settings name, sent to its node
# ---------------------------------------------------------------------------------------------

#: Settings (of :class:`OnlineConfig`) that name a file the training loop reads at its start.
INPUT_SETTINGS = ("trainer.heldout_path", "trainer.gate.guard_path", "trainer.gate.tasks_path")


def _get(config: Any, setting: str) -> Any:
    for part in setting.split("."):
        config = getattr(config, part)
    return config


def _set(config: Any, setting: str, value: Any) -> Any:
    head, _, rest = setting.partition(".")
    return config.model_copy(update={head: _set(getattr(config, head), rest, value) if rest else value})


def _model_here(spec: str, sent: SentFile) -> bool:
    """Whether this machine has the trainer's model as the serving machine has it."""
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        return path.is_file() and path.stat().st_size == sent.size and gguf_sha256(path) == sent.sha256
    try:
        return model_path(spec).stat().st_size == sent.size  # a catalog model, verified against its pinned hash
    except RatchetError:
        return False


@dataclass
class SentInputs:
    """What the trainer's settings name on the serving machine, as its node gets them: each file
    setting's :class:`SentFile` and the model's (None: the serving machine has no such model file,
    so the node must have its own). Picklable: the relay handle and the files' names and hashes."""

    relay: Any
    files: dict[str, SentFile] = field(default_factory=dict)
    model: SentFile | None = None

    @classmethod
    def offer(cls, config: OnlineConfig, stores: StoreGateway) -> SentInputs:
        """Offer ``config``'s input files and model through ``stores``; a setting naming a file
        that is not there is an error here, at the serving side's start, not on a remote node."""
        files = {}
        for setting in INPUT_SETTINGS:
            value = _get(config, setting)
            if value is None:
                continue
            if not Path(value).expanduser().is_file():
                raise RatchetError(f"{setting} names {value}, which is not a file on the serving machine",
                                   hint=f"fix or unset {setting} (--set {setting}=PATH)")
            files[setting] = stores.files.offer(value)
        model = None
        spec = config.resolved_trainer().model
        try:
            gguf = resolve_gguf(spec)
        except RatchetError as exc:
            log.warning("the trainer's model %s is not on the serving machine (%s); its node must have it", spec, exc)
        else:
            model = stores.files.offer(gguf, sha256=gguf_sha256(gguf))
        return cls(stores.relay, files, model)

    def _read(self, sha256: str, offset: int, length: int) -> bytes:
        return relay_call(self.relay, ("files", "chunk", (sha256, offset, length), {}))

    def localize(self, config: OnlineConfig) -> OnlineConfig:
        """``config`` with every sent file's setting naming its copy on this machine (received now
        unless the cache holds that content), and the model's too when this machine lacks it."""
        for setting, sent in self.files.items():
            config = _set(config, setting, receive(sent, self._read))
        spec = config.resolved_trainer().model
        if self.model is not None and not _model_here(spec, self.model):
            log.info("receiving the trainer's model %s (%d MB) from the serving machine", self.model.origin,
                     self.model.size >> 20)
            path = receive(self.model, self._read)
            config = _set(config, "trainer.model", str(path))
            if config.model.startswith("local:"):  # resolved_trainer() takes the served model's file
                config = config.model_copy(update={"model": f"local:{path}"})
        return config


def run_with_inputs(target: str, config: OnlineConfig, inputs: SentInputs, *args: Any) -> Any:
    """Call the loop ``module:function`` as fn(config, *args) with ``config``'s files here (on
    the actor's node); ``args`` end with the loop's stop event."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)(inputs.localize(config), *args)
