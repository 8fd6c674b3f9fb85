"""Batch mode over a suite: one run per game, a report per game, resume skips finished games."""

from __future__ import annotations

import re

from ratchet.autoharness.batch import BATCH_KIND, run_suite
from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.executors import LocalExecutor, UnitLost
from ratchet.store import RunStore

GAMES = ["TicTacToe-v0", "Bandit-v0"]


def test_batch_reports_every_game_and_resume_runs_nothing_twice(tmp_path):
    store = RunStore(tmp_path / "runs")
    cfg = AutoHarnessConfig(model="scripted:", iterations=1, eval_steps=4, search_seeds=[0],
                            heldout_seeds=[7], library_dir=str(tmp_path / "lib"))
    cfg.budget.max_calls = 1
    state = run_suite("autoharness-145", cfg, store, None, games=GAMES)
    assert list(state["reports"]) == GAMES
    batch_id = next(r["id"] for r in store.list_runs() if r["kind"] == BATCH_KIND)
    batch = store.open_run(batch_id)
    assert [r["env"] for r in batch.read_json("reports.json")] == GAMES
    assert all(f"| {g} |" in batch.path("table.md").read_text() for g in GAMES)
    game_runs = dict(state["runs"])

    again = run_suite("autoharness-145", cfg, store, None, resume=batch_id)
    assert again["runs"] == game_runs  # no game was started again
    assert len([r for r in store.list_runs() if r["kind"] != BATCH_KIND]) == len(GAMES)


def test_the_same_command_on_the_same_store_carries_on_with_an_unfinished_batch(tmp_path, capsys):
    store = RunStore(tmp_path / "runs")
    cfg = AutoHarnessConfig(model="scripted:", iterations=1, eval_steps=4, search_seeds=[0],
                            heldout_seeds=[7], library_dir=str(tmp_path / "lib"))
    cfg.budget.max_calls = 1
    first = run_suite("autoharness-145", cfg, store, None, games=GAMES)
    batch_id = next(r["id"] for r in store.list_runs() if r["kind"] == BATCH_KIND)
    # As if killed during the second game: its report is missing and the batch is not done.
    batch = store.open_run(batch_id)
    state = batch.load_checkpoint("batch")
    del state["reports"][GAMES[1]]
    batch.checkpoint("batch", state)
    batch.set_status("running")
    again = run_suite("autoharness-145", cfg, store, None, games=GAMES)  # no resume id: found in the store
    assert list(again["reports"]) == GAMES and again["runs"] == first["runs"]
    assert len([r for r in store.list_runs() if r["kind"] == BATCH_KIND]) == 1
    # A finished batch is not resumed, nor one of other games: the same command starts a new one.
    run_suite("autoharness-145", cfg, store, None, games=GAMES)
    run_suite("autoharness-145", cfg, store, None, games=GAMES[:1])
    assert len([r for r in store.list_runs() if r["kind"] == BATCH_KIND]) == 3


def untimed(value):
    """``value`` without its clocks (the engine's report keeps its budget's ``wall_s`` and ``model_s``,
    and a run stopped by its budget says what it spent, seconds included, in ``stop_reason``)."""
    if isinstance(value, dict):
        return {k: untimed(v) if k != "stop_reason" else re.sub(r"\d+(\.\d+)? s\b", "N s", str(v))
                for k, v in value.items() if k not in ("wall_s", "model_s")}
    return value


def test_on_a_pool_each_game_is_one_job_and_the_results_equal_the_in_process_batch(tmp_path):
    def content(root, executor):
        store = RunStore(root / "runs")
        cfg = AutoHarnessConfig(model="scripted:", iterations=1, eval_steps=4, search_seeds=[0],
                                heldout_seeds=[7], library_dir=str(root / "lib"))
        cfg.budget.max_calls = 1
        state = run_suite("autoharness-145", cfg, store, None, games=GAMES, executor=executor)
        reports = {g: {k: untimed(v) for k, v in r.items() if k not in ("run_id", "wall_s", "search")} for g, r in state["reports"].items()}
        runs = {g: sorted((c["id"], c["status"]) for c in store.open_run(state["runs"][g]).candidates()) for g in GAMES}
        return reports, runs, sorted(p.name for p in (root / "lib").rglob("*") if p.is_file())

    here = content(tmp_path / "here", None)
    with LocalExecutor(2) as pool:
        assert content(tmp_path / "pool", pool) == here and here[1][GAMES[0]]


class _LosesOneGame:
    """An executor (the contract :func:`run_games` uses) whose worker always dies on the first game:
    it gives that game up after its retries, as the Ray executor does, and runs the others."""

    in_process = False

    def map(self, fn, items, *, given_up=None):
        for index, job in enumerate(items):
            yield given_up(index, UnitLost(index, 3, "WorkerCrashedError")) if index == 0 else fn(job)


def test_a_game_given_up_by_the_executor_is_recorded_failed_and_the_batch_goes_on(tmp_path):
    store = RunStore(tmp_path / "runs")
    cfg = AutoHarnessConfig(model="scripted:", iterations=1, eval_steps=4, search_seeds=[0],
                            heldout_seeds=[7], library_dir=str(tmp_path / "lib"))
    cfg.budget.max_calls = 1
    state = run_suite("autoharness-145", cfg, store, None, games=GAMES, executor=_LosesOneGame())
    reason = "lost: its worker died on all 3 attempts (WorkerCrashedError)"
    assert state["reports"][GAMES[0]] == {"env": GAMES[0], "status": "not run", "reason": reason}
    assert "search" in state["reports"][GAMES[1]]  # the game after it ran
    assert store.get_run(state["runs"][GAMES[0]])["status"] == "failed"
    batch_id = next(r["id"] for r in store.list_runs() if r["kind"] == BATCH_KIND)
    assert store.get_run(batch_id)["summary"]["failed"] == {GAMES[0]: reason}
    assert reason in store.open_run(batch_id).path("table.md").read_text()


def test_a_batch_stopped_after_its_time_starts_no_new_game_and_carries_on_later(tmp_path):
    store = RunStore(tmp_path / "runs")
    cfg = AutoHarnessConfig(model="scripted:", iterations=1, eval_steps=4, search_seeds=[0],
                            heldout_seeds=[7], library_dir=str(tmp_path / "lib"))
    cfg.budget.max_calls = 1
    first = run_suite("autoharness-145", cfg, store, None, games=GAMES, stop_after_s=0.0)
    assert list(first["reports"]) == []  # the time was up before the first game
    batch_id = next(r["id"] for r in store.list_runs() if r["kind"] == BATCH_KIND)
    assert store.open_run(batch_id).status().get("status") != "done"
    later = run_suite("autoharness-145", cfg, store, None, games=GAMES)
    assert list(later["reports"]) == GAMES and store.open_run(batch_id).status()["status"] == "done"


def test_games_run_on_the_engine_and_a_game_the_removed_search_started_is_reported_not_run(tmp_path):
    from ratchet.autoharness.batch import synthesize_or_report

    store = RunStore(tmp_path / "runs")
    cfg = AutoHarnessConfig(model="scripted:", iterations=1, eval_steps=4, search_seeds=[0],
                            heldout_seeds=[7], library_dir=str(tmp_path / "lib"))
    cfg.budget.max_calls = 1
    engine = run_suite("autoharness-145", cfg, store, None, games=GAMES[:1])
    assert engine["reports"][GAMES[0]]["search"]["on"] == "engine" and engine["reports"][GAMES[0]]["engine"]
    assert store.open_run(engine["runs"][GAMES[0]]).read_jsonl("evolve/events.jsonl")
    # A game's run from a batch the dedicated search (removed) ran: its checkpoint holds the search's tree.
    old = store.create_run("autoharness", cfg.model_dump(), "searched")
    old.checkpoint("autoharness", {"tree": [{"candidate_id": "c1", "parent_id": None, "h": 0.5}], "codes": {}})
    loads = []
    report = synthesize_or_report(cfg, lambda: loads.append(1), old, None)
    assert report["status"] == "not run" and f"run {old.id} was started by the dedicated search" in report["reason"]
    assert loads == [] and not store.open_run(old.id).read_jsonl("evolve/events.jsonl")  # no model loaded, no step run
