"""Where and how the run's candidates are evaluated, and what keeps its grader honest.

:class:`Evaluations` builds the suite for the run's executor (in this process, or in others that
reach the driver's one budget and journal through the executor's gateway), wraps it in the
evaluation cache, splits its tasks, and evaluates a child in stages: a smoke test on a few held-in
tasks, then held-in task by task with the ``futility`` stop, then the other gated splits. The pins
(the workspace's protected files and the suite's fingerprint, recorded at the run's start) and the
canaries (known-answer candidates) are checked at the start, on resume and between steps.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from statistics import fmean
from typing import Any, Protocol, runtime_checkable

from ratchet.contracts import Candidate, Decision, Executor, Gate, RatchetError, Task, TaskResult
from ratchet.evolve.archive import per_task_means
from ratchet.evolve.cache import CachedEvaluator
from ratchet.evolve.canary import check_canaries
from ratchet.evolve.components import build
from ratchet.evolve.config import EvolveConfig, SplitsConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.gate import noise_band, paired_differences
from ratchet.evolve.spend import SpendLedger
from ratchet.evolve.workspace import pins, verify_pins
from ratchet.executors import build_executor
from ratchet.executors.units import ScopedModel

GATED_SPLITS = ("heldin", "guard", "heldout")
PINS = "evolve/pins.json"


@runtime_checkable
class PlacedExecutor(Protocol):
    """An executor that says whether its work runs in this process (one that does not say: it does)."""

    in_process: bool


@runtime_checkable
class ServingExecutor(Protocol):
    """An executor that serves the driver's model to work in other processes: ``serve(journal)``
    gives a gateway whose ``model`` they call."""

    def serve(self, server: Any) -> Any: ...


@runtime_checkable
class RetryingExecutor(Protocol):
    """An executor that reruns work whose worker died, telling ``on_lost(info)`` each time."""

    on_lost: Callable[[dict[str, Any]], None] | None


@runtime_checkable
class ContextualSuite(Protocol):
    """A suite that keeps the engine's context: its evaluations may call the run's model."""

    ctx: EngineContext | None


def split_tasks(tasks: list[Task], cfg: SplitsConfig) -> dict[str, list[Task]]:
    """search / heldin / heldout / test / guard: explicit ids first, the rest shuffled by fraction."""
    by_id = {t.id: t for t in tasks}
    unknown = sorted({i for ids in [*cfg.ids.values(), cfg.guard] for i in ids} - by_id.keys())
    if unknown:
        raise RatchetError(f"splits name task ids the suite does not have: {', '.join(unknown[:5])}",
                           hint="check splits.ids and splits.guard against the suite's task ids")
    taken = set(cfg.guard) | {i for ids in cfg.ids.values() for i in ids}
    rest = [t for t in tasks if t.id not in taken]
    random.Random(cfg.seed).shuffle(rest)
    out: dict[str, list[Task]] = {"guard": [by_id[i] for i in cfg.guard]}
    start = 0
    fractions = {"search": cfg.search, "heldin": cfg.heldin, "heldout": cfg.heldout, "test": cfg.test}
    for name, fraction in fractions.items():
        count = round(fraction * len(rest))
        out[name] = [by_id[i] for i in cfg.ids.get(name, [])] + rest[start:start + count]
        start += count
    if not out["heldin"]:
        raise RatchetError("the held-in split is empty: the gate has nothing to decide on",
                           hint="raise splits.heldin or list splits.ids.heldin")
    return out


class Evaluations:
    """The run's suite, cache and splits, and the staged evaluation of a child.

    ``executor``: where evaluations run (None: the config's, owned and closed here). ``on_lost``
    hears of every evaluation whose worker died (a retrying executor reruns it); ``on_result`` of
    every task evaluation run (progress)."""

    def __init__(self, config: EvolveConfig, ctx: EngineContext, ledger: SpendLedger, executor: Executor | None,
                 on_lost: Callable[[dict[str, Any]], None], on_result: Callable[..., None]) -> None:
        self.config = config
        self.manifest = ctx.manifest
        self._owns_executor = executor is None
        self.executor = executor if executor is not None else build_executor(config.executor)
        if isinstance(self.executor, RetryingExecutor):
            self.executor.on_lost = on_lost
        self.gateway: Any = None
        self.suite_ctx = self._suite_context(ctx, ledger)  # also what the report's sampled suite is built with
        self.suite = build("suite", config.suite, self.suite_ctx)
        self._check_remote_suite(ledger)
        self.cache = CachedEvaluator(self.suite, ctx.run, on_paid=ledger.charge, executor=self.executor,
                                     on_result=on_result)
        ledger.attach(self.cache)
        self.run = ctx.run
        self.splits = split_tasks(self.suite.tasks(), config.splits)
        # The model the evaluations call, pinned: a resumed run's cached results came from it.
        calls_model = isinstance(self.suite, ContextualSuite) and self.suite.ctx is not None
        self._model_name = ledger.journal.name if calls_model and ledger.journal is not None else None

    # -- where evaluations run -----------------------------------------------------------------

    def _in_process(self) -> bool:
        return not isinstance(self.executor, PlacedExecutor) or self.executor.in_process

    def _suite_context(self, ctx: EngineContext, ledger: SpendLedger) -> EngineContext:
        """What the suite is built with. Its evaluations' model calls are numbered by evaluation
        (so a rerun evaluation is given its journaled replies): in this process through the
        journal itself; in other processes (a local pool, Ray workers) through the executor's
        gateway, which brings every call back here to the one budget and journal. A suite sent to
        other processes gets no run store: only the driver writes it."""
        if ledger.journal is None:
            return ctx
        if self._in_process():
            return replace(ctx, model=ScopedModel(ledger.journal))
        if not isinstance(self.executor, ServingExecutor):  # no way back to this process (refused below if needed)
            return replace(ctx, model=None, run=None)
        self.gateway = self.executor.serve(ledger.journal)
        return replace(ctx, model=self.gateway.model, run=None)

    def _check_remote_suite(self, ledger: SpendLedger) -> None:
        # A suite that calls the model inside an evaluation, on an executor with no gateway back to
        # the driver, would have its calls escape the run's one budget and journal.
        if self._in_process() or self.gateway is not None or ledger.journal is None:
            return
        if isinstance(self.suite, ContextualSuite) and self.suite.ctx is not None:
            if self._owns_executor:
                self.executor.close()
            raise RatchetError(f"the {self.suite.name} suite calls the model inside its evaluations, which this "
                               "executor (it has no `serve`) cannot bring back to the run's one budget and journal",
                               hint="run it with --executor local or ray (both serve the driver's model to their "
                                    "workers), or leave out `model` if its evaluations "
                                    "do not need one")

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.close()
        if self._owns_executor:
            self.executor.close()

    # -- the grader stays the same -------------------------------------------------------------

    def pin(self) -> None:
        """Record the pins at the run's start; on every later call, fail if they changed."""
        current = pins(self.config.workspace, self.manifest, self.suite.fingerprint(), self._model_name)
        pinned = self.run.read_json(PINS)
        if pinned is None:
            self.run.write_json(PINS, current)
        else:
            verify_pins(pinned, current)

    def check_at_start(self) -> None:
        self.pin()
        if self.config.canaries.enabled:
            check_canaries(self.suite, self.manifest.name, self.config.canaries.required)

    def check_between_steps(self, step: int) -> None:
        self.pin()
        every = self.config.canaries.every
        if self.config.canaries.enabled and every and step and step % every == 0:
            check_canaries(self.suite, self.manifest.name)

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self, candidate: Candidate, split: str, seeds: list[int] | None = None) -> list[TaskResult]:
        tasks = self.splits[split]
        return [r for seed in (seeds or self.config.seeds) for r in self.cache.evaluate(candidate, tasks, seed)]

    def gated_results(self, candidate: Candidate) -> dict[str, list[TaskResult]]:
        return {split: self.evaluate(candidate, split) for split in GATED_SPLITS if self.splits[split]}

    def noise(self, results: dict[str, list[TaskResult]]) -> dict[str, float]:
        return {split: noise_band(rs) for split, rs in results.items()}

    def smoke(self, child: Candidate, parent: Candidate) -> tuple[list[TaskResult], Decision | None]:
        """The child on the first ``smoke.tasks`` held-in tasks at the first seed, and a rejection
        when it falls more than ``smoke.margin`` below its parent there (None: it goes on)."""
        tasks = self.splits["heldin"][: self.config.smoke.tasks]
        if not tasks:
            return [], None
        seed = self.config.seeds[0]
        child_smoke, parent_smoke = self.cache.evaluate(child, tasks, seed), self.cache.evaluate(parent, tasks, seed)
        c, p = fmean(r.score for r in child_smoke), fmean(r.score for r in parent_smoke)
        if c >= p - self.config.smoke.margin:
            return child_smoke, None
        return child_smoke, Decision(False, f"smoke: {c:.3f} vs parent {p:.3f} on {len(tasks)} held-in tasks",
                                     {"stage": 1.0, "smoke_child": c, "smoke_parent": p})

    def child_results(self, child: Candidate, parent_results: dict[str, list[TaskResult]], gate: Gate
                      ) -> tuple[dict[str, list[TaskResult]], Decision | None]:
        """The child's results on the gated splits; with ``futility``, held-in task by task and a
        rejection as soon as the gate could not accept the child even if every remaining held-in
        task reached score 1 (None: no early stop)."""
        if not self.config.futility.enabled:
            return self.gated_results(child), None
        tasks, parent_heldin = self.splits["heldin"], parent_results["heldin"]
        noise = noise_band(parent_heldin)
        most = {t: 1.0 - m for t, m in per_task_means(parent_heldin).items()}  # the most each task can gain
        heldin: list[TaskResult] = []
        for i, task in enumerate(tasks):  # once all are run, the gate itself decides
            done = paired_differences(parent_heldin, heldin)
            best = [done.get(t, most.get(t, 1.0)) for t in sorted(t.id for t in tasks)]  # the gate's order
            if not gate.could_accept(best, noise):
                gain = fmean(best)
                return {"heldin": heldin}, Decision(False, (
                    f"futility: after {i} of {len(tasks)} held-in tasks, even with every other one solved the held-in "
                    f"gain would be {gain:+.3f}, which the gate would not accept"),
                    {"stage": 1.5, "heldin_tasks_run": float(i), "best_case_gain": gain})
            for seed in self.config.seeds:
                heldin += self.cache.evaluate(child, [task], seed)
        rest = {split: self.evaluate(child, split) for split in GATED_SPLITS if split != "heldin" and self.splits[split]}
        return {"heldin": heldin, **rest}, None
