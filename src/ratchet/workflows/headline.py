"""A workflow search measured against the obvious baseline at equal cost, on an untouched test split.

Two domains (``HeadlineConfig.domain``; what differs between them is a
:class:`~ratchet.workflows.domains.HeadlineDomain`): ``humaneval``, described below, and ``games``,
one-player TextArena episodes played move by move, where a row records the episode's reward and
whether it was solved, best-of-k is the original's move sampled k times and the majority move
played, and k is the evolved arm's calls per *move* (:mod:`ratchet.workflows.games`).

Three arms, each run on the same test problems and seeds and scored per task (HumanEval: passed,
model calls, tokens, test runs):

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

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, model_validator

from ratchet.config import Settings
from ratchet.contracts import Candidate, Model, RatchetError
from ratchet.evolve.archive import Archive
from ratchet.evolve.config import ComponentSpec, EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.loop import Engine
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.suites.config import WorkflowOptions
from ratchet.evolve.workspace import materialize, snapshot
from ratchet.workflows.domains import (
    HeadlineDomain,
    HumanEvalDomain,
    arm_summary,
    best_of_k_size,
    best_of_k_spec,
    paired,
    workspace_suite_options,
)
from ratchet.workflows.games import GamesDomain
from ratchet.workflows.proposers import plan_of

__all__ = ["ARMS", "ARM_NAMES", "DOMAINS", "EXPORT", "SUMMARY", "Headline", "HeadlineConfig", "arm_summary",
           "best_of_k_size", "best_of_k_spec", "paired", "search_config"]

ARMS = "headline/arms.jsonl"
SUMMARY = "headline/summary.json"
EXPORT = "headline/evolved"
#: The headline's wall time over every session that worked on it (a resumed run adds to it).
WALL = "headline/wall.json"
ARM_NAMES = ("original", "evolved", "best-of-k")
#: The domains by the name ``HeadlineConfig.domain`` gives.
DOMAINS: dict[str, type[HeadlineDomain]] = {"humaneval": HumanEvalDomain, "games": GamesDomain}


class HeadlineConfig(Settings):
    """One comparison: the search's settings, its splits and the arms' test split."""

    original: Path
    """The starting workspace (manifest, ``evolve.yaml`` whose suite options are the original arm's
    own settings, ``prompts/system.md``); the search starts from its editable files."""
    domain: Literal["humaneval", "games"] = "humaneval"
    """What a task is: a HumanEval problem (ids ``HumanEval/N``), or one episode of a one-player
    TextArena game (ids ``GAME#SEED``, e.g. ``GuessTheNumber-v0#100``; rows record its reward)."""
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
    workflow: WorkflowOptions
    """How the search's candidates and the evolved and best-of-k arms are run: sampled (temperature
    above 0, or k samples are one), with the call cap every proposed spec is held to (per task;
    games: per move). Not given: the domain's (HumanEval: 4 calls, 8 test runs, 512 tokens at 0.7;
    games: 4 calls per move, 192 tokens at 0.7, the move libraries)."""
    grade_timeout_s: float = Field(default=10.0, gt=0)
    """Wall-clock limit of running one answer against its hidden tests (HumanEval only)."""
    iterations: int = Field(default=8, ge=0)
    """Proposal steps of the search."""
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    """The search's evaluation seeds (parent and child run on all of them)."""
    proposers: list[ComponentSpec] = Field(default_factory=lambda: [
        ComponentSpec(name="ratchet.workflows.edits:EditChoiceProposer", weight=3.0),
        ComponentSpec(name="ratchet.workflows.proposers:AflowProposer", weight=1.0)])
    """The search's proposers; an operator-level proposer's ``max_model_calls`` is set to
    ``workflow.max_model_calls``, and each gets its domain's options (games: the move menu, the
    move prompt of the AFlow proposer) unless it sets them. The edit-choice proposer, not the
    whole-plan :class:`~ratchet.workflows.proposers.OperatorProposer`: asked for whole plans, the
    1.5B answered one degenerate plan in nine of nine asks of a games search and the 0.5B the
    prompt's example (``docs/workflows.md``)."""
    selector: ComponentSpec = Field(default_factory=lambda: ComponentSpec(
        name="ratchet.workflows.selection:SoftMixedSelector", options={"top_k": 6, "alpha": 0.2, "uniform_share": 0.3}))
    """The search's parent choice (AFlow's soft mixed-probability selection)."""
    cost_gate: bool = False
    """Ask the gate for "better at no more model calls per task than the parent" too (within 10%: a
    workflow that revises only on failure varies in cost from sample to sample). Off by default:
    from an original that averages under 2 calls, it refuses every sampling workflow; the cost is
    matched at the comparison instead (``k`` of best-of-k from the evolved arm's calls)."""
    gate_correction: Literal["spending", "none"] = "none"
    """The search gate's multiple-comparison correction (``GateOptions.correction``). ``none``: each
    proposal tested at 0.05. The arms' comparison on the untouched test split is what the headline
    reports, so a change the search keeps by chance costs no validity there; under ``spending`` the
    k-th test is at 0.05 / 2^k: with one seed the third test needs 8 changed problems all going the
    child's way (``none``: 5 of 5), a gain a search over 30 held-in problems seldom shows."""
    max_calls: int | None = Field(default=None, ge=1)
    """Most model calls of the search (proposals and evaluations); None: ``iterations`` decides."""
    run_id: str = "workflow-search"
    """The search's run in the store (resumed when it exists)."""

    @model_validator(mode="before")
    @classmethod
    def _domain_workflow(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("workflow") is None:
            domain = DOMAINS.get(data.get("domain", "humaneval"))
            if domain is not None:  # an unknown domain is the field's own error
                data = {**data, "workflow": domain().default_workflow()}
        return data

    @model_validator(mode="after")
    def _move_libraries(self) -> HeadlineConfig:
        # a compiled move workflow imports moveops in the sandbox: without it every move is an error
        if self.domain == "games" and "ratchet.workflows.moveops" not in self.workflow.libraries:
            raise ValueError("workflow.libraries must list ratchet.workflows.moveops for the games domain "
                             "(ratchet.workflows.movespec.MOVE_LIBRARIES)")
        return self


def search_config(config: HeadlineConfig) -> EvolveConfig:
    """The engine run of the search: the original workspace, the search and held-in problems only
    (no test split: the arms are scored apart, so the engine's report is on an empty held-out)."""
    overlap = sorted(set(config.test_ids) & (set(config.search_ids) | set(config.heldin_ids)))
    if overlap:
        raise RatchetError(f"test_ids overlap the search's problems: {', '.join(overlap[:5])}",
                           hint="the test split must be untouched by the search: take them out of test_ids")
    domain = DOMAINS[config.domain]()
    cap = config.workflow.max_model_calls
    proposers = []
    for p in config.proposers:
        own = {**domain.proposer_options(p.name), **p.options}
        if p.name.endswith((":OperatorProposer", ":EditChoiceProposer")):
            own = {"max_model_calls": cap, **own}
        proposers.append(p.model_copy(update={"options": own}) if own != p.options else p)
    gate: dict[str, Any] = {"alpha": 0.05, "correction": config.gate_correction}
    if config.cost_gate:
        gate.update(cost_metric="model_calls", cost_tolerance=0.1)
    ids = [*config.search_ids, *config.heldin_ids]
    return EvolveConfig.model_validate({
        "workspace": str(config.original), "model": config.model, "proposer_model": config.proposer_model,
        "suite": domain.search_suite(config, ids),
        "splits": {"search": 0, "heldin": 0, "heldout": 0, "test": 0,
                   "ids": {"search": config.search_ids, "heldin": config.heldin_ids}},
        "seeds": config.seeds, "selector": config.selector.model_dump(),
        "proposers": [p.model_dump() for p in proposers], "gate": {"name": "paired", "options": gate},
        "smoke": {"tasks": min(4, len(config.heldin_ids) // 2), "margin": 0.25},
        "budget": {"max_calls": config.max_calls}, "iterations": config.iterations,
        "report": {"max_best_of_n": 1}, "approval": {"required": False},
    })


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
        self.domain = DOMAINS[config.domain]()
        self.evolve_config = search_config(config)
        self.manifest = load_manifest(config.original)
        self.original = snapshot(config.original, self.manifest)
        self.original_options = self.domain.arm_options(config, workspace_suite_options(config.original))
        self.sampled_options = self.domain.arm_options(config, None)

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

    def score(self, run: Any, arm: str, candidate: Candidate, options: Settings) -> list[dict[str, Any]]:
        """The arm's rows on the test split; only the (task, seed) pairs not yet recorded are run,
        each appended the moment it is graded."""
        rows = [r for r in run.read_jsonl(ARMS) if r["arm"] == arm]
        done = {(r["task"], r["seed"]) for r in rows}
        suite = self.domain.arm_suite(options, EngineContext(self.manifest, self.config.original, model=self.model))
        tasks = self.domain.test_tasks(suite, self.config)
        for seed in self.config.test_seeds:
            for task in tasks:
                if (task.id, seed) in done:
                    continue
                [result] = suite.evaluate(candidate, [task], seed)
                row = {"arm": arm, "candidate": candidate.id, "task": task.id, "seed": seed, **self.domain.row(result)}
                run.append_jsonl(ARMS, row)
                rows.append(row)
                self.progress(f"{arm} {task.id} seed {seed}: {self.domain.describe(row)}, "
                              f"{row['model_calls']:g} calls ({len(rows)}/{len(tasks) * len(self.config.test_seeds)})")
        return rows

    def run(self) -> dict[str, Any]:
        run = self.open_run()
        spent = run.read_json(WALL) or {"wall_s": 0.0, "sessions": 0}
        started, tell = time.monotonic(), self.progress

        def tick() -> None:  # after each progress line: a killed session keeps its time to its last line
            run.write_json(WALL, {"wall_s": round(spent["wall_s"] + time.monotonic() - started, 1),
                                  "sessions": spent["sessions"] + 1})

        def progress(line: str) -> None:
            tell(line)
            tick()

        self.progress = progress
        try:
            return self._run(run)
        finally:
            tick()
            self.progress = tell

    def _run(self, run: Any) -> dict[str, Any]:
        best = self.search(run)
        evolved = self.score(run, "evolved", best, self.sampled_options)
        k = self.domain.calls_k(evolved)
        baseline_files = {**self.domain.baseline_files(k, self.original),
                          **{p: t for p, t in self.original.files.items() if p.startswith("prompts/")}}
        baseline = Candidate.from_files("best-of-k", baseline_files)
        self.score(run, "best-of-k", baseline, self.sampled_options.model_copy(update={
            "workflow": self.config.workflow.model_copy(update={"max_model_calls": max(k, self.config.workflow.max_model_calls)})}))
        self.score(run, "original", self.original, self.original_options)
        summary = self.summary(run, best, k)
        run.write_json(SUMMARY, summary)
        return summary

    def spent(self) -> dict[str, Any]:
        """The wall time every session spent on this headline so far (``WALL``), and how many."""
        return self.open_run().read_json(WALL) or {"wall_s": 0.0, "sessions": 0}

    def summary(self, run: Any, best: Candidate, k: int) -> dict[str, Any]:
        rows = run.read_jsonl(ARMS)
        report = run.read_json("evolve/report.json") or {}
        arms = {arm: self.domain.arm_summary([r for r in rows if r["arm"] == arm]) for arm in ARM_NAMES}
        return {
            "run": run.id, "config": self.config.model_dump(mode="json"), "k": k,
            "arms": arms,
            # per (task, seed), so a reference graded elsewhere on the same problems (GEPA's best
            # prompt in bench/evolve_peers.py) can be paired with each arm
            "solved": {arm: sorted(f"{r['task']}#{r['seed']}" for r in rows if r["arm"] == arm and self.domain.solved(r))
                       for arm in ARM_NAMES},
            "evolved": {"id": best.id, "is_original": best.id == self.original.id,
                        "best_of_k": self.domain.best_of_k_size(best.files), "plan": plan_of(best.files.get("workflow.py", "")),
                        "workflow": best.files.get("workflow.py", ""), "exported_to": str(run.path(EXPORT))},
            "paired": {"evolved_vs_best_of_k": self.domain.paired(rows, "evolved", "best-of-k"),
                       "evolved_vs_original": self.domain.paired(rows, "evolved", "original"),
                       "best_of_k_vs_original": self.domain.paired(rows, "best-of-k", "original")},
            "search": {**{k2: v for k2, v in report.items()
                          if k2 in ("proposals", "budget", "task_evals", "stop_reason")},
                       "steps": search_steps(run, (report.get("proposals") or {}).get("failed_steps") or [])},
        }


def search_steps(run: Any, failed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each step of the search, in order: its proposer, what it aimed at and the gate's verdict
    with the held-in gain and p, or why it made no candidate (``failed``: the report's failed
    steps): what a reader of a search that kept nothing needs to see whether the changes were
    neutral, harmful or just short of the gate."""
    archive = Archive(run)
    steps = []
    for cand in archive.candidates():
        step = cand.meta.get("step")
        decision = archive.decision(cand.id)
        if step is None or decision is None:  # the original, or a child cut off before its verdict
            continue
        steps.append({"step": step, "proposer": cand.meta.get("proposer"), "candidate": cand.id,
                      "aimed_at": (cand.meta.get("claim") or {}).get("target", ""), "accepted": decision.accepted,
                      "heldin_gain": decision.numbers.get("heldin_gain"), "p_value": decision.numbers.get("p_value"),
                      "reason": decision.reason})
    steps += [{"step": f["step"], "proposer": f["proposer"], "candidate": None, "aimed_at": "", "accepted": False,
               "heldin_gain": None, "p_value": None, "reason": f["reason"]} for f in failed]
    return sorted(steps, key=lambda st: st["step"])
