"""The coding agent's workspace evolved by the engine, with the scripted model standing in for the
real one: examples/coding-agent/evolve.yaml, the coding-basics suite as the evaluator (the agent
runs each task, the grader judges it), and the agentic proposer on the runtime editing the very
workspace it runs with. The scripted coding agent fixes a task only when its system prompt holds
the phrase the scripted proposer adds, so the run must find, keep and report that change."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from ratchet.config import load_config
from ratchet.contracts import Candidate, RatchetError, Skip
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.workspace import snapshot
from ratchet.models.scripted import ScriptedModel
from ratchet.runtime.config import CodingSuiteOptions
from ratchet.runtime.engine_suite import CodingAgentSuite, harness_from
from ratchet.runtime.suite import load_suite
from ratchet.runtime.workspace import DEFAULT_WORKSPACE
from ratchet.store import RunStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding-agent"
OPENING = EXAMPLE.with_name("coding-agent-opening")
PHRASE = "Read the failing test first."
TASKS = {t.statement: t for t in load_suite("coding-basics")}
SPLITS = {"search": ["chunks-partial"], "heldin": ["fizzbuzz-fifteen", "median-even", "fahrenheit", "word-count-case",
                                               "slugify-collapse"], "test": ["palindrome-punct", "duration-hours"]}


def reply(tool: str, **arguments) -> str:
    return f"```tool\n{json.dumps({'name': tool, 'arguments': arguments})}\n```"


def responder(messages) -> str:
    system, task = messages[0]["content"], messages[1]["content"]
    turns = sum(1 for m in messages if m["role"] == "assistant")
    if task.startswith("You are improving a program"):  # the proposer, on the runtime
        failing = task.split("(the failing ones: ")[1].split(")")[0]
        script = [reply("read_trace", task_id=failing.split(", ")[0]),
                  reply("edit", path="system_prompt.md", old="Find the wrong line", new=f"{PHRASE}\nFind the wrong line"),
                  reply("submit", summary=f"TARGET: the agent gives up at once\nROOT CAUSE: no method in the "
                                          f"prompt\nFLIPS: {failing}")]
        return script[min(turns, 2)]
    statement = task.split("\nThe repository is")[0]
    if PHRASE not in system or turns:
        return reply("submit", summary="done")
    return reply("apply_patch", patch=TASKS[statement].solution.read_text())


@pytest.mark.slow
def test_the_example_run_improves_the_coding_agent_and_reports_on_the_untouched_split(tmp_path) -> None:
    ws = tmp_path / "coding-agent"
    shutil.copytree(EXAMPLE, ws)
    cfg = load_config(EvolveConfig, ws / "evolve.yaml", (
        f"workspace={ws}", "iterations=1", "smoke.tasks=0",
        f"suite.options.tasks={json.dumps([t for ids in SPLITS.values() for t in ids])}",
        f"splits.ids={json.dumps(SPLITS)}", "splits.search=0", "splits.heldin=0", "splits.test=0"))
    # the example's agentic proposer alone, as configured: the responder scripts its agent's turns
    cfg = cfg.model_copy(update={"proposers": [p for p in cfg.proposers if p.name == "agentic"]})
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg.model_dump(mode="json"))
    engine = Engine(cfg, run, ScriptedModel(responder))
    summary = engine.execute()
    report = summary["report"]
    assert summary["accepted"] == 2, report  # the original and the proposer's child
    best = report["best"]
    child = engine.archive.get(best["id"])
    assert PHRASE in child.files["system_prompt.md"] and child.parent_id == report["original"]["id"]
    assert report["split"] == "test" and report["split_untouched"]
    assert report["original"]["mean"] == 0.0 and best["mean"] == 1.0  # judged on the two untouched tasks
    # The proposal came from the runtime agent, whose trace is kept in the run.
    (proposal_run,) = (run.dir / "proposer-agent").iterdir()
    names = [json.loads(line)["name"] for line in (proposal_run / "trace.jsonl").read_text().splitlines()
             if json.loads(line)["type"] == "tool_call"]
    assert names == ["read_trace", "edit", "submit"]


def test_the_suite_takes_only_the_candidates_data_and_fixes_the_budget(tmp_path) -> None:
    candidate = Candidate.from_files("coding-agent", {
        "system_prompt.md": "MINE {tool_instructions}", "settings.yaml": "step_limit: 99\nprotocol: text\n",
        "permissions.yaml": "readable: []\n", "tools/submit.py": "raise SystemExit(1)\n", "hooks.py": "x = (\n"})
    harness = harness_from(candidate, tmp_path / "h")
    assert sorted(p.name for p in (tmp_path / "h").iterdir()) == ["settings.yaml", "system_prompt.md"]
    assert harness.system_prompt().startswith("MINE") and harness.permissions().readable == ["*"]
    suite = CodingAgentSuite(CodingSuiteOptions(tasks=["chunks-partial"]), None)
    assert harness.settings(tuple(suite.options.overrides)).step_limit == 8
    assert [t.id for t in suite.tasks()] == ["chunks-partial"] and len(suite.fingerprint()) == 16
    with pytest.raises(RatchetError, match="unknown task ids"):
        CodingAgentSuite(CodingSuiteOptions(tasks=["nope"]), None)
    with pytest.raises(RatchetError, match="needs a model"):
        suite.evaluate(candidate, suite.tasks(), 0)


def test_the_fingerprint_changes_with_the_files_a_candidate_falls_back_to(tmp_path, monkeypatch) -> None:
    """A candidate without a hooks.py or a skill runs the default workspace's: editing one of those
    changes what every cached score measured, so a run's pins must refuse it."""
    import ratchet.runtime.engine_suite as engine_suite

    default = tmp_path / "default"
    shutil.copytree(DEFAULT_WORKSPACE, default, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(engine_suite, "DEFAULT_WORKSPACE", default)
    suite = CodingAgentSuite(CodingSuiteOptions(tasks=["chunks-partial"]), None)
    before = suite.fingerprint()
    (default / "hooks.py").write_text((default / "hooks.py").read_text() + "\n# changed\n")
    after_hooks = suite.fingerprint()
    (default / "skills" / "run-tests" / "SKILL.md").write_text("changed\n")
    assert len({before, after_hooks, suite.fingerprint()}) == 3


def test_the_example_starts_from_the_shipped_harness() -> None:
    """The example's run improves the harness the runtime ships: its data files are those files
    (a stale copy, missing a middleware, would evolve and report on another agent)."""
    for name in ("settings.yaml", "context.yaml", "system_prompt.md", "tools.yaml", "skills/run-tests/SKILL.md"):
        assert (EXAMPLE / name).read_text() == (DEFAULT_WORKSPACE / name).read_text(), name


def test_the_suite_samples_for_the_best_of_n_arm_each_seed_its_own_sample(tmp_path) -> None:
    """The report's best-of-N attempts on this greedy suite must be samples, not reruns: the
    sampled copy's agents call the model at the temperature with the evaluation seed as sampling
    seed (the embedded model's default seed would make every sample the same), and it is cached
    apart from the greedy suite."""
    candidate = Candidate.from_files("coding-agent", {"system_prompt.md": "P {tool_instructions}"})

    class Ctx:
        model = ScriptedModel([reply("submit", summary="done")], cycle=True)

    suite = CodingAgentSuite(CodingSuiteOptions(tasks=["chunks-partial"]), Ctx())
    sampled = suite.sampled(0.7)
    assert sampled.options.overrides[-1] == "temperature=0.7" and sampled.fingerprint() != suite.fingerprint()
    assert sampled.sampled(0.9).options.overrides.count("temperature=0.9") == 1  # replaced, not stacked
    suite.evaluate(candidate, suite.tasks(), 3)
    sampled.evaluate(candidate, sampled.tasks(), 3)
    sampled.evaluate(candidate, sampled.tasks(), 4)
    greedy, first, second = [c["params"] for c in Ctx.model.calls]
    assert greedy["temperature"] == 0.0 and greedy.get("seed") is None
    assert (first["temperature"], first["seed"]) == (0.7, 3) and (second["temperature"], second["seed"]) == (0.7, 4)


@pytest.mark.parametrize(("workspace", "config"), [
    (EXAMPLE, "evolve-choices.yaml"), (EXAMPLE, "evolve-choices-15b.yaml"), (EXAMPLE, "evolve-restart-15b.yaml"),
    (EXAMPLE, "evolve-reflect-15b.yaml"),
    (OPENING, "evolve-15b.yaml"), (OPENING, "evolve-15b-seeds.yaml")])
def test_the_choices_examples_span_both_suites_and_every_declared_value_is_a_valid_harness(
        workspace: Path, config: str) -> None:
    """The choices examples: 45 tasks (coding-basics + coding-fixes) and a `choices` proposer whose
    every proposal from the example's workspace (each value with the settings changed along with it)
    still loads as that workspace's settings: a value the runtime refused would cost a step and an
    evaluation of nothing."""
    from ratchet.evolve.proposers.choices import ChoicesProposer
    from ratchet.evolve.proposers.config import ChoicesOptions

    cfg = load_config(EvolveConfig, workspace / config)
    assert (EXAMPLE.parents[1] / cfg.workspace).resolve() == workspace  # relative to the repository root
    suite = CodingAgentSuite(CodingSuiteOptions.model_validate(cfg.suite.options), None)
    assert len(suite.tasks()) == len(load_suite("coding-basics")) + len(load_suite("coding-fixes")) == 45
    [choices] = [p for p in cfg.proposers if p.name == "choices"]
    proposer = ChoicesProposer(ChoicesOptions.model_validate(choices.options))
    original = snapshot(workspace, load_manifest(workspace))

    class Archive:  # what the proposer reads: the candidates made so far, so each value comes once
        made = [original]

        def candidates(self):
            return self.made

    rng = random.Random(0)
    while not isinstance(proposal := proposer.propose(original, Archive(), rng), Skip):
        child = Candidate.from_files("coding-agent", {**original.files, **proposal.files})
        Archive.made.append(child)
        harness = harness_from(child, Path(tempfile.mkdtemp()) / "h")
        settings = harness.settings(tuple(suite.options.overrides))  # raises on a value the runtime refuses
        harness.context_config()
        if "system_prompt.md" in proposal.files:  # a whole prompt comes with the setting that reads its format
            assert settings.file_blocks and "{tool_instructions}" in child.files["system_prompt.md"]
    assert len(Archive.made) - 1 == sum(len(c["values"]) for c in choices.options["choices"]) >= 1
    assert config in load_manifest(workspace).protected  # a run's settings are pinned, never a candidate's to edit


def test_the_opening_example_is_the_shipped_agent_with_an_empty_opening() -> None:
    """examples/coding-agent-opening's original differs from the agent the runtime ships only in
    what its first prompt shows (its other files fall back to the shipped ones), and one of its
    declared openings is the shipped one: the search can find its way back to the shipped agent."""
    from ratchet.runtime.workspace import HarnessWorkspace

    assert sorted(p.name for p in OPENING.iterdir()) == ["context.yaml", "evolve-15b-seeds.yaml", "evolve-15b.yaml",
                                                         "manifest.yaml"]
    bare, shipped = HarnessWorkspace(OPENING).context_config(), HarnessWorkspace().context_config()
    assert bare.opening == [] and shipped.opening
    assert bare.model_copy(update={"opening": shipped.opening}) == shipped
    for config in ("evolve-15b.yaml", "evolve-15b-seeds.yaml"):
        cfg = load_config(EvolveConfig, OPENING / config)
        [values] = [c["values"] for p in cfg.proposers for c in p.options["choices"] if c["key"] == "opening"]
        assert any(type(shipped).model_validate({**bare.model_dump(), "opening": value}) == shipped for value in values)


def test_the_seeded_opening_run_is_the_greedy_one_measured_as_rates_over_sampled_runs(tmp_path) -> None:
    """evolve-15b-seeds.yaml differs from evolve-15b.yaml only where its comment says: three seeds,
    the agent sampling (a suite override, so no candidate can set it back to greedy, where every
    seed would be the same run), and the budget for three times the evaluations."""
    seeded_config = load_config(EvolveConfig, OPENING / "evolve-15b-seeds.yaml")
    greedy = load_config(EvolveConfig, OPENING / "evolve-15b.yaml").model_dump()
    seeded = seeded_config.model_dump()
    assert seeded["seeds"] == [0, 1, 2] and greedy["seeds"] == [0]
    assert seeded["suite"]["options"]["overrides"] == [*greedy["suite"]["options"]["overrides"], "temperature=0.5"]
    assert seeded["budget"]["max_calls"] == 3 * greedy["budget"]["max_calls"]
    for cfg in (greedy, seeded):
        cfg.pop("seeds"), cfg["suite"]["options"].pop("overrides"), cfg["budget"].pop("max_calls")
    assert seeded == greedy
    suite = CodingAgentSuite(CodingSuiteOptions.model_validate(seeded_config.suite.options), None)
    harness = harness_from(snapshot(OPENING, load_manifest(OPENING)), tmp_path / "h")
    assert harness.settings(tuple(suite.options.overrides)).temperature == 0.5


def test_a_candidate_whose_settings_the_runtime_refuses_fails_every_task_and_the_run_goes_on(tmp_path) -> None:
    """A proposer's context.yaml with an unknown key parses as YAML (the static check passes it) but
    the runtime refuses it: every task is a failure naming why, no agent runs, nothing is raised."""
    class Ctx:
        model = ScriptedModel([reply("submit", summary="done")], cycle=True)

    suite = CodingAgentSuite(CodingSuiteOptions(tasks=["chunks-partial", "fahrenheit"]), Ctx())
    bad = Candidate.from_files("coding-agent", {"system_prompt.md": "P {tool_instructions}",
                                                "context.yaml": "tasks: [a]\nkeep_last: 6\n"})
    results = suite.evaluate(bad, suite.tasks(), 0)
    assert [r.score for r in results] == [0.0, 0.0] and Ctx.model.calls == []
    assert all(r.failures[0].kind == "invalid_harness" and "context.yaml: tasks: unknown key" in r.failures[0].message
               for r in results)
    assert "/tmp" not in results[0].trace
