"""The run rendered for people (ratchet.evolve.report_tables): rate tables over seeds, the
candidates table, and the post-hoc measurements beside the original with the gate's test."""

from __future__ import annotations

from ratchet.contracts import Candidate
from ratchet.evolve.archive import Archive
from ratchet.evolve.report_tables import candidates_table, post_hoc_lines, rate_lines
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
