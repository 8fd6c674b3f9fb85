"""A published weight version records the base weights it was trained on, so that a model spec
naming it on another base (``local:OTHER@v1``) is refused instead of applying the LoRA to weights it
was not trained for. The loop is the real ``run_trainer_loop``; the trainer a stub (no torch)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from trainable import judged_queue

from ratchet.contracts import RatchetError
from ratchet.models import load_model
from ratchet.models.registry import sha256_file
from ratchet.online.batching import Usable
from ratchet.online.trainer_config import TrainerConfig
from ratchet.online.trainer_loop import run_trainer_loop
from ratchet.online.versions import GGUF_NAME, VersionStore


class UpdatingTrainer:
    """Makes one update per batch and saves a dummy adapter; its base is a small file."""

    version = 0
    usable = staticmethod(Usable.every)

    def __init__(self, base_gguf: Path | None) -> None:
        self.base_gguf = base_gguf

    def step(self, batch):
        return {"updated": True, "samples": len(batch)}

    def save_adapter(self, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        (path / "adapter_config.json").write_text(json.dumps({"r": 4}))
        return path


def train_one_version(tmp_path: Path, base_gguf: Path | None) -> VersionStore:
    queue = judged_queue(tmp_path / "q.db", 2)
    config = TrainerConfig(batch_size=2, min_batch=1, max_wait_s=0.0, poll_interval_s=0.02, convert_gguf=False,
                           kl_samples=0, gate={"builtin": False})
    store, stop, errors = VersionStore(tmp_path / "versions"), threading.Event(), []

    def target() -> None:
        try:
            run_trainer_loop(config, queue.path, store.root, stop, trainer=UpdatingTrainer(base_gguf))
        except Exception as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while store.latest_number() == 0 and not errors and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(30)
    assert errors == [] and store.latest_number() == 1
    return store


def test_a_version_records_its_base_and_another_base_is_refused(tmp_path) -> None:
    base = tmp_path / "base.gguf"
    base.write_bytes(b"GGUF the base")
    store = train_one_version(tmp_path, base)
    assert store.get(1).metrics["base_model"] == {"file": "base.gguf", "sha256": sha256_file(base)}

    # The loop ran without conversion; a converted adapter is what a local: spec loads.
    (store.root / "v000001" / GGUF_NAME).write_bytes(b"GGUF lora")
    assert load_model(f"local:{base}@v1", versions=store.root).config.lora_path == str(store.get(1).lora_gguf)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF another model")
    with pytest.raises(RatchetError, match="was trained on base.gguf"):
        load_model(f"local:{other}@v1", versions=store.root)


def test_a_trainer_without_a_gguf_records_no_base(tmp_path) -> None:
    store = train_one_version(tmp_path, None)
    assert "base_model" not in store.get(1).metrics
