"""Weight versions: atomic publication, promotion, rollback to any version or the base."""

from __future__ import annotations

import json

import pytest

from ratchet.contracts import RatchetError
from ratchet.online.versions import VersionStore


def fake_adapter(path, marker: str):
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 8, "marker": marker}))
    (path / "adapter_model.safetensors").write_bytes(marker.encode())
    return path


def test_empty_store_serves_the_base_model(tmp_path) -> None:
    store = VersionStore(tmp_path / "v")
    current = store.current()
    assert current.number == 0 and current.adapter_dir is None and current.lora_gguf is None
    assert store.latest_number() == 0 and [v.number for v in store.list()] == [0]


def test_publish_promote_and_rollback(tmp_path) -> None:
    store = VersionStore(tmp_path / "v")
    gguf = tmp_path / "a.gguf"
    gguf.write_bytes(b"GGUF")
    v1 = store.publish(fake_adapter(tmp_path / "a1", "one"), {"loss": 0.5}, promote=True, lora_gguf=gguf)
    assert v1.number == 1 and store.current().number == 1
    assert v1.lora_gguf is not None and v1.lora_gguf.read_bytes() == b"GGUF"
    assert (v1.adapter_dir / "adapter_model.safetensors").read_bytes() == b"one"
    assert v1.metrics == {"loss": 0.5} and v1.promoted

    v2 = store.publish(fake_adapter(tmp_path / "a2", "two"), {"loss": 0.4}, promote=True)
    assert store.current().number == 2 and v2.lora_gguf is None
    # A refused version is stored, numbered, but not served.
    v3 = store.publish(fake_adapter(tmp_path / "a3", "three"), {"loss": 9.0}, promote=False)
    assert v3.number == 3 and not v3.promoted and store.current().number == 2
    assert store.latest_number() == 3

    assert store.rollback(1).number == 1
    assert store.current().number == 1
    assert (store.current().adapter_dir / "adapter_model.safetensors").read_bytes() == b"one"
    assert store.rollback(0).number == 0 and store.current().adapter_dir is None
    # Rolling forward to a refused version is a person's explicit choice and is recorded.
    assert store.rollback(3).promoted and store.get(3).promoted
    # New versions keep counting after a rollback; nothing is overwritten.
    v4 = store.publish(fake_adapter(tmp_path / "a4", "four"), {}, promote=True)
    assert v4.number == 4 and [v.number for v in store.list()] == [0, 1, 2, 3, 4]
    lines = (tmp_path / "v" / "rollbacks.jsonl").read_text().splitlines()
    assert [json.loads(line)["to"] for line in lines] == [1, 0, 3]


def test_rollback_to_an_unknown_version_is_a_clear_error(tmp_path) -> None:
    store = VersionStore(tmp_path / "v")
    with pytest.raises(RatchetError, match="does not exist"):
        store.rollback(5)


def test_publication_leaves_no_partial_directory(tmp_path) -> None:
    store = VersionStore(tmp_path / "v")
    with pytest.raises(RatchetError):
        store.publish(tmp_path / "missing", {}, promote=True)
    bad = fake_adapter(tmp_path / "bad", "x")
    with pytest.raises(FileNotFoundError):
        store.publish(bad, {}, promote=True, lora_gguf=tmp_path / "nope.gguf")
    assert [p.name for p in (tmp_path / "v").iterdir() if not p.name.startswith(".lock")] == []
    assert store.current().number == 0


def test_a_second_store_on_the_same_directory_sees_the_same_state(tmp_path) -> None:
    writer, reader = VersionStore(tmp_path / "v"), VersionStore(tmp_path / "v")
    writer.publish(fake_adapter(tmp_path / "a1", "one"), {}, promote=True)
    assert reader.current().number == 1
    writer.rollback(0)
    assert reader.current_number() == 0
