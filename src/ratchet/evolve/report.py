"""The final report: did the search help, on tasks it never saw, against a fair baseline?

Three arms on the test split (held-out when no test split is configured, and then said so):

- **original**: the workspace as it was, on every evaluation seed;
- **best**: the accepted candidate with the best held-in score, on the same tasks and seeds;
- **original, best-of-N**: the original given the search's extra budget as N attempts per task
  (a task counts as solved if any attempt solves it, so this is an upper bound on what the same
  budget buys by resampling). N = 1 + the search's spend / the cost of one pass of the original
  over the test tasks, in model calls when an evaluation calls the model, else in task
  evaluations; capped by ``report.max_best_of_n``. The first attempt is the original's own pass
  (the first evaluation seed, its own decoding); the N - 1 extra ones are sampled, each with its own
  seed, at ``report.best_of_n_temperature`` (through the suite's ``sampled``, or set as its
  ``workflow.temperature``), since under greedy decoding a resample repeats the first answer and
  the arm would just equal the original. ``distinct_attempts`` counts the attempts that differed
  (score or metrics on some task): 1 means the arm is N copies of one run, and is only the original.

Each arm has a bootstrap confidence interval over test tasks; the differences are paired
bootstraps. Proposers' claims are scored: precision = predicted flips that happened / predicted,
recall = predicted flips that happened / all flips, per proposer, over every evaluated child.

A suite may judge the best candidate its own way after the three arms (:class:`ReportingSuite`,
e.g. the AutoHarness legality suite's held-out protocol with the model and its adoption verdict):
:func:`suite_stage` runs it, and its :class:`StageReport` lands in the report as ``suite_report``.

After a run has decided, :func:`paired_comparison` tests a candidate against the original on
tasks or seeds measured later (a post-hoc test) with the gate's sign-flip test.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import fmean
from typing import Any, Protocol, runtime_checkable

from ratchet.contracts import Candidate, Evaluator, Model, Task, TaskResult
from ratchet.evolve.archive import Archive, per_task_means
from ratchet.evolve.cache import CachedEvaluator, unit_name
from ratchet.evolve.context import EngineContext
from ratchet.stats import bootstrap_mean_ci, sign_flip_p

BEST_OF_N_SEED = 100_000  # attempts of the best-of-N arm use seeds far from the evaluation seeds


def bootstrap_ci(values: Sequence[float], resamples: int, confidence: float, seed: int = 0) -> dict[str, float]:
    """Mean, percentile bootstrap interval (:func:`ratchet.stats.bootstrap_mean_ci`) and count of
    ``values`` (tasks resampled with replacement), as the report stores them."""
    if not values:
        return {"mean": 0.0, "low": 0.0, "high": 0.0, "n": 0}
    low, high = bootstrap_mean_ci(values, resamples, confidence, seed)
    return {"mean": fmean(values), "low": low, "high": high, "n": len(values)}


def paired_comparison(scores: Sequence[Mapping[str, Any]], candidate_id: str, original_id: str,
                      resamples: int = 20_000, seed: int = 0) -> dict[str, Any] | None:
    """A candidate against the original over the tasks both ran, after the run has decided (a
    post-hoc test on more tasks or seeds): per task the difference of their mean scores over the
    seeds both ran, its mean, on how many tasks it is better and worse, and the one-sided
    sign-flip p-value of "better" (:func:`ratchet.stats.sign_flip_p`, the gate's test; ``exact``
    when every sign assignment was counted). ``scores`` rows hold ``candidate``, ``task``, ``seed``
    (default 0) and ``score``. None when no task has a seed both ran."""
    by: dict[tuple[str, str], dict[int, float]] = {}
    for r in scores:
        by.setdefault((r["candidate"], r["task"]), {})[int(r.get("seed", 0))] = float(r["score"])
    diffs = []
    for task in sorted({t for c, t in by if c == candidate_id}):
        mine, theirs = by[(candidate_id, task)], by.get((original_id, task), {})
        shared = sorted(set(mine) & set(theirs))
        if shared:
            diffs.append(fmean(mine[s] for s in shared) - fmean(theirs[s] for s in shared))
    if not diffs:
        return None
    return {"tasks": len(diffs), "mean_difference": fmean(diffs), "better": sum(d > 0 for d in diffs),
            "worse": sum(d < 0 for d in diffs), "p_value": sign_flip_p(diffs, resamples, random.Random(seed)),
            "exact": 2 ** len(diffs) <= resamples, "resamples": resamples}


@runtime_checkable
class Resamplable(Protocol):
    """A suite that can make its evaluations sample (the coding-agent suite): ``sampled(t)`` is a
    copy whose model calls use temperature ``t`` with the evaluation seed as sampling seed, and
    whose fingerprint differs, so its results are cached apart from the greedy ones."""

    def sampled(self, temperature: float) -> Any: ...


@dataclass(frozen=True)
class StageReport:
    """What a suite's report stage found: ``summary`` is one line for people (``ratchet evolve
    status``, the run's summary in ``ratchet runs show``, the dashboard's run page), ``detail`` the
    suite's own JSON record of it."""

    name: str
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ReportingSuite(Protocol):
    """A suite with a report stage of its own. After the final report's arms, the engine calls
    ``report_stage`` once with the best candidate, the report so far, the engine's context (its
    ``run`` and ``extra``) and the run's model (unaccounted: the stage accounts its own calls, which
    are measurement, not search). None: nothing to report for this run. The stage runs again when a
    run killed during it is resumed (the search is not redone: its evaluations come from the
    cache), so a long stage keeps what it finished in the run and reuses it."""

    def report_stage(self, best: Candidate, report: Mapping[str, Any], ctx: EngineContext,
                     model: Model | None) -> StageReport | None: ...


def suite_stage(engine: Any, report: dict[str, Any]) -> StageReport | None:
    """The run's suite's report stage on the report's best candidate (None when the suite has none,
    or it had nothing to report); its record is added to ``report`` as ``suite_report``."""
    if not isinstance(engine.suite, ReportingSuite):
        return None
    stage = engine.suite.report_stage(engine.archive.get(report["best"]["id"]), report, engine.ctx, engine.model)
    if stage is not None:
        report["suite_report"] = asdict(stage)
    return stage


def sampling_evaluator(engine: Any, temperature: float | None) -> tuple[Evaluator, float | None]:
    """The evaluator of the best-of-N arm's extra attempts, and the temperature they sample at.

    For a :class:`Resamplable` suite, its ``sampled(temperature)``; for a suite that drives a
    workflow, the run's suite rebuilt with ``workflow.temperature`` set (its fingerprint holds the
    temperature, so its results are cached apart from the greedy ones); the run's own evaluator
    when there is nothing to change (``temperature`` None, the suite already samples at it, or it
    can do neither: then its attempts differ by seed alone, and None says so, and the report
    counts how many attempts were distinct).
    """
    if temperature is not None and isinstance(engine.suite, Resamplable):
        suite = engine.suite.sampled(temperature)
        return CachedEvaluator(suite, engine.run, executor=engine.executor), temperature
    options = getattr(engine.suite, "options", None)
    workflow = getattr(options, "workflow", None)
    if temperature is None or workflow is None:
        return engine.evaluator, getattr(workflow, "temperature", None)
    if workflow.temperature == temperature:
        return engine.evaluator, temperature
    sampled = options.model_copy(update={"workflow": workflow.model_copy(update={"temperature": temperature})})
    # Built as the registry builds every component (Cls(options, ctx)); the budget was lifted for
    # the report, so no budget check is attached.
    suite = type(engine.suite)(sampled, engine.suite_ctx)  # the same way to the model: the journal or the gateway
    return CachedEvaluator(suite, engine.run, executor=engine.executor), temperature


def claim_scores(checks: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Micro-averaged claim precision and recall per proposer."""
    out: dict[str, dict[str, float | None]] = {}
    for proposer in sorted({str(c.get("proposer")) for c in checks}):
        mine = [c for c in checks if str(c.get("proposer")) == proposer]
        predicted = sum(len(c["predicted"]) for c in mine)
        actual = sum(len(c["actual"]) for c in mine)
        hit = sum(len(c["hit"]) for c in mine)
        out[proposer] = {"proposals": float(len(mine)), "predicted": float(predicted), "flipped": float(actual),
                         "precision": hit / predicted if predicted else None,
                         "recall": hit / actual if actual else None}
    return out


def final_report(engine: Any, stop_reason: str | None = None) -> dict[str, Any]:
    """Evaluate the three arms on the untouched split and summarize the run (see the module doc)."""
    cfg = engine.config.report
    archive = engine.archive
    split = "test" if engine.splits["test"] else "heldout"
    root = archive.candidates()[0]
    accepted = archive.candidates("accepted")
    best = max(accepted, key=lambda c: archive.score(c.id, "heldin") or 0.0)
    tasks = engine.splits[split]
    seeds = engine.config.seeds

    spend = engine.search_spend()
    spent_evals, spent_calls = spend["evals"], spend["calls"]
    original = per_task_means(engine.evaluate(root, split, seeds[:1]))
    # What one pass of the original costs, read from the journal rather than from this process's
    # accountant: after a resume the pass may come from the cache and cost nothing here.
    pass_calls = (engine.journal.calls_in({unit_name(root.id, t.id, seeds[0]) for t in tasks})
                  if engine.journal is not None else 0)
    original = per_task_means(engine.evaluate(root, split))
    improved = per_task_means(engine.evaluate(best, split))
    unit, spent, per_pass = (("model calls", spent_calls, pass_calls) if pass_calls
                             else ("task evaluations", spent_evals, len(tasks)))
    budget_n = 1 + spent // max(1, per_pass)
    n = max(1, min(cfg.max_best_of_n, budget_n))
    sampler, temperature = sampling_evaluator(engine, cfg.best_of_n_temperature)
    attempt_seeds = [seeds[0], *(BEST_OF_N_SEED + i for i in range(1, n))]
    runs = [engine.evaluate(root, split, seeds[:1])]
    runs += [sampler.evaluate(root, tasks, seed) for seed in attempt_seeds[1:]]
    attempts = [per_task_means(rs) for rs in runs]
    best_of_n = {t.id: max(a.get(t.id, 0.0) for a in attempts) for t in tasks}
    # Measured, not assumed: attempts with the same score and metrics on every task (the coding
    # agent's steps and tokens, a workflow's calls and test runs) are one sample; traces are not
    # compared, they hold timings. A suite that can neither sample nor vary by seed (a greedy
    # model, no way to set its temperature) gives N copies of one run, and then this says 1.
    distinct = len({tuple(sorted((r.task_id, r.score, tuple(sorted(r.metrics.items()))) for r in rs)) for rs in runs})

    ids = [t.id for t in tasks]

    def ci(values: list[float]) -> dict[str, float]:
        return bootstrap_ci(values, cfg.bootstrap, cfg.confidence, engine.config.seed)

    checks = [archive.claim_check(c.id) for c in archive.candidates()]
    failed = archive.unusable()
    decisions = [(c, archive.decision(c.id)) for c in archive.candidates() if c.parent_id is not None]
    return {
        "split": split,
        "split_untouched": split == "test",
        "tasks": len(ids),
        "seeds": seeds,
        "stop_reason": stop_reason or "iterations",
        "original": {"id": root.id, **ci([original.get(t, 0.0) for t in ids])},
        "best": {"id": best.id, "lineage": archive.lineage(best.id), **ci([improved.get(t, 0.0) for t in ids])},
        # ``attempts`` is the N of best-of-N (the CI's own ``n`` is the number of test tasks)
        "original_best_of_n": {**ci([best_of_n.get(t, 0.0) for t in ids]), "attempts": n, "budget_unit": unit,
                               "search_spend": spent, "pass_cost": per_pass, "uncapped_attempts": budget_n,
                               "temperature": temperature, "attempt_seeds": attempt_seeds,
                               "distinct_attempts": distinct},
        "comparison": {
            "best_minus_original": ci([improved.get(t, 0.0) - original.get(t, 0.0) for t in ids]),
            "best_minus_best_of_n": ci([improved.get(t, 0.0) - best_of_n.get(t, 0.0) for t in ids]),
        },
        "proposals": {
            "total": len(decisions),
            "accepted": sum(1 for _, d in decisions if d is not None and d.accepted),
            "static_rejects": sum(1 for _, d in decisions if d is not None and d.reason.startswith("static check")),
            "smoke_rejects": sum(1 for _, d in decisions if d is not None and d.reason.startswith("smoke")),
            # steps that made no candidate (no usable reply after the retries, a proposer error, an
            # unstorable or duplicate change): their calls were spent all the same
            "failed": len(failed),
            "failed_model_calls": sum(int(f.get("model_calls") or 0) for f in failed),
            "failed_steps": [{k: f.get(k) for k in ("step", "proposer", "reason", "model_calls")} for f in failed[::-1]],
        },
        "claims": claim_scores([c for c in checks if c]),
        "budget": engine.accountant.snapshot(),
        "task_evals": spent_evals,
    }


#: Where a run keeps its post-hoc measurements (appended, so a stopped measurement resumes).
POST_HOC = "bench/post_hoc.jsonl"


def candidates_by_prefix(archive: Archive, prefixes: Sequence[str]) -> list[Candidate]:
    """The archive's candidates named by ids or unique prefixes of them, in the order given; a
    ValueError naming the prefix when it matches no candidate or several."""
    found = []
    for prefix in prefixes:
        matches = [c.id for c in archive.candidates() if c.id.startswith(prefix)]
        if len(matches) != 1:
            raise ValueError(f"--post-hoc {prefix}: {len(matches)} candidates of the run match; give more of its id")
        found.append(archive.get(matches[0]))
    return found


def measure_post_hoc(run: Any, suite: Evaluator, candidates: Sequence[Candidate], tasks: Sequence[Task],
                     seeds: Sequence[int], *, describe: Callable[[TaskResult], str] = lambda result: "",
                     default_seed: int = 0, on_row: Callable[[dict[str, Any]], None] | None = None) -> None:
    """A post-hoc test's measurements: each candidate on each task at each seed, evaluated by
    ``suite`` (the run's suite, not its evaluator: the run's cache and reply journal stay as the run
    left them) and appended to the run's :data:`POST_HOC` with ``describe(result)`` as ``agent``.
    The candidates take turns on each task, so a stopped measurement is paired; what is recorded
    already (a row without a seed counts at ``default_seed``) is not measured again. ``on_row`` sees
    each new row (progress lines)."""
    done = {(r["candidate"], r["task"], r.get("seed", default_seed)) for r in run.read_jsonl(POST_HOC)}
    for seed in seeds:
        for task in tasks:
            for candidate in candidates:
                if (candidate.id, task.id, seed) in done:
                    continue
                [result] = suite.evaluate(candidate, [task], seed)
                row = {"candidate": candidate.id, "task": task.id, "seed": seed, "score": result.score,
                       "agent": describe(result), "metrics": result.metrics, "recorded_at": time.time()}
                run.append_jsonl(POST_HOC, row)
                if on_row is not None:
                    on_row(row)
