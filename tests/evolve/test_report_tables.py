"""The run rendered for people (ratchet.evolve.report_tables): rate tables over seeds, the
candidates table, and the post-hoc measurements beside the original with the gate's test."""

from __future__ import annotations

import pytest

from ratchet.contracts import Candidate
from ratchet.evolve.archive import Archive
from ratchet.evolve.report import candidates_by_prefix
from ratchet.evolve.report_tables import (
    arms_table,
    best_of_n_label,
    calls_line,
    candidates_table,
    post_hoc_lines,
    rate_lines,
    step_events,
    steps_table,
)
from ratchet.store import RunStore


def test_the_results_show_each_tasks_solve_rate_when_it_ran_at_several_seeds():
    def row(cand, task, seed, score, split="heldin"):
        return {"candidate": cand, "task": task, "split": split, "seed": seed, "score": score}

    one_seed = [row("a" * 16, "t1", 0, 1.0), row("b" * 16, "t1", 0, 0.0)]
    assert rate_lines(one_seed) == []  # the table of every evaluation says it all
    rows = [row("a" * 16, "t1", s, float(s == 2)) for s in range(3)] + \
           [row("b" * 16, "t1", s, 1.0) for s in range(3)] + [row("b" * 16, "t2", 0, 0.0)] + \
           [row("a" * 16, "t9", s, 1.0, "test") for s in range(3)]
    text = "\n".join(rate_lines(rows))
    assert "| t1 | 1/3 | 3/3 |" in text and "| t2 | - | 0/1 |" in text
    assert "| **all** | **1/3** | **3/4** |" in text
    assert "test:" in text and "| t9 | 3/3 |" in text


def test_the_candidates_table_takes_the_test_split_from_the_report(tmp_path):
    """The archive never holds test-split results (only the report scores that split), so a table
    reading only the archive showed "–" for candidates the report measured."""
    run = RunStore(tmp_path).create_run("evolve", {}, run_id="r")
    original = Candidate.from_files("coding-agent", {"settings.yaml": "step_limit: 8\n"})
    child = Candidate.from_files("coding-agent", {"settings.yaml": "step_limit: 9\n"}, parent_id=original.id)
    untested = Candidate.from_files("coding-agent", {"settings.yaml": "step_limit: 10\n"}, parent_id=original.id)
    for c in (original, child, untested):
        Archive(run).add(c, "accepted")
    run.write_json("evolve/report.json", {"original": {"id": original.id, "mean": 0.05, "n": 20},
                                          "best": {"id": child.id, "mean": 0.1, "n": 20}})
    rows = {line.split(" | ")[0].strip("| "): line.rstrip(" |").split(" | ")[-1] for line in candidates_table(run)[2:]}
    assert rows == {original.id[:12]: "0.050 (20 tasks)", child.id[:12]: "0.100 (20 tasks)", untested.id[:12]: "–"}


def test_post_hoc_at_more_seeds_pairs_the_candidates_and_pools_every_test_run():
    """More seeds on the test split after the run: each candidate's runs are set against the
    original's on the same task and seed, and the pooled section tests the per-task rate
    differences over every seed both ran (the report's and the post-hoc ones)."""
    rows = [{"candidate": c, "task": t, "split": "test", "seed": s, "score": float(c == "best" and t == "a" and s == 0)}
            for c in ("orig", "best") for t in ("a", "b", "c") for s in (0, 1, 2)]
    measured = [{"candidate": c, "task": t, "seed": s, "agent": "agent: submitted after 1 steps",
                 "score": float((c, t) in {("best", "a"), ("best", "b"), ("orig", "c")} and s == 3)}
                for s in (3, 4) for t in ("a", "b", "c") for c in ("orig", "best")]
    text = "\n".join(post_hoc_lines(measured, rows, "orig"))
    assert "(`--post-hoc`, seeds 3, 4)" in text
    assert "| best | 6 | 2 | 1 | a, b | c |" in text  # its six post-hoc runs against the original's six
    assert "| a | 0/5 | 2/5 |" in text and "| **all** | **1/15** | **3/15** |" in text
    assert "best - original over 3 test tasks at the seeds both ran: mean per-task solve-rate difference +0.133, " \
           "better on 2, worse on 1; one-sided sign-flip p = 0.375 (every sign assignment)." in text
    assert text.count(" | agent: submitted after 1 steps |") == 12  # every measured run listed


def _report(best_id: str = "b" * 16, split: str = "test") -> dict:
    def arm(mean):
        return {"mean": mean, "low": mean - 0.1, "high": mean + 0.1}

    return {"split": split, "tasks": 20, "stop_reason": "iterations",
            "original": {"id": "o" * 16, **arm(0.4)}, "best": {"id": best_id, **arm(0.5)},
            "original_best_of_n": {"attempts": 3, "distinct_attempts": 2, "temperature": 0.7, **arm(0.45)},
            "comparison": {"best_minus_original": arm(0.1), "best_minus_best_of_n": arm(0.05)}}


def test_the_arms_table_shows_each_arm_with_its_interval_and_says_when_nothing_was_accepted():
    text = "\n".join(arms_table(_report(), "pass@1", "problems"))
    assert "## Test split (20 problems, untouched by the search): pass@1, 95% bootstrap CIs" in text
    assert f"| original ({'o' * 12}) | 0.400 [0.300, 0.500] |" in text
    assert f"| best ({'b' * 12}) | 0.500 [0.400, 0.600] |" in text
    assert "| original, best-of-3 (2 distinct, sampled at 0.7) (the search's extra budget) | 0.450 [0.350, 0.550] |" in text
    assert "best - original: 0.100 [0.000, 0.200]; best - best-of-N: 0.050 [-0.050, 0.150]. Stopped by: iterations." in text
    assert "nothing was accepted" not in text
    same = "\n".join(arms_table(_report(best_id="o" * 16, split="heldout"), "solve rate"))
    assert f"| best ({'o' * 12}) (= original: nothing was accepted) |" in same
    assert same.startswith("## Held-out split (no test split configured) (20 tasks")


def test_best_of_n_says_what_its_attempts_were():
    assert best_of_n_label({"attempts": 1}) == "best-of-1"
    assert best_of_n_label({"attempts": 4, "temperature": 0.0}) == "best-of-4 (not sampled)"
    assert best_of_n_label({"attempts": 4, "distinct_attempts": 1, "temperature": 1.0}) == "best-of-4 (1 distinct, sampled at 1)"


def test_the_step_and_call_lines_read_the_runs_store(tmp_path):
    run = RunStore(tmp_path).create_run("evolve", {}, run_id="r")
    run.append_jsonl("evolve/events.jsonl", {"kind": "start"})
    run.append_jsonl("evolve/events.jsonl", {"kind": "step", "step": 0, "proposer": "diff", "status": "rejected",
                                             "model_calls": 2, "reason": "p = 0.4 | not below alpha\nsee"})
    run.append_jsonl("llm_calls.jsonl", {"prompt_tokens": 10, "completion_tokens": 5, "latency_s": 1.5})
    assert [e["step"] for e in step_events(run)] == [0]
    assert steps_table(run)[2] == "| 1 | diff | rejected | 2 | p = 0.4 / not below alpha see |"
    assert calls_line(run).startswith("Model calls paid: 1, 10 prompt + 5 completion tokens, 2 s of model latency")


def test_a_post_hoc_candidate_is_named_by_a_unique_prefix(tmp_path):
    run = RunStore(tmp_path).create_run("evolve", {}, run_id="r")
    a = Candidate.from_files("x", {"f": "1"})
    b = Candidate.from_files("x", {"f": "2"})
    for c in (a, b):
        Archive(run).add(c, "accepted")
    assert [c.id for c in candidates_by_prefix(Archive(run), [b.id[:10], a.id])] == [b.id, a.id]
    with pytest.raises(ValueError, match="--post-hoc zz: 0 candidates"):
        candidates_by_prefix(Archive(run), ["zz"])
    with pytest.raises(ValueError, match="2 candidates"):
        candidates_by_prefix(Archive(run), [""])


def test_a_step_redone_after_a_kill_is_one_step_with_its_last_event(tmp_path):
    """A kill after a step's event but before its checkpoint: the resumed run redoes the step and
    logs it again; the run's steps count it once, as the redone step (what the run went on from)."""
    run = RunStore(tmp_path).create_run("evolve", {}, run_id="r")
    for step, status in ((0, "rejected"), (1, "rejected"), (1, "accepted"), (2, "rejected")):
        run.append_jsonl("evolve/events.jsonl", {"kind": "step", "step": step, "status": status})
    assert [(e["step"], e["status"]) for e in step_events(run)] == [(0, "rejected"), (1, "accepted"), (2, "rejected")]
