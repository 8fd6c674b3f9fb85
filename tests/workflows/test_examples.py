"""The humaneval-workflows examples run in the sandbox on HumanEval with the scripted model: the
operator library imports there, calls and tokens land in each task's metrics; and a few real-model
smokes (marked)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.suites import workflow as workflow_suite
from ratchet.evolve.suites.config import HumanEvalOptions, WorkflowOptions
from ratchet.evolve.suites.humaneval import HumanEvalSuite
from ratchet.evolve.suites.workflow import library_files, library_paths
from ratchet.evolve.workspace import snapshot
from ratchet.models.scripted import ScriptedModel
from ratchet.workflows import LIBRARY_FILE, compile_spec, flowops, parse_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "humaneval-workflows"
WORKSPACES = sorted(p for p in EXAMPLES.iterdir() if (p / "manifest.yaml").exists())

# HumanEval/0 (has_close_elements): its docstring's examples are
#   has_close_elements([1.0, 2.0, 3.0], 0.5) -> False;  ([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3) -> True
WRONG = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
RIGHT = ("```python\ndef has_close_elements(numbers, threshold):\n"
         "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for j, b in enumerate(numbers) if i != j)\n"
         "\nprint(has_close_elements([1.0, 2.0], 0.5))\nassert has_close_elements([1.0], 0.5) is False\n```")
OPTIONS = HumanEvalOptions(limit=1, grade_timeout_s=5.0,
                           workflow=WorkflowOptions(max_model_calls=4, max_test_runs=5, max_steps=12, temperature=0.7))


def workspace_candidate(workspace: Path):
    return snapshot(workspace, load_manifest(workspace))


def evaluate(workspace: Path, model, options: HumanEvalOptions = OPTIONS):
    suite = HumanEvalSuite(options, EngineContext(load_manifest(workspace), workspace, model=model))
    return suite.evaluate(workspace_candidate(workspace), suite.tasks(), 0)


def test_no_example_carries_a_copy_of_the_operator_library() -> None:
    """The workflow suites put ``flowops`` into the sandbox: an example with its own copy would
    run that copy instead, and it would fall behind the package's."""
    assert [w.name for w in WORKSPACES] == ["best-of-k", "operator-search", "sample-revise-vote"]
    assert [w.name for w in WORKSPACES if (w / LIBRARY_FILE).exists()] == []
    assert all(LIBRARY_FILE not in workspace_candidate(w).files for w in WORKSPACES)


def test_the_suite_puts_the_library_in_the_sandbox_and_a_candidates_own_copy_wins(tmp_path) -> None:
    options = OPTIONS.workflow
    assert library_files(options) == {LIBRARY_FILE: (Path(flowops.__file__)).read_text()}
    (tmp_path / "manifest.yaml").write_text("name: own\neditable: ['workflow.py', 'flowops.py']\nentry: workflow.py\n")
    (tmp_path / "workflow.py").write_text("from flowops import MARK\n\ndef step(state):\n    return {'answer': MARK}\n")
    (tmp_path / "flowops.py").write_text("MARK = 'def f():\\n    return 1\\n'\n")
    [result] = evaluate(tmp_path, ScriptedModel([]))
    assert "return 1" in result.trace and not any(f.kind == "workflow_error" for f in result.failures), result.trace
    (tmp_path / "flowops.py").unlink()  # without its copy it gets the package's, which has no MARK
    [result] = evaluate(tmp_path, ScriptedModel([]))
    assert any(f.kind == "workflow_error" and "MARK" in f.message for f in result.failures), result.trace
    none = OPTIONS.model_copy(update={"workflow": options.model_copy(update={"libraries": []})})
    [result] = evaluate(EXAMPLES / "best-of-k", ScriptedModel([WRONG] * 4), none)
    assert any(f.kind == "workflow_error" and "flowops" in f.message for f in result.failures), result.trace


def test_a_library_that_is_not_one_module_file_is_refused_by_name() -> None:
    from ratchet.contracts import RatchetError

    for name in ("ratchet.workflows", "no_such_module_here"):
        with pytest.raises(RatchetError, match=name):
            library_paths(WorkflowOptions(libraries=[name]))


def test_the_library_is_part_of_the_suites_fingerprint(monkeypatch) -> None:
    suite = HumanEvalSuite(OPTIONS)
    before = suite.fingerprint()
    monkeypatch.setattr(workflow_suite, "library_paths", lambda options: [Path(__file__)])
    assert suite.fingerprint() != before


def test_best_of_k_answers_the_sample_that_passes_the_examples_and_counts_its_cost() -> None:
    model = ScriptedModel([WRONG, RIGHT, WRONG, WRONG])
    [result] = evaluate(EXAMPLES / "best-of-k", model)
    assert result.score == 1.0, result.trace
    assert result.metrics["model_calls"] == 4.0 and result.metrics["test_runs"] == 2.0  # two distinct codes
    assert result.metrics["tokens"] > 0
    assert "print(" not in result.trace.split("[answer]")[-1].split("[hidden tests]")[0]  # test code cut off
    model = ScriptedModel([WRONG] * 4)
    [result] = evaluate(EXAMPLES / "best-of-k", model)
    assert result.score == 0.0 and result.metrics["test_runs"] == 1.0


def test_sample_revise_vote_revises_once_when_no_sample_passes() -> None:
    model = ScriptedModel([WRONG, WRONG, WRONG, RIGHT])
    [result] = evaluate(EXAMPLES / "sample-revise-vote", model)
    assert result.score == 1.0, result.trace
    assert result.metrics["model_calls"] == 4.0 and result.metrics["test_runs"] == 2.0
    assert "returned False, expected True" in model.calls[3]["messages"][-1]["content"]
    model = ScriptedModel([RIGHT, WRONG, RIGHT])  # a passing sample: no revision call
    [result] = evaluate(EXAMPLES / "sample-revise-vote", model)
    assert result.score == 1.0 and result.metrics["model_calls"] == 3.0 and len(model.calls) == 3


def test_a_compiled_spec_runs_in_the_sandbox(tmp_path) -> None:
    spec = parse_spec("steps: [{op: sample, k: 2}, {op: strip_tests}, {op: select_by_examples}, {op: revise}]")
    for rel, text in compile_spec(spec).items():
        (tmp_path / rel).write_text(text)
    (tmp_path / "manifest.yaml").write_text("name: spec\neditable: ['workflow.py']\nentry: workflow.py\n")
    [result] = evaluate(tmp_path, ScriptedModel([WRONG, WRONG, RIGHT]))
    assert result.score == 1.0, result.trace
    assert result.metrics["model_calls"] == 3.0 == spec.max_model_calls()


@pytest.mark.real_model
@pytest.mark.parametrize("name", ["best-of-k", "sample-revise-vote"])
def test_real_model_smoke_on_three_problems(name) -> None:
    """The 0.5B drives each example on three problems: it runs and stays within its call cap
    (what it solves is measured, not asserted)."""
    from ratchet.models.spec import load_model

    model = load_model("local:qwen2.5-coder-0.5b", threads=int(os.environ.get("RATCHET_THREADS", "1")))
    options = OPTIONS.model_copy(update={"limit": None, "ids": ["HumanEval/100", "HumanEval/101", "HumanEval/102"]})
    results = evaluate(EXAMPLES / name, model, options)
    assert len(results) == 3
    assert all(1 <= r.metrics["model_calls"] <= 4 and not any(f.kind == "workflow_error" for f in r.failures)
               for r in results), [r.failures for r in results]


@pytest.mark.parametrize("workspace", [w for w in WORKSPACES if w.name != "operator-search"], ids=lambda p: p.name)
def test_each_examples_run_config_loads_and_finds_its_workspace(workspace: Path, tmp_path, monkeypatch) -> None:
    from ratchet.evolve.preflight import load_evolve_config

    monkeypatch.chdir(tmp_path)
    config = load_evolve_config(workspace / "evolve.yaml")
    assert config.workspace == workspace
    options = HumanEvalOptions.model_validate(config.suite.options)
    assert options.workflow.temperature > 0  # sampled: the k samples can differ
    assert options.workflow.max_model_calls == 4  # both examples at the same cost per task
    from ratchet.evolve.proposers.config import DiffOptions, ReflectiveOptions

    built = {p.name: {"reflective": ReflectiveOptions, "diff": DiffOptions}[p.name].model_validate(p.options)
             for p in config.proposers}
    assert all("flowops.py" not in o.surfaces and "*" not in o.surfaces for o in built.values())


def test_operator_search_config_builds_and_its_proposal_runs_in_the_sandbox(tmp_path, monkeypatch) -> None:
    """The operator-search example: its selector and proposers build from the config by import
    path, the proposer's cap is the suite's, and a spec the model answers runs within that cap."""
    import random

    from ratchet.contracts import Proposal
    from ratchet.evolve.components import build
    from ratchet.evolve.preflight import load_evolve_config
    from ratchet.workflows.proposers import OperatorProposer
    from ratchet.workflows.selection import SoftMixedSelector
    from tests.workflows.test_proposers import Archive

    workspace = EXAMPLES / "operator-search"
    monkeypatch.chdir(tmp_path)
    config = load_evolve_config(workspace / "evolve.yaml")
    options = HumanEvalOptions.model_validate(config.suite.options)
    reply = '{"name": "sample-revise", "steps": [{"op": "sample", "k": 3}, {"op": "strip_tests"}, ' \
            '{"op": "select_by_examples"}, {"op": "revise", "rounds": 1}]}'
    ctx = EngineContext(load_manifest(workspace), workspace, model=ScriptedModel([reply]))
    assert isinstance(build("selector", config.selector, ctx), SoftMixedSelector)
    assert build("gate", config.gate, ctx).options.cost_metric == "model_calls"
    proposers = [build("proposer", spec, ctx) for spec in config.proposers]
    operator = next(p for p in proposers if isinstance(p, OperatorProposer))
    assert operator.options.max_model_calls == options.workflow.max_model_calls == 4

    archive = Archive()
    parent = archive.add(workspace_candidate(workspace).files)
    proposal = operator.propose(parent, archive, random.Random(0))
    assert isinstance(proposal, Proposal), proposal
    child = tmp_path / "child"
    child.mkdir()
    (child / "prompts").mkdir()
    (child / "manifest.yaml").write_text((workspace / "manifest.yaml").read_text())
    for rel, text in {**parent.files, **proposal.files}.items():
        (child / rel).write_text(text)
    [result] = evaluate(child, ScriptedModel([WRONG, WRONG, WRONG, RIGHT]))
    assert result.score == 1.0, result.trace
    assert result.metrics["model_calls"] == 4.0
