"""The parts of the relayed stores that need no Ray: a version's files as they travel, and the
staleness predicate that travels with a training claim."""

from __future__ import annotations

import pickle

import pytest

from ratchet.contracts import RatchetError
from ratchet.online.queue import TurnQueue, open_queue
from ratchet.online.relayed import read_files, write_files
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
    stale = pickle.loads(pickle.dumps(TooStale(lineage, 2, 4)))
    assert [stale(v) for v in (0, 1, 2)] == [True, False, False]  # 5, 3 and 0 steps behind version 2


def test_open_takes_a_path_or_a_store(tmp_path):
    queue, versions = open_queue(tmp_path / "q.db"), open_versions(str(tmp_path / "v"))
    assert isinstance(queue, TurnQueue) and isinstance(versions, VersionStore)
    assert open_queue(queue) is queue and open_versions(versions) is versions
