"""The parts of the relayed stores that need no Ray: a version's files as they travel, the
staleness predicate that travels with a training claim, and the trainer's input files and model
sent to its node."""

from __future__ import annotations

import pickle
import shutil
from types import SimpleNamespace

import pytest

from ratchet.contracts import RatchetError
from ratchet.executors.files import FileServer
from ratchet.online.config import OnlineConfig
from ratchet.online.queue import TurnQueue, open_queue
from ratchet.online.relayed import SentInputs, read_files, write_files
from ratchet.online.versions import GGUF_NAME, Lineage, TooStale, VersionStore, open_versions


def test_a_versions_files_travel_whole_and_stay_inside_their_directory(tmp_path):
    adapter = tmp_path / "adapter"
    (adapter / "sub").mkdir(parents=True)
    (adapter / "adapter_config.json").write_text('{"r": 1}')
    (adapter / "sub" / "w.bin").write_bytes(b"\x00\x01")
    (tmp_path / "a.gguf").write_bytes(b"GGUF")
    files = read_files(adapter, tmp_path / "a.gguf")
    assert files == {"adapter/adapter_config.json": b'{"r": 1}', "adapter/sub/w.bin": b"\x00\x01", GGUF_NAME: b"GGUF"}
    root = write_files(files, tmp_path / "copy" / "v000001")
    assert (root / "adapter" / "sub" / "w.bin").read_bytes() == b"\x00\x01" and (root / GGUF_NAME).read_bytes() == b"GGUF"
    assert write_files({"adapter/x": b"other"}, root) == root and not (root / "adapter" / "x").exists()  # never rewritten
    for bad in ("../escape", "/etc/passwd", "adapter/../../escape"):
        with pytest.raises(RatchetError, match="outside its directory"):
            write_files({bad: b"x"}, tmp_path / "bad" / "v1")
    assert not (tmp_path / "escape").exists() and not list((tmp_path / "bad").iterdir())


def test_the_staleness_predicate_pickles_and_says_what_the_lineage_says():
    lineage = Lineage({1: (0, 2), 2: (1, 3)})
    stale = pickle.loads(pickle.dumps(TooStale(lineage, 2, 1)))
    assert [stale(v) for v in (0, 1, 2)] == [True, False, False]  # 2, 1 and 0 updates behind version 2


def test_open_takes_a_path_or_a_store(tmp_path):
    queue, versions = open_queue(tmp_path / "q.db"), open_versions(str(tmp_path / "v"))
    assert isinstance(queue, TurnQueue) and isinstance(versions, VersionStore)
    assert open_queue(queue) is queue and open_versions(versions) is versions


def test_the_trainers_input_files_and_model_reach_a_node_that_lacks_them(tmp_path, monkeypatch):
    monkeypatch.setenv("RATCHET_CACHE_DIR", str(tmp_path / "node-cache"))
    run = tmp_path / "run"
    run.mkdir()
    for name in ("heldout.jsonl", "guard.jsonl"):
        (run / name).write_text(f'{{"file": "{name}"}}\n')
    (run / "tiny.gguf").write_bytes(b"GGUF" + bytes(1000))
    config = OnlineConfig(model=f"local:{run / 'tiny.gguf'}", trainer={
        "heldout_path": run / "heldout.jsonl", "gate": {"guard_path": run / "guard.jsonl"}})
    stores = SimpleNamespace(files=FileServer(), relay=None)
    inputs = SentInputs.offer(config, stores)
    assert sorted(inputs.files) == ["trainer.gate.guard_path", "trainer.heldout_path"]
    assert inputs.model is not None and inputs.model.size == 1004
    reads: list[str] = []

    def read(sha256, offset, length):
        reads.append(sha256)
        return stores.files.chunk(sha256, offset, length)

    inputs._read = read  # the relay, without Ray
    # The node has the model at the same path: only the small files travel.
    here = inputs.localize(config)
    assert here.resolved_trainer().model == str(run / "tiny.gguf") and inputs.model.sha256 not in reads
    assert here.trainer.heldout_path.read_text() == '{"file": "heldout.jsonl"}\n'
    assert here.trainer.gate.guard_path.read_text() == '{"file": "guard.jsonl"}\n'
    assert here.trainer.heldout_path.parent.parent == tmp_path / "node-cache" / "received"
    # A node that cannot see the run directory (the serving side still reads it from where it went).
    away = tmp_path / "away"
    shutil.move(run, away)
    stores.files.offer(away / "tiny.gguf")
    there = inputs.localize(config)
    assert inputs.model.sha256 in reads
    model = there.resolved_trainer().model
    assert model.startswith(str(tmp_path / "node-cache")) and there.model == f"local:{model}"
    assert open(model, "rb").read() == b"GGUF" + bytes(1000)
    assert there.trainer.heldout_path == here.trainer.heldout_path  # cached: the same content, the same copy


def test_a_setting_naming_a_missing_file_fails_on_the_serving_side(tmp_path):
    config = OnlineConfig(model="local:absent-model-name", trainer={"gate": {"tasks_path": tmp_path / "tasks.jsonl"}})
    with pytest.raises(RatchetError, match="trainer.gate.tasks_path names .*tasks.jsonl, which is not a file") as err:
        SentInputs.offer(config, SimpleNamespace(files=FileServer(), relay=None))
    assert "trainer.gate.tasks_path" in err.value.hint
