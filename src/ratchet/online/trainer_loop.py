"""The training loop: judged samples in, one weight version per update out, until stopped.

It takes batches from the queue (claims with leases), steps the :class:`~ratchet.online.trainer.Trainer`,
asks the evaluation hook whether the new version may be served, and publishes the version (peft
adapter plus its GGUF LoRA) to the version store, which the serving process hot-swaps.
"""

from __future__ import annotations

import functools
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ratchet.online.batching import BatchClock
from ratchet.online.trainer import Trainer
from ratchet.online.trainer_config import TrainerConfig

log = logging.getLogger("ratchet.online.trainer")


def run_trainer_loop(
    config: TrainerConfig,
    queue_path: str | Path,
    versions_dir: str | Path,
    stop_event: threading.Event,
    metrics_sink: Callable[[dict[str, Any]], None] | None = None,
    *,
    trainer: Trainer | None = None,
    hook: Any = None,
) -> None:
    """Train until ``stop_event`` is set: take judged samples, update, evaluate, publish versions.

    Each update becomes a new version (peft adapter + GGUF LoRA). The evaluation hook decides
    whether it is promoted (made current, hence served); a refused version is kept on disk but the
    trainer returns to the weights AND the optimizer state it had before that update, so a refused
    update leaves no trace. A rollback done by someone else (the ``current`` pointer moving to
    another version) is noticed between updates and the trainer reloads that version with a fresh
    optimizer (Adam's moments describe the path to the weights it leaves, not to those it goes to);
    an update that was training when the rollback came is kept unpromoted (it would undo the
    rollback) and its batch trains again from the weights rolled back to.
    A partial batch waits ``max_wait_s`` from its first sample and needs ``min_batch`` samples,
    counted among those the trainer would learn from (:meth:`Trainer.usable`,
    :class:`~ratchet.online.batching.BatchClock`); staleness is counted in updates on the
    version tree (:class:`~ratchet.online.versions.Lineage`). ``metrics_sink`` receives one dict
    per version. ``trainer`` and ``hook`` (an :class:`~ratchet.online.evaluation.EvaluationHook`)
    default to ones built from ``config``.
    """
    from ratchet.online.claims import Claimer, LeaseKeeper
    from ratchet.online.evaluation import EvaluationHook
    from ratchet.online.lora_gguf import convert_adapter
    from ratchet.online.queue import open_queue
    from ratchet.online.versions import TooStale, open_versions

    # Paths, or the serving machine's stores relayed to this one (ratchet.online.relayed).
    store = open_versions(versions_dir)
    queue = open_queue(queue_path)
    trainer = trainer or Trainer.from_config(config)
    if hook is None:
        # Without a held-out file, the gate holds out and scores a share of the queue's conversations.
        hook = EvaluationHook.from_config(config.heldout_path, config.eval_tolerance, gate=config.gate, queue=queue)
    pending: list[Any] = []
    batch: list[Any] = []
    clock = BatchClock(config.batch_size, config.min_batch, config.max_wait_s)

    scratch = Path(tempfile.mkdtemp(prefix="ratchet-train-"))
    # Claims are leases: a claimer of its own (a loop restarted in this process starts afresh) and
    # a thread renewing them while samples wait for a full batch or go through a long step.
    claimer = Claimer.new()
    keeper = LeaseKeeper(queue, claimer, config.claim_lease_s).start()
    try:
        while not stop_event.is_set():
            batch = []
            _follow_current(trainer, store)
            trainer.lineage = store.lineage()
            # Batches count the samples the update would learn from, not those claimed: the others
            # (stale since a rollback, a retry with nothing to teach) ride along with the batch, are
            # dropped by the step and counted in its record, and take no usable sample's place.
            # Assessed once per poll: the trainer's version and lineage stay put until the step.
            usable = trainer.usable(pending)
            room = config.batch_size - len(usable.samples)
            if room > 0:
                taken = queue.take_batch(room, claimer=claimer, lease_s=config.claim_lease_s,
                                         max_reclaims=config.max_reclaims,
                                         stale=TooStale(trainer.lineage, trainer.version, config.max_staleness))
                pending.extend(taken)
                usable = usable.plus(trainer.usable(taken))
            if not clock.due(len(usable.samples)):
                stop_event.wait(config.poll_interval_s)
                continue
            pending = _still_held(queue, claimer, pending)
            if not clock.due(len(usable.among(pending).samples)):
                continue  # a lost lease took some: the rest wait for more
            batch, pending = pending, []
            clock.reset()
            baseline = None
            if hook is not None:
                # The current version, measured before the update (the hook caches by version and
                # reads the held-out turns that came in since).
                baseline = hook.score(trainer)
            # Only a hook can refuse an update; without one there is nothing to return to.
            before = trainer.snapshot() if hook is not None else None
            metrics = trainer.step(batch)
            if not metrics["updated"]:
                queue.mark_trained([s.turn.turn_id for s in batch], trainer.version)
                continue
            record = _version_record(trainer, config, metrics, batch, _base_model(trainer.base_gguf))
            promote = True
            if hook is not None and baseline is not None:
                verdict = hook.evaluate(trainer, baseline)
                record["evaluation"] = verdict
                promote = bool(verdict["promote"])
            adapter = trainer.save_adapter(scratch / "adapter")
            gguf = None
            if config.convert_gguf and trainer.base_gguf is not None:
                gguf = convert_adapter(adapter, trainer.base_gguf, scratch / "adapter.gguf")
            version = store.publish(adapter, record, promote=promote, lora_gguf=gguf, if_current=trainer.version)
            shutil.rmtree(adapter, ignore_errors=True)
            if promote and not version.promoted:
                # Someone rolled back while this update trained: it stays on disk, unserved, and
                # its batch, which no served weights learned from, trains again from the weights
                # rolled back to (loaded with a fresh optimizer at the top of the loop).
                log.warning("v%d not promoted: %s; its %d samples train again", version.number,
                            version.metrics.get("not_promoted"), len(batch))
                pending, batch = batch, []
                record.update(version=version.number, promoted=False,
                              not_promoted=version.metrics.get("not_promoted"))
                if metrics_sink is not None:
                    metrics_sink(record)
                continue
            queue.mark_trained([s.turn.turn_id for s in batch], version.number)
            if promote:
                trainer.version = version.number
            elif before is not None:
                trainer.restore(before)
            record.update(version=version.number, promoted=promote)
            if metrics_sink is not None:
                metrics_sink(record)
    except Exception as exc:
        if batch:
            # Counted as a reclaim with the error as its reason: a sample that fails every step it
            # is in ends up failed instead of crashing every trainer that takes it.
            queue.abandon([s.turn.turn_id for s in batch], f"training step failed: {type(exc).__name__}: {exc}",
                          claimer=claimer, max_reclaims=config.max_reclaims)
        raise
    finally:
        keeper.stop()
        if pending:
            queue.release([s.turn.turn_id for s in pending], claimer=claimer)
        shutil.rmtree(scratch, ignore_errors=True)


def _still_held(queue: Any, claimer: Any, samples: list[Any]) -> list[Any]:
    """The samples whose claim this trainer still holds; one it lost may be in another's batch already."""
    held = queue.held(claimer)
    kept = [s for s in samples if s.turn.turn_id in held]
    if len(kept) < len(samples):
        log.warning("%d claimed samples were reclaimed before training (lease lost); training without them",
                    len(samples) - len(kept))
    return kept


@functools.lru_cache(maxsize=4)  # hashed once per base file, not once per version
def _base_model(gguf: Path | None) -> dict[str, str] | None:
    """The base weights a version's adapter applies to, recorded with it so that a spec naming the
    version on another base (``local:OTHER@v3``) is refused; None for a model not loaded from a GGUF."""
    if gguf is None:
        return None
    from ratchet.online.weights import gguf_sha256

    return {"file": Path(gguf).name, "sha256": gguf_sha256(Path(gguf))}


def _version_record(trainer: Trainer, config: TrainerConfig, metrics: dict[str, Any], batch: Sequence[Any],
                    base: dict[str, str] | None = None) -> dict:
    record = {k: v for k, v in metrics.items() if k != "trained"}
    record["parent_version"] = trainer.version
    record["signal"] = config.signal
    if base is not None:
        record["base_model"] = base
    if config.kl_samples:
        items, _ = trainer.prepare(batch[: config.kl_samples])
        record["kl_to_base"] = trainer.kl_to_base([it.input_ids for it in items], [it.response_start for it in items])
    return record


def _load_version(trainer: Trainer, store: Any, number: int) -> None:
    version = store.get(number)
    if version.adapter_dir is None:
        trainer.reset_to_base()
    else:
        trainer.load_adapter(version.adapter_dir, number)


def _follow_current(trainer: Trainer, store: Any) -> None:
    current = store.current_number()
    if current != trainer.version:
        log.info("current version moved to %d (rollback or another writer): reloading it", current)
        _load_version(trainer, store, current)


__all__ = ["run_trainer_loop"]
