"""The run store: every method round-trips, runs resume, the index stays consistent."""

from __future__ import annotations

import pickle
import re
import sqlite3
from pathlib import Path

import pytest

from ratchet.config import Settings
from ratchet.contracts import Candidate, EpisodeSummary, Evaluation, LLMCall, RatchetError, StepRecord
from ratchet.store import SCHEMA_VERSION, Run, RunStore, StoreConfig


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "runs")


def make_run(store: RunStore, kind: str = "autoharness") -> Run:
    return store.create_run(kind, {"env": "TicTacToe-v0", "budget": {"max_calls": 5}}, name="demo")


def step(episode: str, i: int) -> StepRecord:
    return StepRecord(episode, i, i % 2, f"board {i}", f"[{i}]", i != 2, "occupied" if i == 2 else None, None, 0.01)


def test_create_run_layout_and_id(store: RunStore) -> None:
    run = make_run(store, kind="AutoHarness v2")
    assert re.fullmatch(r"\d{8}-\d{6}-autoharness-v2-[0-9a-f]{4}", run.id)
    assert run.dir == store.root / run.id and run.dir.is_dir()
    assert (run.dir / "run.json").is_file() and (store.root / "index.sqlite").is_file()
    assert run.kind == "AutoHarness v2" and run.name == "demo"
    assert run.config == {"env": "TicTacToe-v0", "budget": {"max_calls": 5}}
    assert run.status()["status"] == "running"


def test_run_ids_sort_by_creation_time(store: RunStore) -> None:
    from ratchet.store import new_run_id

    ids = [new_run_id("x", t) for t in (1_700_000_000, 1_700_000_001, 1_800_000_000)]
    assert ids == sorted(ids)


def test_create_run_with_explicit_id_and_duplicate(store: RunStore) -> None:
    run = store.create_run("serve", {}, run_id="my-server")
    assert run.id == "my-server"
    with pytest.raises(RatchetError) as info:
        store.create_run("serve", {}, run_id="my-server")
    assert "open_run" in (info.value.hint or "")


def test_a_run_made_again_under_the_id_of_a_deleted_one_starts_empty(store: RunStore) -> None:
    import shutil

    old = store.create_run("evolve", {"v": 1}, run_id="search")
    old.add_candidate(Candidate.from_files("wf", {"workflow.py": "x = 1\n"}))
    shutil.rmtree(old.dir)  # deleted by hand: its index rows stay behind
    new = store.create_run("evolve", {"v": 2}, run_id="search")
    assert new.candidates() == [] and store.open_run("search").candidates() == []
    assert [(r["id"], r["candidates"]) for r in store.list_runs()] == [("search", 0)]


def test_config_may_be_a_settings_model(store: RunStore) -> None:
    class Cfg(Settings):
        root: Path = Path("/x")
        """A path."""

    run = store.create_run("k", Cfg())
    assert run.config == {"root": "/x"}


def test_write_and_read_json_and_jsonl(store: RunStore) -> None:
    run = make_run(store)
    run.write_json("notes/a.json", {"x": [1, 2]})
    assert run.read_json("notes/a.json") == {"x": [1, 2]}
    assert run.read_json("notes/missing.json", default={}) == {}
    run.append_jsonl("log.jsonl", {"i": 1})
    run.append_jsonl("log.jsonl", {"i": 2})
    assert run.read_jsonl("log.jsonl") == [{"i": 1}, {"i": 2}]
    for bad in ("../escape.json", "/abs.json", "a/../../b.json"):
        with pytest.raises(RatchetError):
            run.write_json(bad, {})


def test_candidates_round_trip_with_lineage(store: RunStore) -> None:
    run = make_run(store)
    root = Candidate.from_files("harness", {"harness.py": "def ok(): return True\n"}, prompt="p0")
    child = Candidate.from_files("harness", {"harness.py": "def ok(): return 1\n", "lib/x.py": "X=1"}, parent_id=root.id)
    run.add_candidate(root)
    run.add_candidate(child, status="evaluating")
    run.add_candidate(root, status="ignored")  # idempotent: nothing changes
    rows = run.candidates()
    assert [r["id"] for r in rows] == [root.id, child.id]
    assert rows[0]["status"] == "proposed" and rows[1]["parent_id"] == root.id
    assert run.get_candidate(child.id) == child
    assert run.get_candidate(root.id).meta == {"prompt": "p0"}
    assert (run.dir / "candidates" / child.id / "files" / "lib" / "x.py").read_text() == "X=1"

    run.set_candidate_status(child.id, "accepted", score=0.75)
    run.set_candidate_status(child.id, "best")  # score kept
    row = {r["id"]: r for r in run.candidates()}[child.id]
    assert (row["status"], row["score"]) == ("best", 0.75)
    with pytest.raises(RatchetError):
        run.set_candidate_status("nope", "accepted")
    with pytest.raises(RatchetError):
        run.get_candidate("nope")


def test_candidate_file_names_cannot_escape(store: RunStore) -> None:
    run = make_run(store)
    with pytest.raises(RatchetError):
        run.add_candidate(Candidate.from_files("harness", {"../evil.py": "x"}))


def test_evaluations_round_trip(store: RunStore) -> None:
    run = make_run(store)
    c = Candidate.from_files("harness", {"h.py": "a"})
    run.add_candidate(c)
    e1 = Evaluation(c.id, "search", 0.5, {"legal_rate": 0.9}, {"seed-0": 1.0}, [{"step": 3, "why": "occupied"}])
    e2 = Evaluation(c.id, "heldout", 0.4, created_at=e1.created_at + 1)
    run.add_evaluation(e1)
    run.add_evaluation(e1)  # same record: stored once
    run.add_evaluation(e2)
    evals = run.evaluations(c.id)
    assert [e["split"] for e in evals] == ["search", "heldout"]
    assert evals[0]["per_task"] == {"seed-0": 1.0} and evals[0]["failures"][0]["why"] == "occupied"
    assert run.evaluations() == evals
    assert run.evaluations("other") == []
    assert store.get_run(run.id)["evaluations"] == 2


def test_episodes_and_steps(store: RunStore) -> None:
    run = make_run(store)
    with run.step_writer("ep-1") as writer:
        for i in range(4):
            writer.write(step("ep-1", i))
        assert writer.count == 4
        # Each step is on disk the moment it is written, before the writer closes.
        assert len(run.steps("ep-1")) == 4
    steps = run.steps("ep-1")
    assert [s["index"] for s in steps] == [0, 1, 2, 3]
    assert steps[2]["legal"] is False and steps[2]["illegal_reason"] == "occupied"

    summary = EpisodeSummary("ep-1", "TicTacToe-v0", 3, "harness:abc", 4, 1, {0: 1.0, 1: -1.0}, False, 0.5)
    run.add_episode(summary)
    episodes = run.episodes()
    assert len(episodes) == 1 and episodes[0]["rewards"] == {0: 1.0, 1: -1.0}
    assert store.get_run(run.id)["episodes"] == 1

    # A resumed run replays an interrupted episode from its first step.
    with run.step_writer("ep-1") as writer:
        writer.write(step("ep-1", 0))
    assert len(run.steps("ep-1")) == 1
    with run.step_writer("ep-1", restart=False) as writer:
        writer.write(step("ep-1", 1))
    assert len(run.steps("ep-1")) == 2
    with run.step_writer("ep-2") as writer:
        writer.write_many([step("ep-2", i) for i in range(3)])
        assert writer.count == 3
    assert [s["index"] for s in run.steps("ep-2")] == [0, 1, 2]
    run.add_episode(summary)  # re-added: one row, one episode
    assert len(run.episodes()) == 1 and store.get_run(run.id)["episodes"] == 1


def test_llm_calls_and_totals(store: RunStore) -> None:
    run = make_run(store)
    assert run.llm_totals()["calls"] == 0
    run.record_llm_call(LLMCall("local:q", "refine", 100, 20, 1.5, True, cost_usd=0.01))
    run.record_llm_call(LLMCall("local:q", "refine", 50, 10, 0.5, False, error="timeout"))
    run.record_llm_call(LLMCall("local:q", "critic", 10, 5, 0.25, True))
    totals = run.llm_totals()
    assert totals == {
        "calls": 3, "errors": 1, "prompt_tokens": 160, "completion_tokens": 35, "total_tokens": 195,
        "latency_s": pytest.approx(2.25), "cost_usd": pytest.approx(0.01),
    }
    breakdown = run.llm_breakdown()
    assert breakdown["refine"]["calls"] == 2 and breakdown["critic"]["prompt_tokens"] == 10
    assert len(run.read_jsonl("llm_calls.jsonl")) == 3  # also on disk, the source of truth


def test_status_and_summary(store: RunStore) -> None:
    run = make_run(store)
    run.set_status("running", {"iteration": 3})
    run.set_status("budget_exhausted")  # summary kept
    info = store.get_run(run.id)
    assert info["status"] == "budget_exhausted" and info["summary"] == {"iteration": 3}
    run.set_status("done", {"best": 0.9})
    assert store.get_run(run.id)["summary"] == {"best": 0.9}
    with pytest.raises(RatchetError) as excinfo:
        run.set_status("finished")
    assert "done" in (excinfo.value.hint or "")


def test_checkpoints(store: RunStore) -> None:
    run = make_run(store)
    assert run.load_checkpoint("search") is None
    run.checkpoint("search", {"frontier": ["a", "b"], "iteration": 4})
    run.checkpoint("search", {"frontier": ["a", "b", "c"], "iteration": 5})
    assert run.load_checkpoint("search") == {"frontier": ["a", "b", "c"], "iteration": 5}
    run.checkpoint("rng", [1, 2, 3])
    assert run.load_checkpoint("rng") == [1, 2, 3]


def test_resume_with_open_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    first = RunStore(root)
    run = make_run(first)
    c = Candidate.from_files("harness", {"h.py": "x"})
    run.add_candidate(c)
    run.set_candidate_status(c.id, "accepted", 0.6)
    run.record_llm_call(LLMCall("m", "refine", 1, 2, 0.1, True))
    run.checkpoint("search", {"iteration": 7})
    run.set_status("stopped", {"why": "interrupted"})
    del run, first

    again = RunStore(root)  # a new process would see exactly this
    resumed = again.open_run(again.list_runs()[0]["id"])
    assert resumed.kind == "autoharness" and resumed.config["budget"] == {"max_calls": 5}
    assert resumed.load_checkpoint("search") == {"iteration": 7}
    assert resumed.get_candidate(c.id) == c
    assert resumed.candidates()[0]["score"] == 0.6
    assert resumed.llm_totals()["calls"] == 1
    resumed.set_status("running")
    resumed.record_llm_call(LLMCall("m", "refine", 1, 2, 0.1, True))
    assert again.get_run(resumed.id)["llm_calls"] == 2


def test_open_unknown_run_has_a_hint(store: RunStore) -> None:
    with pytest.raises(RatchetError) as info:
        store.open_run("20990101-000000-nope-0000")
    assert "ratchet runs list" in (info.value.hint or "")
    with pytest.raises(RatchetError):
        store.get_run("nope")


def test_open_by_unique_prefix(store: RunStore) -> None:
    a = store.create_run("k", {}, run_id="alpha-1")
    store.create_run("k", {}, run_id="alpha-2")
    store.create_run("k", {}, run_id="beta-1")
    assert store.open_run("beta").id == "beta-1"
    assert store.open_run("alpha-1").id == a.id
    with pytest.raises(RatchetError, match="matches 2 runs"):
        store.open_run("alpha")


def test_list_runs_filters_orders_and_counts(store: RunStore) -> None:
    older = store.create_run("autoharness", {})
    newer = store.create_run("serve", {})
    third = store.create_run("autoharness", {})
    c = Candidate.from_files("harness", {"h.py": "y"})
    third.add_candidate(c)
    third.set_candidate_status(c.id, "accepted", 0.8)
    third.record_llm_call(LLMCall("m", "refine", 10, 5, 0.1, True))
    rows = store.list_runs()
    assert [r["id"] for r in rows] == [third.id, newer.id, older.id]
    assert [r["id"] for r in store.list_runs(kind="autoharness")] == [third.id, older.id]
    assert len(store.list_runs(limit=1)) == 1
    top = rows[0]
    assert (top["candidates"], top["best_score"], top["llm_calls"], top["tokens"]) == (1, 0.8, 1, 15)
    assert rows[1]["best_score"] is None


def test_best_score_falls_back_to_evaluations(store: RunStore) -> None:
    run = make_run(store)
    c = Candidate.from_files("harness", {"h.py": "z"})
    run.add_candidate(c)
    run.add_evaluation(Evaluation(c.id, "search", 0.3))
    run.add_evaluation(Evaluation(c.id, "search", 0.45))
    assert store.list_runs()[0]["best_score"] == 0.45


def test_trajectories_and_session_deletion(store: RunStore) -> None:
    run = make_run(store, kind="serve")
    other = make_run(store, kind="serve")
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    with run.trajectory_writer("conversations", session_id="s-1") as writer:
        writer.write(messages, turn=1)
        writer.write(messages, turn=2)
    plain = run.trajectory_writer("conversations")
    plain.write({"messages": messages, "session_id": "s-2"})
    plain.write(messages)
    other.trajectory_writer("chat").write(messages, session_id="s-1")
    run.record_llm_call(LLMCall("m", "serve", 3, 4, 0.1, True), session_id="s-1")

    records = run.read_trajectory("conversations")
    assert [r.get("session_id") for r in records] == ["s-1", "s-1", "s-2", None]
    assert records[0]["messages"] == messages and records[0]["turn"] == 1

    removed = store.delete_session_data("s-1")
    assert removed == 4  # three conversation records dropped, one model call untagged
    assert [r.get("session_id") for r in run.read_trajectory("conversations")] == ["s-2", None]
    assert other.read_trajectory("chat") == []
    assert "session_id" not in run.read_jsonl("llm_calls.jsonl")[0]
    assert run.llm_totals()["calls"] == 1  # accounting kept
    con = sqlite3.connect(store.root / "index.sqlite")
    assert con.execute("SELECT COUNT(*) FROM sessions WHERE session_id = 's-1'").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM llm_calls WHERE session_id = 's-1'").fetchone()[0] == 0
    assert con.execute("SELECT records FROM sessions WHERE session_id = 's-2'").fetchone()[0] == 1
    assert run.delete_session_data("s-1") == 0


def test_reindex_rebuilds_a_lost_index(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = RunStore(root)
    run = make_run(store)
    c = Candidate.from_files("harness", {"h.py": "q"})
    run.add_candidate(c)
    run.set_candidate_status(c.id, "accepted", 0.5)
    run.add_evaluation(Evaluation(c.id, "search", 0.5))
    run.add_episode(EpisodeSummary("e", "TicTacToe-v0", 1, "a", 3, 0, {0: 1.0}, False, 0.2))
    run.record_llm_call(LLMCall("m", "refine", 7, 3, 0.1, True))
    run.trajectory_writer("t", session_id="s").write([{"role": "user", "content": "x"}])
    run.set_status("done", {"best": 0.5})
    before = store.get_run(run.id)
    store.index.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{root / 'index.sqlite'}{suffix}").unlink(missing_ok=True)

    fresh = RunStore(root)
    assert fresh.list_runs() == []
    assert fresh.reindex() == 1
    after = fresh.get_run(run.id)
    for key in ("status", "summary", "candidates", "evaluations", "episodes", "llm_calls", "tokens", "best_score", "config"):
        assert after[key] == before[key], key
    assert fresh.open_run(run.id).candidates()[0]["status"] == "accepted"


def test_schema_is_versioned(store: RunStore) -> None:
    con = sqlite3.connect(store.root / "index.sqlite")
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    with pytest.raises(RatchetError, match="schema version"):
        RunStore(store.root)


def test_run_pickles_for_worker_processes(store: RunStore) -> None:
    run = make_run(store)
    clone = pickle.loads(pickle.dumps(run))
    clone.record_llm_call(LLMCall("m", "x", 1, 1, 0.1, True))
    assert run.llm_totals()["calls"] == 1 and clone.id == run.id


def test_default_root_follows_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RATCHET_RUNS", raising=False)
    assert StoreConfig().root == Path("runs")
    monkeypatch.setenv("RATCHET_RUNS", str(tmp_path / "elsewhere"))
    assert StoreConfig().root == tmp_path / "elsewhere"
    assert RunStore().root == tmp_path / "elsewhere"
    assert StoreConfig.model_fields["root"].description  # documented field


def test_session_records_in_any_run_log_are_erased(store: RunStore) -> None:
    run = make_run(store, kind="serve")
    run.append_jsonl("online/turns.jsonl", {"session_id": "s-ü", "text": "private"})
    run.append_jsonl("online/turns.jsonl", {"session_id": "s-2", "text": "other"})
    untouched = run.path("online/other.jsonl")
    run.append_jsonl("online/other.jsonl", {"x": 1})
    mtime = untouched.stat().st_mtime_ns
    assert run.delete_session_data("s-ü") == 1
    assert run.read_jsonl("online/turns.jsonl") == [{"session_id": "s-2", "text": "other"}]
    assert untouched.stat().st_mtime_ns == mtime  # files without the session are not rewritten


def test_open_run_sweeps_temp_files_of_dead_writers(store: RunStore) -> None:
    import subprocess
    import sys

    run = make_run(store)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    orphan = run.dir / f".state.json.{dead_pid}.abcd1234.tmp"
    live = run.dir / "checkpoints" / f".search.json.{__import__('os').getpid()}.abcd1234.tmp"
    live.parent.mkdir(parents=True)
    orphan.write_text("{partial")
    live.write_text("{in progress")
    store.open_run(run.id)
    assert not orphan.exists()
    assert live.exists()  # its writer (this process) is alive: never touched
