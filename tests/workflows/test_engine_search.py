"""The operator-search example on the engine (what ``ratchet evolve`` runs), with the scripted model
answering both the proposer and the workflow's calls: one step selects with AFlow's selector,
proposes a spec, evaluates its compiled workflow in the sandbox and records the gate's decision
with both candidates' cost per task."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.models.scripted import ScriptedModel
from ratchet.store import RunStore
from ratchet.workflows.proposers import plan_of

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "humaneval-workflows" / "operator-search"
SPEC = {"name": "two-and-revise", "steps": [{"op": "sample", "k": 2}, {"op": "strip_tests"},
                                            {"op": "select_by_examples"}, {"op": "revise", "rounds": 1}]}


def test_one_operator_level_step_on_the_engine(tmp_path: Path) -> None:
    raw = yaml.safe_load((EXAMPLE / "evolve.yaml").read_text())
    raw.update(workspace=str(EXAMPLE), model="scripted:", iterations=1, seeds=[0],
               proposers=[raw["proposers"][0]], budget={"max_calls": 400})
    raw["suite"]["options"]["limit"] = 6
    cfg = EvolveConfig.model_validate(raw)

    def answer(messages) -> str:
        text = messages[0]["content"]
        if "You design a workflow" in text:
            return json.dumps(SPEC)
        return "```python\ndef f():\n    return None\n```"  # a wrong code for every problem

    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    summary = Engine(cfg, run, ScriptedModel(answer)).execute()
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert [e["proposer"] for e in steps] == ["operator"]
    decisions = sorted((Path(run.dir) / "evolve" / "decisions").glob("*.json"))
    assert len(decisions) == 1
    decision = json.loads(decisions[0].read_text())
    assert not decision["accepted"]  # every code is wrong: no gain
    assert decision["numbers"]["cost_parent"] == 4.0 >= decision["numbers"]["cost_child"] > 0
    stored = run.get_candidate(decisions[0].stem)
    assert plan_of(stored.files["workflow.py"]) == SPEC["steps"]
    assert stored.meta["selection"]["pool"] == 1 and stored.meta["selection"]["probability"] == 1.0  # the original alone
    assert summary["accepted"] == 1  # the original only
    report = (Path(run.dir) / "evolve" / "report.md").read_text()  # the run's report draws the frontier
    assert "## Score vs cost per task (held-in)" in report
    assert f"| {stored.id[:12]} | operator | rejected | 0.000 |" in report
