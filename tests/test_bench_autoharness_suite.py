"""The 40-game suite's table keeps the committed games whose run store is not here (a fresh
machine): they are carried over, marked, and not run again; a game that failed to run is."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench/ is a package of the checkout

from bench.autoharness_suite import committed_rows, markdown  # noqa: E402

from ratchet.store import RunStore  # noqa: E402

COMMITTED = json.loads((ROOT / "bench" / "results" / "autoharness_suite40.json").read_text())


def test_finished_games_of_a_batch_not_in_the_store_are_kept_and_failed_ones_are_not(tmp_path):
    kept = committed_rows(COMMITTED, RunStore(tmp_path))
    done = {r["env"] for r in COMMITTED["games"] if r["status"] == "done"}
    assert set(kept) == done and "PigDice-v0-long" in kept
    assert not any(r["status"] == "failed" and r["env"] in kept for r in COMMITTED["games"])
    assert all(r["batch_run"] and r["code"] for r in kept.values())


def test_a_game_of_a_batch_in_the_store_is_not_carried_over(tmp_path):
    store = RunStore(tmp_path)
    run = store.create_run("autoharness-batch", {}, "autoharness-40-ratchet")
    mine = {"settings": {**COMMITTED["settings"], "batch_run": run.id},
            "games": [{**r, "batch_run": run.id} for r in COMMITTED["games"]]}
    assert committed_rows(mine, store) == {}


def test_carried_rows_are_marked_and_named_in_the_table(tmp_path):
    kept = committed_rows(COMMITTED, RunStore(tmp_path))
    # a game with no finished row (the committed data may have none left: one is dropped) shows unmarked
    pending = COMMITTED["games"][-1]["env"]
    kept.pop(pending, None)
    settings = {**COMMITTED["settings"], "batch_run": "20990101-000000-autoharness-batch-0000"}
    rows = [kept.get(r["env"]) or {**r, "status": "not run yet", "batch_run": settings["batch_run"]} for r in COMMITTED["games"]]
    text = markdown(settings, COMMITTED["chunks"], rows)
    assert "| PigDice-v0-long † |" in text and f"| {pending} |" in text
    assert COMMITTED["settings"]["batch_run"] in text and "not run again" in text
