"""Atomic JSON files and JSONL logs: round trips, versions, torn lines, concurrent appenders."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from ratchet.contracts import FORMAT_VERSION, RatchetError, StepRecord
from ratchet.store import append_jsonl, read_json, read_jsonl, write_json_atomic
from ratchet.store.files import rewrite_jsonl


def test_json_round_trip_adds_format_version(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.json"
    obj = {"x": 1, "nested": {"y": [1, 2.5, "z"]}, "text": "héllo"}
    write_json_atomic(path, obj)
    assert json.loads(path.read_text())["format_version"] == FORMAT_VERSION
    assert read_json(path) == obj
    assert read_json(path, keep_version=True)["format_version"] == FORMAT_VERSION
    assert "format_version" not in obj  # the caller's dict is not mutated


def test_json_non_mapping_values_are_wrapped(tmp_path: Path) -> None:
    for value in ([1, 2, 3], 42, "text", None):
        write_json_atomic(tmp_path / "v.json", value)
        assert read_json(tmp_path / "v.json", default="missing") == value


def test_json_dataclasses_and_paths(tmp_path: Path) -> None:
    step = StepRecord("e1", 0, 0, "obs", "[4]", True, None, 1.0, 0.1)
    write_json_atomic(tmp_path / "s.json", {"step": step, "where": tmp_path, "tags": {"a"}})
    back = read_json(tmp_path / "s.json")
    assert back["step"]["action"] == "[4]" and back["where"] == str(tmp_path) and back["tags"] == ["a"]


def test_read_json_default_for_missing(tmp_path: Path) -> None:
    assert read_json(tmp_path / "none.json") is None
    assert read_json(tmp_path / "none.json", {"d": 1}) == {"d": 1}


def test_no_temp_files_left_after_normal_writes(tmp_path: Path) -> None:
    for i in range(5):
        write_json_atomic(tmp_path / "f.json", {"i": i})
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.json"
    path.write_text(json.dumps({"format_version": FORMAT_VERSION + 1, "x": 1}))
    with pytest.raises(RatchetError) as info:
        read_json(path)
    assert "format_version" in str(info.value) and "upgrade" in (info.value.hint or "")

    log = tmp_path / "new.jsonl"
    append_jsonl(log, {"ok": 1})
    with log.open("a") as f:
        f.write(json.dumps({"format_version": FORMAT_VERSION + 1, "x": 2}) + "\n")
    with pytest.raises(RatchetError, match="new.jsonl:2"):
        read_jsonl(log)


def test_damaged_json_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"x": ')
    with pytest.raises(RatchetError, match="not valid JSON"):
        read_json(path)


def test_jsonl_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    records = [{"i": i, "text": "line\nbreak"} for i in range(10)]
    for record in records:
        append_jsonl(path, record)
    assert read_jsonl(path) == records
    assert len(path.read_text().splitlines()) == 10  # one line per record, newlines escaped
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_torn_last_line_is_skipped_and_next_append_is_intact(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    append_jsonl(path, {"i": 0})
    append_jsonl(path, {"i": 1})
    full = json.dumps({"format_version": FORMAT_VERSION, "i": 2, "payload": "x" * 100})
    with path.open("a") as f:
        f.write(full[: len(full) // 2])  # what a writer killed mid-append leaves
    assert read_jsonl(path) == [{"i": 0}, {"i": 1}]
    append_jsonl(path, {"i": 3})
    # The torn fragment stays one skipped line; the new record is not glued onto it.
    assert read_jsonl(path) == [{"i": 0}, {"i": 1}, {"i": 3}]


def test_rewrite_jsonl_drops_and_edits(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    for i in range(6):
        append_jsonl(path, {"i": i, "tag": "a" if i % 2 else "b"})
    changed = rewrite_jsonl(path, lambda r: None if r["tag"] == "a" else {**r, "seen": True})
    assert changed == 6
    assert read_jsonl(path) == [{"i": i, "tag": "b", "seen": True} for i in (0, 2, 4)]
    assert rewrite_jsonl(path, lambda r: r) == 0
    assert rewrite_jsonl(tmp_path / "absent.jsonl", lambda r: None) == 0


def _append_many(path: str, worker: int, count: int) -> None:
    for i in range(count):
        append_jsonl(path, {"worker": worker, "i": i, "pad": "p" * (worker * 3000 + 10)})


def test_concurrent_appenders_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), w, 150)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    records = read_jsonl(path)
    assert len(records) == 450
    assert len(path.read_text().splitlines()) == 450  # no damaged lines were skipped
    for w in range(3):
        assert [r["i"] for r in records if r["worker"] == w] == list(range(150))


def test_append_many_is_one_batch(tmp_path: Path) -> None:
    from ratchet.store import append_jsonl_many

    path = tmp_path / "log.jsonl"
    append_jsonl(path, {"i": -1})
    with path.open("a") as f:
        f.write('{"torn":')  # a killed writer's fragment
    assert append_jsonl_many(path, [{"i": i} for i in range(5)]) == 5
    assert append_jsonl_many(path, []) == 0
    assert read_jsonl(path) == [{"i": i} for i in range(-1, 5)]
