"""Crash safety under SIGKILL: what a killed writer leaves is always readable and complete."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from ratchet.store import read_json, read_jsonl

# Rewrites one large JSON document forever, each version checkable on its own (body derives from
# i, sha covers body), so a reader can tell a complete version from a torn one.
WRITER = r"""
import hashlib, sys
from ratchet.store.files import write_json_atomic
path, size, i = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
while True:
    i += 1
    body = (str(i) * (size // len(str(i)) + 1))[:size]
    write_json_atomic(path, {"i": i, "body": body, "sha": hashlib.sha256(body.encode()).hexdigest()})
"""

APPENDER = r"""
import sys
from ratchet.store.files import append_jsonl
path, start = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
i = start
while True:
    append_jsonl(path, {"i": i, "pad": "x" * 200_000})
    i += 1
"""

SIZE = 2_000_000


def _check_complete(record: dict) -> int:
    body = record["body"]
    i = record["i"]
    assert len(body) == SIZE
    assert body == (str(i) * (SIZE // len(str(i)) + 1))[:SIZE]
    assert hashlib.sha256(body.encode()).hexdigest() == record["sha"]
    return i


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_atomic_json_survives_sigkill_at_random_moments(tmp_path: Path) -> None:
    rng = random.Random(1234)
    path = tmp_path / "state.json"
    from ratchet.store.files import write_json_atomic

    body = ("0" * SIZE)[:SIZE]
    write_json_atomic(path, {"i": 0, "body": body, "sha": hashlib.sha256(body.encode()).hexdigest()})
    last = 0
    kills = 40
    for _ in range(kills):
        proc = _start(WRITER, str(path), str(SIZE), str(last))
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        raw = json.loads(path.read_text())  # must parse: never a torn document
        i = _check_complete(read_json(path))
        assert raw["i"] == i >= last  # the old or a newer complete version, never an older one
        last = i
    assert last > 0, "the writer never completed a single version; the test exercised nothing"
    # Temporary files left behind prove kills landed in the middle of a write (between creating
    # the temp file and renaming it), which is exactly the moment a plain write would tear.
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    print(f"kills={kills} last_version={last} mid_write_kills={len(leftovers)}")
    assert leftovers, "no kill landed mid-write; the test did not exercise the dangerous window"
    assert {p.name for p in tmp_path.iterdir()} - {p.name for p in leftovers} == {"state.json"}


def test_jsonl_after_sigkill_reads_whole_records_only(tmp_path: Path) -> None:
    rng = random.Random(99)
    path = tmp_path / "log.jsonl"
    next_i = 0
    for _ in range(10):
        proc = _start(APPENDER, str(path), str(next_i))
        time.sleep(rng.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        records = read_jsonl(path)
        for record in records:
            assert record["pad"] == "x" * 200_000
        numbers = [r["i"] for r in records]
        assert numbers == sorted(numbers)
        next_i = (numbers[-1] + 1) if numbers else 0
    assert next_i > 0
