"""What differs between the domains of the workflow-search headline (:mod:`ratchet.workflows.headline`).

The comparison itself (search on the engine, then the evolved, best-of-k and original arms on an
untouched test split, rows appended as they are scored) is one piece of code; a
:class:`HeadlineDomain` holds the rest: the engine suite the search runs, the suite the arms are
scored with (the original's own settings or the sampled ones), the best-of-k baseline and its
detector, what a row records, and the summary and paired statistics of the rows.

- :class:`HumanEvalDomain`: a task is one problem; a row records ``passed``; best-of-k is
  sample k -> strip_tests -> select_by_examples; pass@1 with Wilson, exact McNemar.
- :class:`ratchet.workflows.games.GamesDomain`: a task is one one-player game episode; a row
  records its reward and whether it was solved; best-of-k is sample k -> majority vote on the move.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any, Protocol

from ratchet.config import Settings, load_config
from ratchet.contracts import Candidate, Task, TaskResult
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.suites.config import HumanEvalOptions, WorkflowOptions
from ratchet.evolve.suites.humaneval import HumanEvalSuite
from ratchet.stats import mcnemar_exact, wilson
from ratchet.workflows.proposers import plan_of
from ratchet.workflows.spec import WorkflowSpec, compile_spec

if TYPE_CHECKING:
    from ratchet.workflows.headline import HeadlineConfig


class HeadlineDomain(Protocol):
    """What the headline asks of a domain (see the module)."""

    name: str

    def default_workflow(self) -> WorkflowOptions:
        """How the search's candidates and the evolved and best-of-k arms run when the config names none."""

    def search_suite(self, config: HeadlineConfig, ids: list[str]) -> dict[str, Any]:
        """The engine's ``suite: {name, options}`` holding the search and held-in tasks ``ids``."""

    def proposer_options(self, name: str) -> dict[str, Any]:
        """Options a proposer (by import path) gets in this domain (a menu, a prompt); ``{}``: none."""

    def arm_options(self, config: HeadlineConfig, own: dict[str, Any] | None) -> Settings:
        """The arms' suite options on the test split: the original's own (``own``, its ``evolve.yaml``
        suite options) or, with ``own`` None, the search's sampled settings."""

    def arm_suite(self, options: Settings, ctx: EngineContext) -> Any:
        """The suite that scores an arm under ``options``."""

    def test_tasks(self, suite: Any, config: HeadlineConfig) -> list[Task]:
        """The test split's tasks, in scoring order."""

    def row(self, result: TaskResult) -> dict[str, Any]:
        """What a row records of one task's result beside arm, candidate, task and seed."""

    def describe(self, row: dict[str, Any]) -> str:
        """The row's outcome in a few words, for the progress line."""

    def solved(self, row: dict[str, Any]) -> bool:
        """Whether the row's task was solved (HumanEval: passed; a game: reward 1)."""

    def calls_k(self, rows: list[dict[str, Any]]) -> int:
        """``k`` of best-of-k from the evolved arm's rows: its measured mean calls, rounded up."""

    def baseline_files(self, k: int, original: Candidate) -> dict[str, str]:
        """The best-of-k workflow's files (the original's prompts are added by the headline)."""

    def best_of_k_size(self, files: dict[str, str]) -> int | None:
        """``k`` when a workflow is this domain's best-of-k, else None."""

    def arm_summary(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """One arm's numbers, computed from its rows."""

    def paired(self, rows: list[dict[str, Any]], first: str, second: str) -> dict[str, Any] | None:
        """``first`` against ``second`` on the (task, seed) pairs both ran; None when they share none."""


# ------------------------------------------------------------------------------ HumanEval


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


def shared_pairs(rows: list[dict[str, Any]], first: str, second: str, key: str) -> tuple[dict, list]:
    """``{(arm, task, seed): row[key]}`` and the sorted (task, seed) pairs both arms ran."""
    by = {(r["arm"], r["task"], r["seed"]): r[key] for r in rows}
    shared = sorted({(t, s) for a, t, s in by if a == first} & {(t, s) for a, t, s in by if a == second})
    return by, shared


def paired(rows: list[dict[str, Any]], first: str, second: str) -> dict[str, Any] | None:
    """``first`` against ``second`` on the (task, seed) pairs both ran: how many only one solved, and
    the exact McNemar p-value (two-sided). None when they share no pair."""
    by, shared = shared_pairs(rows, first, second, "passed")
    if not shared:
        return None
    wins = sum(1 for t, s in shared if by[(first, t, s)] and not by[(second, t, s)])
    losses = sum(1 for t, s in shared if by[(second, t, s)] and not by[(first, t, s)])
    return {"first": first, "second": second, "pairs": len(shared), "only_first": wins, "only_second": losses,
            "mcnemar_p": mcnemar_exact(wins, losses)}


def sampled_code_workflow() -> WorkflowOptions:
    return WorkflowOptions(max_model_calls=4, max_test_runs=8, max_steps=16, max_tokens=512, temperature=0.7)


class HumanEvalDomain:
    """HumanEval problems graded by their hidden tests (see the module)."""

    name = "humaneval"

    def default_workflow(self) -> WorkflowOptions:
        return sampled_code_workflow()

    def search_suite(self, config: HeadlineConfig, ids: list[str]) -> dict[str, Any]:
        return {"name": "humaneval", "options": {"ids": ids, "grade_timeout_s": config.grade_timeout_s,
                                                 "workflow": config.workflow.model_dump()}}

    def proposer_options(self, name: str) -> dict[str, Any]:
        # The AFlow proposer rewrites the whole workflow.py (1,292 tokens for humaneval-coder's):
        # measured, the 1.5B's reply with its claim was cut at the default 1,500 tokens. With its
        # ~3,400-token request that needs a window past 4,096 (local:NAME?n_ctx=8192).
        return {"max_tokens": 2500} if name.endswith(":AflowProposer") else {}

    def arm_options(self, config: HeadlineConfig, own: dict[str, Any] | None) -> HumanEvalOptions:
        if own is not None:
            return HumanEvalOptions.model_validate(
                {**own, "limit": None, "ids": config.test_ids, "grade_timeout_s": config.grade_timeout_s})
        return HumanEvalOptions(ids=config.test_ids, grade_timeout_s=config.grade_timeout_s, workflow=config.workflow)

    def arm_suite(self, options: Settings, ctx: EngineContext) -> HumanEvalSuite:
        return HumanEvalSuite(options, ctx)

    def test_tasks(self, suite: Any, config: HeadlineConfig) -> list[Task]:
        return [Task(t.id, t.input) for t in suite.tasks()]

    def row(self, result: TaskResult) -> dict[str, Any]:
        return {"passed": result.score >= 1.0,
                **{k: result.metrics.get(k, 0.0) for k in ("model_calls", "tokens", "test_runs")},
                "failures": sorted({f.kind for f in result.failures})}

    def describe(self, row: dict[str, Any]) -> str:
        return "passed" if row["passed"] else "failed"

    def solved(self, row: dict[str, Any]) -> bool:
        return bool(row["passed"])

    def calls_k(self, rows: list[dict[str, Any]]) -> int:
        return max(1, math.ceil(fmean(r["model_calls"] for r in rows) - 1e-9))

    def baseline_files(self, k: int, original: Candidate) -> dict[str, str]:
        return compile_spec(best_of_k_spec(k))

    def best_of_k_size(self, files: dict[str, str]) -> int | None:
        return best_of_k_size(files)

    def arm_summary(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        return arm_summary(rows)

    def paired(self, rows: list[dict[str, Any]], first: str, second: str) -> dict[str, Any] | None:
        return paired(rows, first, second)


def workspace_suite_options(original: Path) -> dict[str, Any]:
    """The suite options of the original's own ``evolve.yaml`` (the original arm's settings)."""
    return load_config(EvolveConfig, Path(original) / "evolve.yaml").suite.options
