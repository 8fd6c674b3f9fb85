"""A workflow search measured against the obvious baseline at equal cost, on an untouched test split.

Three arms, each run on the same test problems and seeds and scored per task (passed, model calls,
tokens, test runs):

- **original**: the starting workspace's workflow under its own run settings (its ``evolve.yaml``:
  for ``examples/humaneval-coder`` greedy, generate -> run the examples -> repair, at most 3 calls);
- **evolved**: the best candidate (by held-in score) of a ``ratchet evolve`` run that starts from the
  original and searches workflows (operator-level and AFlow proposers, AFlow's soft mixed selector,
  the paired gate) on the search and held-in problems, run under the search's settings;
- **best-of-k**: the original's request sampled ``k`` times and the code passing most visible
  examples answered (``sample k -> strip_tests -> select_by_examples``, the same operators as
  ``examples/humaneval-workflows/best-of-k``, with the original's system prompt), under the
  search's settings, ``k`` = the evolved arm's measured mean model calls per task rounded up, so the
  baseline never gets fewer calls than the workflow it is compared with.

Every piece is written as it is made: the engine run is resumable (its own store), and each arm's
per-task rows are appended to ``headline/arms.jsonl`` of that run as they finish, so a killed
comparison redoes nothing it has scored. The evolved arm is scored before best-of-k (its calls set
``k``). :func:`best_of_k_size` says whether the evolved workflow is itself a best-of-k spec: then
the search only rediscovered the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from statistics import fmean
from typing import Any

import yaml
from pydantic import Field

from ratchet.config import Settings, load_config
from ratchet.contracts import Candidate, Model, RatchetError, Task
from ratchet.evolve.config import ComponentSpec, EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.loop import Engine
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.suites.config import HumanEvalOptions, WorkflowOptions
from ratchet.evolve.suites.humaneval import HumanEvalSuite
from ratchet.evolve.workspace import materialize, snapshot
from ratchet.stats import mcnemar_exact, wilson
from ratchet.workflows.proposers import plan_of
from ratchet.workflows.spec import WorkflowSpec, compile_spec

ARMS = "headline/arms.jsonl"
SUMMARY = "headline/summary.json"
EXPORT = "headline/evolved"
ARM_NAMES = ("original", "evolved", "best-of-k")


def _sampled() -> WorkflowOptions:
    return WorkflowOptions(max_model_calls=4, max_test_runs=8, max_steps=16, max_tokens=512, temperature=0.7)


class HeadlineConfig(Settings):
    """One comparison: the search's settings, its splits and the arms' test split."""

    original: Path
    """The starting workspace (manifest, ``evolve.yaml`` whose suite options are the original arm's
    own settings, ``prompts/system.md``); the search starts from its editable files."""
    model: str = "local:qwen2.5-coder-0.5b"
    """The model that solves the problems, in every arm and in the search's evaluations."""
    proposer_model: str | None = None
    """The model the search's proposers ask instead (e.g. ``local:qwen2.5-coder-1.5b``); None: ``model``."""
    search_ids: list[str] = Field(min_length=1)
    """Problems whose failures the proposers see (never used to accept a change)."""
    heldin_ids: list[str] = Field(min_length=1)
    """Problems on which the gate decides acceptance."""
    test_ids: list[str] = Field(min_length=1)
    """The untouched problems every arm is scored on (none may be a search or held-in problem)."""
    test_seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    """Evaluation seeds of the arms on the test split (one sampled run per task and seed)."""
    workflow: WorkflowOptions = Field(default_factory=_sampled)
    """How the search's candidates and the evolved and best-of-k arms are run: sampled (temperature
    above 0, or k samples are one), with the call cap every proposed spec is held to."""
    grade_timeout_s: float = Field(default=10.0, gt=0)
    """Wall-clock limit of running one answer against its hidden tests."""
    iterations: int = Field(default=8, ge=0)
    """Proposal steps of the search."""
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    """The search's evaluation seeds (parent and child run on all of them)."""
    proposers: list[ComponentSpec] = Field(default_factory=lambda: [
        ComponentSpec(name="ratchet.workflows.proposers:OperatorProposer", weight=3.0),
        ComponentSpec(name="ratchet.workflows.proposers:AflowProposer", weight=1.0)])
    """The search's proposers; an operator proposer's ``max_model_calls`` is set to ``workflow.max_model_calls``."""
    selector: ComponentSpec = Field(default_factory=lambda: ComponentSpec(
        name="ratchet.workflows.selection:SoftMixedSelector", options={"top_k": 6, "alpha": 0.2, "uniform_share": 0.3}))
    """The search's parent choice (AFlow's soft mixed-probability selection)."""
    cost_gate: bool = False
    """Ask the gate for "better at no more model calls per task than the parent" too (within 10%: a
    workflow that revises only on failure varies in cost from sample to sample). Off by default:
    from an original that averages under 2 calls, it refuses every sampling workflow; the cost is
    matched at the comparison instead (``k`` of best-of-k from the evolved arm's calls)."""
    max_calls: int | None = Field(default=None, ge=1)
    """Most model calls of the search (proposals and evaluations); None: ``iterations`` decides."""
    run_id: str = "workflow-search"
    """The search's run in the store (resumed when it exists)."""


def search_config(config: HeadlineConfig) -> EvolveConfig:
    """The engine run of the search: the original workspace, the search and held-in problems only
    (no test split: the arms are scored apart, so the engine's report is on an empty held-out)."""
    overlap = sorted(set(config.test_ids) & (set(config.search_ids) | set(config.heldin_ids)))
    if overlap:
        raise RatchetError(f"test_ids overlap the search's problems: {', '.join(overlap[:5])}",
                           hint="the test split must be untouched by the search: take them out of test_ids")
    cap = config.workflow.max_model_calls
    proposers = [p.model_copy(update={"options": {"max_model_calls": cap, **p.options}})
                 if p.name.endswith(":OperatorProposer") else p for p in config.proposers]
    gate: dict[str, Any] = {"alpha": 0.05}
    if config.cost_gate:
        gate.update(cost_metric="model_calls", cost_tolerance=0.1)
    ids = [*config.search_ids, *config.heldin_ids]
    return EvolveConfig.model_validate({
        "workspace": str(config.original), "model": config.model, "proposer_model": config.proposer_model,
        "suite": {"name": "humaneval", "options": {"ids": ids, "grade_timeout_s": config.grade_timeout_s,
                                                   "workflow": config.workflow.model_dump()}},
        "splits": {"search": 0, "heldin": 0, "heldout": 0, "test": 0,
                   "ids": {"search": config.search_ids, "heldin": config.heldin_ids}},
        "seeds": config.seeds, "selector": config.selector.model_dump(),
        "proposers": [p.model_dump() for p in proposers], "gate": {"name": "paired", "options": gate},
        "smoke": {"tasks": min(4, len(config.heldin_ids) // 2), "margin": 0.25},
        "budget": {"max_calls": config.max_calls}, "iterations": config.iterations,
        "report": {"max_best_of_n": 1}, "approval": {"required": False},
    })


def best_of_k_spec(k: int) -> WorkflowSpec:
    """The baseline as a spec: sample ``k``, cut the model's test code, answer the code passing most
    visible examples (ties to the largest behaviour cluster)."""
    return WorkflowSpec.model_validate({"name": f"best-of-{k}", "steps": [
        {"op": "sample", "k": k}, {"op": "strip_tests"}, {"op": "select_by_examples"}]})


#: Steps that do not change what a sample -> select plan answers: cutting test code (the selection
#: runs the codes either way) and running the examples before the selection (it reuses those runs).
_NEUTRAL = {"strip_tests", "test_examples"}


def best_of_k_size(files: dict[str, str]) -> int | None:
    """``k`` when the workflow is best-of-k selected by the visible examples (a compiled spec of
    one ``sample`` step, then ``select_by_examples``, with only steps between or around them that
    change nothing: ``strip_tests``, ``test_examples``), else None (hand-written code included)."""
    plan = plan_of(files.get("workflow.py", ""))
    if plan is None:
        return None
    core = [step for step in plan if step.get("op") not in _NEUTRAL]
    if len(core) == 2 and core[0].get("op") == "sample" and core[1].get("op") == "select_by_examples" \
            and not core[0].get("max_tokens"):
        return int(core[0].get("k", 1))
    return None


def arm_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Pass@1 with its Wilson 95% interval, and mean calls, tokens and test runs per task."""
    n = len(rows)
    passed = sum(1 for r in rows if r["passed"])
    low, high = wilson(passed, n)
    mean = (lambda key: fmean(float(r[key]) for r in rows)) if n else (lambda key: 0.0)
    return {"passed": passed, "n": n, "pass_at_1": passed / n if n else 0.0, "wilson_low": low,
            "wilson_high": high, "calls_per_task": mean("model_calls"), "tokens_per_task": mean("tokens"),
            "test_runs_per_task": mean("test_runs")}


def paired(rows: list[dict[str, Any]], first: str, second: str) -> dict[str, Any] | None:
    """``first`` against ``second`` on the (task, seed) pairs both ran: how many only one solved, and
    the exact McNemar p-value (two-sided). None when they share no pair."""
    by = {(r["arm"], r["task"], r["seed"]): r["passed"] for r in rows}
    shared = sorted({(t, s) for a, t, s in by if a == first} & {(t, s) for a, t, s in by if a == second})
    if not shared:
        return None
    wins = sum(1 for t, s in shared if by[(first, t, s)] and not by[(second, t, s)])
    losses = sum(1 for t, s in shared if by[(second, t, s)] and not by[(first, t, s)])
    return {"first": first, "second": second, "pairs": len(shared), "only_first": wins, "only_second": losses,
            "mcnemar_p": mcnemar_exact(wins, losses)}


class Headline:
    """The comparison over one run of a store: :meth:`run` searches (or resumes the search), then
    scores the arms that are not scored yet, and returns the summary (also in ``headline/summary.json``)."""

    def __init__(self, config: HeadlineConfig, store: Any, model: Model, proposer_model: Model | None = None,
                 progress: Callable[[str], None] = lambda line: None) -> None:
        self.config = config
        self.store = store
        self.model = model
        self.proposer_model = proposer_model
        self.progress = progress
        self.evolve_config = search_config(config)
        self.manifest = load_manifest(config.original)
        self.original = snapshot(config.original, self.manifest)
        own = load_config(EvolveConfig, Path(config.original) / "evolve.yaml").suite.options
        self.original_options = HumanEvalOptions.model_validate(
            {**own, "limit": None, "ids": config.test_ids, "grade_timeout_s": config.grade_timeout_s})
        self.sampled_options = HumanEvalOptions(ids=config.test_ids, grade_timeout_s=config.grade_timeout_s,
                                                workflow=config.workflow)

    def open_run(self) -> Any:
        try:
            return self.store.open_run(self.config.run_id)
        except RatchetError:
            return self.store.create_run("evolve", self.evolve_config, name="workflow-search", run_id=self.config.run_id)

    def search(self, run: Any) -> Candidate:
        """Run (or resume) the engine to its stop; the best candidate, exported to ``headline/evolved``."""
        def event(e: dict[str, Any]) -> None:
            if e["kind"] in ("original", "step", "finished", "budget"):
                self.progress(f"search {e['kind']}: " + ", ".join(
                    f"{k}={str(v)[:160]}" for k, v in e.items() if k in ("step", "proposer", "status", "reason", "heldin", "best")))
        summary = Engine(self.evolve_config, run, self.model, on_event=event, proposer_model=self.proposer_model).execute()
        report = summary.get("report") or run.read_json("evolve/report.json")
        if not report:
            raise RatchetError(f"the search run {run.id} stopped without a report ({summary.get('state')})",
                               hint="see its events: ratchet evolve status " + run.id)
        best = run.get_candidate(report["best"]["id"])
        export = run.path(EXPORT)
        if not export.exists():
            materialize(best, self.config.original, export)
            # the run settings it was found and is scored under, not the original's (greedy, 3 calls)
            settings = self.evolve_config.model_dump(mode="json", exclude_defaults=True)
            (export / "evolve.yaml").write_text(
                "# The settings of the search that found this workflow (ratchet.workflows.headline).\n"
                + yaml.safe_dump({**settings, "workspace": str(export)}, sort_keys=False))
        return best

    def score(self, run: Any, arm: str, candidate: Candidate, options: HumanEvalOptions) -> list[dict[str, Any]]:
        """The arm's rows on the test split; only the (task, seed) pairs not yet recorded are run,
        each appended the moment it is graded."""
        rows = [r for r in run.read_jsonl(ARMS) if r["arm"] == arm]
        done = {(r["task"], r["seed"]) for r in rows}
        suite = HumanEvalSuite(options, EngineContext(self.manifest, self.config.original, model=self.model))
        for seed in self.config.test_seeds:
            for task in suite.tasks():
                if (task.id, seed) in done:
                    continue
                [result] = suite.evaluate(candidate, [Task(task.id, task.input)], seed)
                row = {"arm": arm, "candidate": candidate.id, "task": task.id, "seed": seed,
                       "passed": result.score >= 1.0,
                       **{k: result.metrics.get(k, 0.0) for k in ("model_calls", "tokens", "test_runs")},
                       "failures": sorted({f.kind for f in result.failures})}
                run.append_jsonl(ARMS, row)
                rows.append(row)
                self.progress(f"{arm} {task.id} seed {seed}: {'passed' if row['passed'] else 'failed'}, "
                              f"{row['model_calls']:g} calls ({len(rows)}/{len(suite.tasks()) * len(self.config.test_seeds)})")
        return rows

    def run(self) -> dict[str, Any]:
        run = self.open_run()
        best = self.search(run)
        evolved = self.score(run, "evolved", best, self.sampled_options)
        k = max(1, math.ceil(fmean(r["model_calls"] for r in evolved) - 1e-9))
        baseline_files = {**compile_spec(best_of_k_spec(k)),
                          **{p: t for p, t in self.original.files.items() if p.startswith("prompts/")}}
        baseline = Candidate.from_files("best-of-k", baseline_files)
        self.score(run, "best-of-k", baseline, self.sampled_options.model_copy(update={
            "workflow": self.config.workflow.model_copy(update={"max_model_calls": max(k, self.config.workflow.max_model_calls)})}))
        self.score(run, "original", self.original, self.original_options)
        summary = self.summary(run, best, k)
        run.write_json(SUMMARY, summary)
        return summary

    def summary(self, run: Any, best: Candidate, k: int) -> dict[str, Any]:
        rows = run.read_jsonl(ARMS)
        arms = {arm: arm_summary([r for r in rows if r["arm"] == arm]) for arm in ARM_NAMES}
        return {
            "run": run.id, "config": self.config.model_dump(mode="json"), "k": k,
            "arms": arms,
            # per (task, seed), so a reference graded elsewhere on the same problems (GEPA's best
            # prompt in bench/evolve_peers.py) can be paired with each arm
            "solved": {arm: sorted(f"{r['task']}#{r['seed']}" for r in rows if r["arm"] == arm and r["passed"])
                       for arm in ARM_NAMES},
            "evolved": {"id": best.id, "is_original": best.id == self.original.id,
                        "best_of_k": best_of_k_size(best.files), "plan": plan_of(best.files.get("workflow.py", "")),
                        "workflow": best.files.get("workflow.py", ""), "exported_to": str(run.path(EXPORT))},
            "paired": {"evolved_vs_best_of_k": paired(rows, "evolved", "best-of-k"),
                       "evolved_vs_original": paired(rows, "evolved", "original"),
                       "best_of_k_vs_original": paired(rows, "best-of-k", "original")},
            "search": {k2: v for k2, v in (run.read_json("evolve/report.json") or {}).items()
                       if k2 in ("proposals", "budget", "task_evals", "stop_reason")},
        }
