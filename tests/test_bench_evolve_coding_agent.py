"""bench.evolve_coding_agent: --post-hoc (candidates measured on a finished run's test split, at more seeds) and the results' lines."""

from __future__ import annotations

import pytest
import yaml

from bench.evolve_coding_agent import post_hoc
from ratchet.evolve.report import POST_HOC
from ratchet.evolve.report_tables import post_hoc_lines
from ratchet.evolve.preflight import CONFIG_COPY
from ratchet.contracts import Candidate
from ratchet.evolve.archive import Archive
from ratchet.store import RunStore

from tests.runtime.test_engine_suite import EXAMPLE


def test_post_hoc_runs_a_candidate_on_the_test_split_apart_from_the_runs_records_and_resumes(tmp_path):
    config = {"workspace": str(EXAMPLE), "model": "scripted:", "seeds": [0],
              "suite": {"name": "ratchet.runtime.engine_suite:CodingAgentSuite",
                        "options": {"tasks": ["fahrenheit", "chunks-partial", "csv-quoted", "deep-merge"],
                                    "overrides": ["step_limit=2", "max_tokens=64"]}},
              "splits": {"search": 0.0, "heldin": 0.5, "heldout": 0.0, "test": 0.5, "seed": 0}}
    run = RunStore(tmp_path).create_run("evolve", config, run_id="r")
    run.path(CONFIG_COPY).parent.mkdir(parents=True, exist_ok=True)
    run.path(CONFIG_COPY).write_text(yaml.safe_dump(config))
    child = Candidate.from_files("coding-agent", {"settings.yaml": "step_limit: 30\n"})
    Archive(run).add(child, "rejected")
    post_hoc(run, [child.id[:8]], threads=1)
    rows = run.read_jsonl(POST_HOC)
    assert len(rows) == 2 and {r["candidate"] for r in rows} == {child.id} and all(r["score"] == 0.0 for r in rows)
    assert run.read_jsonl("evolve/evals.jsonl") == []  # the run's own evaluations are not touched
    post_hoc(run, [child.id], threads=1)  # resumed: every test task is measured already
    assert len(run.read_jsonl(POST_HOC)) == 2
    original = [{"candidate": "orig", "task": r["task"], "split": "test", "score": 1.0} for r in rows]
    text = "\n".join(post_hoc_lines(run.read_jsonl(POST_HOC), original, "orig"))
    assert f"| {child.id[:12]} | 2 | 0 | 2 | - | {', '.join(sorted(r['task'] for r in rows))} |" in text
    other = Candidate.from_files("coding-agent", {"settings.yaml": "step_limit: 31\n"})
    Archive(run).add(other, "rejected")
    post_hoc(run, [child.id, other.id], threads=1, seeds=[0, 3])  # seed 0 of child is measured already
    post_hoc(run, [child.id, other.id], threads=1, seeds=[0, 3])
    more = [(r["candidate"], r["task"], r["seed"]) for r in run.read_jsonl(POST_HOC)[2:]]
    tasks = [r["task"] for r in rows]
    assert more == [(other.id, tasks[0], 0), (other.id, tasks[1], 0), (child.id, tasks[0], 3), (other.id, tasks[0], 3),
                    (child.id, tasks[1], 3), (other.id, tasks[1], 3)]  # the candidates take turns, task by task
    text = "\n".join(post_hoc_lines(run.read_jsonl(POST_HOC), original, "orig"))
    assert f"| {child.id[:12]} | 4 | 0 | 2 (ran 2 of them) | - | {', '.join(sorted(tasks))} |" in text


def test_the_results_name_the_runs_workspace_without_a_machine_path(tmp_path):
    from bench.evolve_coding_agent import ROOT, shown_path

    assert shown_path(ROOT / "examples" / "coding-agent-opening") == "examples/coding-agent-opening"
    assert shown_path("examples/coding-agent") == "examples/coding-agent"
    assert shown_path(tmp_path / "mine" / "agent") == "mine/agent"


def test_the_gates_power_line_says_when_the_held_in_tasks_run_at_several_seeds():
    """The flip counts are computed for one seed; a run at three seeds is tested on per-task solve
    rates, and its results must say so rather than read as needing whole-task flips."""
    from bench.evolve_coding_agent import gate_power, power_line
    from ratchet.config import load_config
    from ratchet.evolve.config import EvolveConfig

    from tests.runtime.test_engine_suite import OPENING

    for name, seeds in (("evolve-15b.yaml", 1), ("evolve-15b-seeds.yaml", 3)):
        power = gate_power(load_config(EvolveConfig, OPENING / name).model_dump(mode="json"))
        assert power["heldin_tasks"] == 20 and power["seeds"] == seeds
        assert power_line(power).startswith("Held-in: 20 tasks.")
        assert ("runs at 3 seeds" in power_line(power)) == (seeds == 3)
    older = {k: v for k, v in power.items() if k != "seeds"}  # results written before the count was kept
    assert "seeds" not in power_line(older)


def test_post_hoc_seeds_without_a_candidate_is_refused_before_anything_runs(tmp_path):
    from bench.evolve_coding_agent import main

    with pytest.raises(SystemExit, match="name the candidates with --post-hoc"):
        main(["--write-only", "--root", str(tmp_path), "--run-id", "none", "--post-hoc-seeds", "3,4"])
