"""The runtime-vs-mini-swe-agent bench reads why mini-swe-agent rejected replies from its own
trajectory file, so a RepeatedFormatError row says whether the model wrote several actions, none,
or was cut at the reply budget; and carries over committed rows whose run store is gone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench/ is a package of the checkout, not of the installed distribution

import bench.runtime_vs_miniswe as bench  # noqa: E402
from bench.runtime_vs_miniswe import committed_rows, format_errors, is_done, report  # noqa: E402


def rejected(n_actions: int, finish_reason: str, reply: str = "") -> dict:
    return {"role": "user", "content": "Format error",
            "extra": {"interrupt_type": "FormatError", "n_actions": n_actions, "model_response": reply,
                      "response": {"choices": [{"finish_reason": finish_reason}]}}}


def test_rejected_replies_are_counted_by_what_was_wrong(tmp_path: Path):
    trajectory = tmp_path / "t.traj.json"
    trajectory.write_text(json.dumps({"messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        rejected(7, "length"), rejected(0, "stop", "<returncode>0</returncode>\n<output>\nok\n</output>"),
        {"role": "assistant", "content": "ok", "extra": {"actions": [{"command": "ls"}]}},
        {"role": "user", "content": "<returncode>0</returncode>", "extra": {}},
        rejected(0, "stop", "THOUGHT: look\n```bash\nls\n```"), rejected(2, "stop", "```mswea_bash_command\nls\n```"),
        {"role": "exit", "content": "RepeatedFormatError", "extra": {"exit_status": "RepeatedFormatError"}}]}))
    assert format_errors(trajectory) == {"rejected": 4, "several_actions": 2, "no_action": 2, "cut_at_reply_budget": 1,
                                        "other_fence": 1, "wrote_observation": 1}


def test_a_run_without_a_readable_trajectory_has_no_counts(tmp_path: Path):
    assert format_errors(tmp_path / "missing.traj.json") is None
    broken = tmp_path / "broken.traj.json"
    broken.write_text("{not json")
    assert format_errors(broken) is None


def committed(**settings) -> dict:
    """Results as committed: one task measured by both agents in a store that is gone."""
    cell = {"solved": False, "exit_status": "LimitsExceeded", "steps": 8, "prompt_tokens": 900, "completion_tokens": 100,
            "wall_s": 200.0}
    return {"model": "m", "step_limit": 8, "max_tokens": 512, "n_ctx": 16384, **settings, "per_task": [
        {"task_id": "t1",
         "ratchet": {**cell, "exit_status": "submitted", "version": "ratchet@old", "commit": "abc",
                     "measured_at": "2026-01-01T00:00:00Z"},
         "miniswe": {**cell, "version": "2.4.6", "commit": None, "measured_at": "2026-01-01T00:05:00Z",
                     "format_errors": {"rejected": 3, "several_actions": 2, "no_action": 1, "cut_at_reply_budget": 1,
                                       "other_fence": 0, "wrote_observation": 1}}}]}


META = {"model": "m", "step_limit": 8, "max_tokens": 512, "n_ctx": 16384, "threads": 1, "ratchet_version": "ratchet@new",
        "ratchet_commit": "def", "miniswe_version": "2.4.6", "measured_at": "2026-01-02T00:00:00Z", "notes": "n",
        "suite_tasks": ["t1", "t2"]}


def test_committed_rows_of_a_gone_store_are_carried_and_count_by_the_rule_for_stored_ones():
    carried = committed_rows(committed(), [], META)
    assert [(r["agent"], r["carried"]) for r in carried] == [("ratchet", True), ("miniswe", True)]
    # mini-swe-agent's row is reused; Ratchet's counts only for the harness it ran
    assert [is_done(r, META["ratchet_version"]) for r in carried] == [False, True]
    assert is_done(carried[0], "ratchet@old")
    # a committed row still in the store is that store's row, not a carried one
    in_store = [{"agent": "miniswe", "task_id": "t1", "measured_at": "2026-01-01T00:05:00Z"}]
    assert [r["agent"] for r in committed_rows(committed(), in_store, META)] == ["ratchet"]
    # rows measured under other limits are not carried
    assert committed_rows(committed(step_limit=4), [], META) == []


def test_the_table_marks_carried_rows_and_takes_their_committed_format_error_counts(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results")
    store = tmp_path / "store"
    store.mkdir()
    # Ratchet rerun on the current harness in this store: its row replaces the carried one
    (store / "results.jsonl").write_text(json.dumps(
        {"agent": "ratchet", "task_id": "t1", "solved": True, "exit_status": "submitted", "steps": 2, "prompt_tokens": 400,
         "completion_tokens": 50, "wall_s": 60.0, "version": "ratchet@new", "commit": "def",
         "measured_at": "2026-01-02T00:01:00Z"}) + "\n")
    data = report(store, "x", META, committed_rows(committed(), [], META))
    row = data["per_task"][0]
    assert (row["ratchet"]["carried"], row["ratchet"]["version"], row["miniswe"]["carried"]) == (False, "ratchet@new", True)
    assert row["miniswe"]["format_errors"]["rejected"] == 3
    table = (tmp_path / "results" / "x.md").read_text()
    assert "| t1 | **solved** | new (def) |" in table and "| LimitsExceeded † |" in table
    assert "for rows marked † the counts committed with them, 1 of 1 runs): 3, 2 with more" in table
    assert "† carried over from the committed results" in table
