"""The one loop: archive -> selector -> proposer -> workspace snapshot -> static check ->
evaluator -> gate -> archive and store.

:class:`Engine` wires the named components of an :class:`EvolveConfig` around one run of the
store and runs that step; its other jobs live beside it, one each: :mod:`ratchet.evolve.evaluation`
(the suite on its executor, the cache, the splits, the staged evaluation of a child, pins and
canaries), :mod:`ratchet.evolve.spend` (the budget, the model journals, what the reports spent)
and :mod:`ratchet.evolve.approval` (candidates held for a person's verdict).

Everything it decides is on disk before it moves on: the checkpoint (the next step, the RNG, the
journals' counts) is written after every step, candidates, results and decisions as they happen,
so a killed run resumes at its step and pays nothing twice (evaluations come from the cache, model
replies from the journal).

Stops: ``iterations`` reached (counted steps: a deterministic proposer's free, exhausted skip is
kept but not counted, see :meth:`Engine.step`), or ``stop_at_score`` (``done``); a budget limit
(``budget_exhausted``; once ``max_calls`` is spent, steps go on with the proposers that call no
model, and the run stops when none is left); a candidate held for approval with ``approval.wait = end`` (status
``waiting``); a changed protected file or a failed canary (``failed``, the error re-raised).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from statistics import fmean
from typing import Any

from ratchet.contracts import (BudgetExceeded, Candidate, Decision, Executor, Model, Proposal, Proposer, RatchetError,
                               Skip, Task, TaskResult)
from ratchet.evolve.approval import APPROVALS, Waiting, settle
from ratchet.evolve.archive import Archive, claim_check, per_task_means
from ratchet.evolve.cache import EVALS
from ratchet.evolve.canary import CanaryFailed
from ratchet.evolve.components import build
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.evaluation import GATED_SPLITS, Evaluations, split_tasks
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.proposers.base import ModelProposer
from ratchet.evolve.report import final_report, suite_stage
from ratchet.evolve.report_tables import report_markdown
from ratchet.evolve.schedules import SCHEDULES
from ratchet.evolve.spend import REPORT_SPEND, SpendLedger
from ratchet.evolve.workspace import PinMismatch, SandboxLibraries, StaticCheck, apply, program_key, snapshot
from ratchet.store.files import rng_from_json, rng_to_json, write_bytes_atomic

__all__ = ["APPROVALS", "CHECKPOINT", "EVENTS", "GATED_SPLITS", "REPORT_SPEND", "Engine", "decided", "split_tasks",
           "stored_totals"]

CHECKPOINT = "evolve"
EVENTS = "evolve/events.jsonl"


def decided(run: Any) -> dict[str, int]:
    """The run's candidates by the gate's decision, and its evaluation attempts lost with a worker."""
    rows = run.candidates()
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("accepted", "rejected", "waiting")}
    lost = [e for e in run.read_jsonl(EVENTS) if e.get("kind") == "worker_lost"]
    return {**counts, "lost_attempts": len(lost), "retried": sum(1 for e in lost if e.get("retried"))}


def stored_totals(run: Any) -> dict[str, Any]:
    """What a run has decided and spent so far, read from its store alone: the summary of a run
    still going, or killed, which has no summary of its own until it stops."""
    return {**decided(run), "task_evals": len(run.read_jsonl(EVALS)), "model_calls": len(run.read_jsonl("llm_calls.jsonl"))}


class Engine:
    """One improvement run over one run of the store (new or resumed). ``extra`` becomes every
    component's ``ctx.extra``: objects a config cannot name (a test's refiner or in-process runtime)."""

    def __init__(self, config: EvolveConfig, run: Any, model: Model | None = None,
                 on_event: Callable[[dict[str, Any]], None] | None = None, executor: Executor | None = None,
                 extra: dict[str, Any] | None = None, proposer_model: Model | None = None) -> None:
        self.config = config
        self.run = run
        self.model = model  # unaccounted: what a suite's report stage plays with (evolve/report.py)
        self.on_event = on_event or (lambda event: None)
        self.manifest = load_manifest(config.workspace)
        self.spend = SpendLedger(config, run, model, proposer_model)
        # Where this run (re)starts: what the gate counts the run's earlier tests up to.
        resumes_at = (run.load_checkpoint(CHECKPOINT) or {}).get("step", 0)
        self.ctx = EngineContext(self.manifest, config.workspace, self.spend.journal, run, config.seed,
                                 resumes_at=resumes_at, extra=dict(extra or {}))
        self.evaluation = Evaluations(config, self.ctx, self.spend, executor, on_lost=self._lost,
                                      on_result=self._evaluated)
        self.selector = build("selector", config.selector, self.ctx)
        proposer_ctx = replace(self.ctx, model=self.spend.proposer_journal) if self.spend.proposer_journal else self.ctx
        self.proposers: list[tuple[Proposer, float]] = [(build("proposer", spec, proposer_ctx), spec.weight)
                                                        for spec in config.proposers]
        self.schedule = SCHEDULES[config.proposer_schedule]()
        self.gate = build("gate", config.gate, self.ctx)
        self.archive = Archive(run)
        libraries = self.suite.sandbox_files() if isinstance(self.suite, SandboxLibraries) else None
        self.static = StaticCheck(self.manifest, config.static, libraries)
        self.rng = random.Random(config.seed)
        self.program_keys: dict[str, str] = {}  # candidate id -> program_key (static.novelty)

    # -- what the final report reads (evolve/report.py) ------------------------------------------

    @property
    def suite(self) -> Any:
        return self.evaluation.suite

    @property
    def suite_ctx(self) -> EngineContext:
        return self.evaluation.suite_ctx

    @property
    def executor(self) -> Executor:
        return self.evaluation.executor

    @property
    def evaluator(self) -> Any:
        return self.evaluation.cache

    @property
    def splits(self) -> dict[str, list[Task]]:
        return self.evaluation.splits

    @property
    def journal(self) -> Any:
        return self.spend.journal

    @property
    def accountant(self) -> Any:
        return self.spend.accountant

    def evaluate(self, candidate: Candidate, split: str, seeds: list[int] | None = None) -> list[TaskResult]:
        return self.evaluation.evaluate(candidate, split, seeds)

    def search_spend(self) -> dict[str, Any]:
        """What the search had spent when the final report began (see :meth:`SpendLedger.search_spend`)."""
        return self.spend.search_spend((self.run.load_checkpoint(CHECKPOINT) or {}).get("step", 0))

    def totals(self) -> dict[str, Any]:
        return {**decided(self.run), **self.spend.spent()}

    def model_calls(self) -> int:
        return self.spend.model_calls()

    # -- events ------------------------------------------------------------------------------

    def _lost(self, info: dict[str, Any]) -> None:
        """An evaluation's worker died; the executor runs it again (bounded). Kept in the events so
        that status shows lost and retried work across resumes."""
        self._event(kind="worker_lost", **info)

    def _evaluated(self, candidate: Candidate, task: Task, seed: int, result: TaskResult) -> None:
        """Progress, one event per task evaluation run (an original's pass over 44 coding tasks is an
        hour with the 1.5B); not journaled: evals.jsonl holds the result itself."""
        self.on_event({"kind": "evaluated", "candidate": candidate.id, "task": task.id, "seed": seed,
                       "score": result.score, "run": self.spend.paid, "at": time.time()})

    def _event(self, **event: Any) -> None:
        event["at"] = time.time()
        self.run.append_jsonl(EVENTS, event)
        self.on_event(event)

    # -- the run -----------------------------------------------------------------------------

    def _start(self) -> dict[str, Any]:
        root = snapshot(self.config.workspace, self.manifest)
        self.archive.add(root, "evaluating")
        results = {"search": self.evaluate(root, "search", self.config.seeds[:1]), **self.evaluation.gated_results(root)}
        self._record_all(root, results)
        self.archive.set_status(root.id, "accepted", fmean(r.score for r in results["heldin"]))
        self._event(kind="original", candidate=root.id, heldin=self.archive.score(root.id, "heldin"))
        return {"step": 0, "root": root.id}

    def execute(self) -> dict[str, Any]:
        """Run (or resume) to a stop; returns the run's summary (the report when it finished)."""
        try:
            self.evaluation.check_at_start()
            state = self.run.load_checkpoint(CHECKPOINT)
            if state is None:
                state = self._start()
                self._checkpoint(state)
            else:
                self.rng.setstate(rng_from_json(state["rng"]))
                self.spend.resume(state)
            # Steps counted toward ``iterations``: all but the free ones (an exhausted Skip, see
            # :meth:`step`); a checkpoint of a run that kept no count counted every step.
            state.setdefault("counted", state["step"])
            while state["counted"] < self.config.iterations and not self._reached_stop_score():
                self._settle_waiting()
                self.evaluation.check_between_steps(state["step"])
                state["counted"] += self.step(state["step"])
                state["step"] += 1
                self._checkpoint(state)
            self._settle_waiting()
            summary = self.finish("done")
        except BudgetExceeded as exc:
            self._event(kind="budget", reason=str(exc))
            summary = self.finish("budget_exhausted", reason=str(exc).splitlines()[0])
        except Waiting as waiting:
            summary = {"state": "waiting", **self.totals(), "waiting_for": list(waiting.args[0])}
            self.run.set_status("waiting", summary)
        except (PinMismatch, CanaryFailed) as exc:
            self._event(kind="stopped", reason=str(exc))
            self.run.set_status("failed", {"state": "failed", "error": str(exc).splitlines()[0]})
            raise
        finally:
            self.evaluation.close()
        return summary

    def _checkpoint(self, state: dict[str, Any]) -> None:
        """Where a resumed run starts: the next step, the RNG before it, the journals' call counts."""
        state["rng"] = rng_to_json(self.rng.getstate())
        state.update(self.spend.checkpoint_state())
        self.run.checkpoint(CHECKPOINT, state)

    def _reached_stop_score(self) -> bool:
        """Whether ``stop_at_score`` is set and an accepted candidate's held-in mean has reached it
        (read from the archive: a resumed run stops where the uninterrupted one did)."""
        target = self.config.stop_at_score
        return target is not None and self._best() >= target

    def _settle_waiting(self) -> None:
        settle(self.archive, self.run, self.config.approval, self._event)

    def finish(self, status: str, reason: str | None = None) -> dict[str, Any]:
        self.spend.lift()  # the final measurement is not part of the search budget
        if not self.archive.candidates("accepted"):  # stopped before the original was fully evaluated
            summary = {"state": status, **self.totals(), "reason": reason}
            self.run.set_status(status, summary)
            return summary
        report = final_report(self, reason)
        self.run.write_json("evolve/report.json", report)
        self.spend.report_done()
        totals = self.totals()  # the search's: a report stage's model calls are measurement
        stage = suite_stage(self, report)
        if stage is not None:
            self.run.write_json("evolve/report.json", report)
        write_bytes_atomic(self.run.path("evolve/report.md"), report_markdown(self.run, report).encode())
        summary = {"state": status, "best": report["best"]["id"], **totals,
                   "test_gain": report["comparison"]["best_minus_original"]["mean"],
                   **({"report_stage": stage.summary} if stage is not None else {})}
        self.run.set_status(status, summary)
        self._event(kind="finished", status=status, best=report["best"]["id"])
        return {**summary, "report": report}

    # -- one step ----------------------------------------------------------------------------

    def step(self, index: int) -> bool:
        """One step; whether it counts toward ``iterations``: every step but a free one, where a
        deterministic proposer drawn for a parent it had not given up on says with an ``exhausted``
        :class:`Skip` (at no model call) that it has nothing to propose. Such a step is still kept
        (the proposer is then not drawn for that parent until the archive gains a candidate), so
        free steps in a row are at most the deterministic proposers times the parents."""
        # Selector and proposer see the archive as it was when this step began: after a kill that
        # came between this step's writes and its checkpoint, the rerun makes the same choice and
        # asks the same prompt (so the journal replays its reply) instead of reacting to itself.
        shown = self.archive.as_of(index)
        parent = self.selector.select(shown, self.rng)
        selection = dict(self.selector.last)
        drawable, narrowed = self._drawable(shown, parent)
        proposer = self.schedule.pick([p for p, _ in self.proposers], drawable, index, self.rng)
        before = self.model_calls()
        try:
            proposal = proposer.propose(parent, shown, self.rng)
        except (BudgetExceeded, PinMismatch, CanaryFailed):
            raise
        except RatchetError as exc:  # a proposer that could not make a change costs the step, not the run
            self._unusable(index, parent, proposer, "proposer_error", str(exc).splitlines()[0], self.model_calls() - before)
            return True
        calls = self.model_calls() - before  # no evaluation has run yet: every call so far is the proposal's
        if isinstance(proposal, Skip):
            # Free only when the draw was not the fallback to proposers that had all given up on
            # this parent: asked again there, it would skip again, and the run would not advance.
            free = proposal.exhausted and proposer.deterministic and calls == 0 and narrowed
            self._unusable(index, parent, proposer, "no_proposal", proposal.reason, calls, skip=proposal,
                           **({"counted": False} if free else {}))
            return not free
        child = apply(parent, proposal, selection=selection, step=index)
        if not self._is_new(index, parent, proposer, proposal, child, shown, calls):
            return True
        failures = self.static.check(parent, proposal)
        if any(f.detail.get("rule") == "path" for f in failures):  # files that cannot even be stored
            self._unusable(index, parent, proposer, "rejected", "static check: " + "; ".join(
                f.message for f in failures), calls, proposal)
            return True
        if failures:
            decision = Decision(False, "static check: " + "; ".join(f.message for f in failures), {"stage": 0.0})
            self._decide(index, parent, child, decision, None, calls)
            return True
        self.archive.add(child, "evaluating")
        child_smoke, decision = self.evaluation.smoke(child, parent)
        if child_smoke:
            self.archive.record_results(child.id, "smoke", child_smoke)
        if decision is not None:
            self._decide(index, parent, child, decision, None, calls)
            return True
        parent_results = self.evaluation.gated_results(parent)
        child_results, decision = self.evaluation.child_results(child, parent_results, self.gate)
        if decision is not None:  # futility: held-in can no longer pass; the rest is not paid for
            self._record_all(child, child_results)
            self._decide(index, parent, child, decision, None, calls)
            return True
        decision = self.gate.decide(parent_results, child_results, self.evaluation.noise(parent_results))
        child_results["search"] = self.evaluate(child, "search", self.config.seeds[:1])
        self._record_all(child, child_results)
        seen = {"search": self.archive.results(parent.id, "search"), "heldin": parent_results["heldin"]}
        check = claim_check(child, per_task_means([r for rs in seen.values() for r in rs]),
                            per_task_means(child_results["search"] + child_results["heldin"]))
        self._decide(index, parent, child, decision, check, calls)
        return True

    def _is_new(self, index: int, parent: Candidate, proposer: Proposer, proposal: Proposal, child: Candidate,
                shown: Archive, calls: int) -> bool:
        """Whether the child is a candidate the archive does not hold yet; if not, the step is kept
        as unusable with why (the parent itself, one already archived, the same program written
        another way)."""
        if child.id == parent.id:  # nothing to store: the "child" is the parent itself
            self._unusable(index, parent, proposer, "rejected", "static check: " + self.static.check(
                parent, proposal)[0].message, calls, proposal)
            return False
        # "evaluating", or made by this very step before a kill: decide it (again) now, from the cache.
        known = shown.status(child.id)
        if known not in (None, "evaluating"):
            self._unusable(index, parent, proposer, "duplicate", f"already in the archive as {known}", calls,
                           proposal, child=child.id)
            return False
        twin = self._same_program(child, shown) if self.config.static.novelty else None
        if twin is not None:
            self._unusable(index, parent, proposer, "duplicate", f"the same program as {twin} ({shown.status(twin)}) "
                           "once comments and layout are dropped", calls, proposal, child=child.id)
            return False
        return True

    def _drawable(self, shown: Archive, parent: Candidate) -> tuple[list[tuple[Proposer, float]], bool]:
        """The proposers this step may draw for ``parent``: not one whose proposal is a function of
        the archive alone (``deterministic``, as ``induced_rules`` is) that already had nothing for
        this parent since the archive last gained a candidate: asked again, it would give up again,
        and the step it was drawn for is lost. Read from the archive as of this step, so a resumed
        step draws what the uninterrupted one drew; every proposer when none is left. With them,
        whether any was left (False: the draw falls back to proposers that all gave up)."""
        newest = max((c.meta.get("step", -1) for c in shown.candidates()), default=-1)
        gave_up = {r["proposer"] for r in shown.unusable() if r["parent"] == parent.id and r["step"] > newest}
        proposers = self.proposers
        if self._calls_spent():
            # The search's way: once the model's calls are spent, what needs no model (a mutation
            # of an archived child, a mechanical fix) still runs, up to ``iterations``.
            proposers = [(p, w) for p, w in proposers if not isinstance(p, ModelProposer)]
            if not proposers:
                self.spend.accountant.check()  # raises, naming the limit
                raise BudgetExceeded(f"budget reached: max_calls={self.config.budget.max_calls}")
        left = [(p, w) for p, w in proposers if not (p.deterministic and p.name in gave_up)]
        return (left, True) if left else (proposers, False)

    def _calls_spent(self) -> bool:
        """Whether the run's model calls have reached ``budget.max_calls``, counted by the journals
        (replayed replies included), as at this step's start in the uninterrupted run."""
        limit = self.config.budget.max_calls
        return limit is not None and self.model_calls() >= limit

    def _same_program(self, child: Candidate, shown: Archive) -> str | None:
        """The archived candidate (as of this step) that is ``child``'s program written another
        way, if any (``static.novelty``); keys are kept per id, candidates never change."""
        key = program_key(child)
        for c in shown.candidates():
            if c.id not in self.program_keys:
                self.program_keys[c.id] = program_key(c)
            if c.id != child.id and self.program_keys[c.id] == key:
                return c.id
        return None

    def _record_all(self, candidate: Candidate, results: dict[str, list[TaskResult]]) -> None:
        for split, rs in results.items():
            self.archive.record_results(candidate.id, split, rs)

    def _unusable(self, index: int, parent: Candidate, proposer: Proposer, status: str, reason: str, calls: int,
                  proposal: Proposal | None = None, skip: Skip | None = None, **event: Any) -> None:
        """A step that made no new candidate (a skip, a proposer error, a change the static check
        cannot store, a duplicate): kept in the archive as a failed proposal with its reason and
        the model calls it spent (paid like any other), shown to later proposals."""
        claim = proposal.claim.target if proposal is not None else skip.claim if skip is not None else None
        attempts = list(skip.attempts) if skip is not None else None
        self.archive.record_unusable(index, parent.id, proposer.name, reason, calls, claim, attempts)
        self._event(kind="step", step=index, parent=parent.id, proposer=proposer.name, status=status,
                    reason=reason, model_calls=calls, best=self._best(), **event)

    def _decide(self, index: int, parent: Candidate, child: Candidate, decision: Decision,
                check: dict[str, Any] | None, calls: int) -> None:
        if self.archive.status(child.id) is None:
            self.archive.add(child, "evaluating")
        self.archive.record_decision(child.id, decision, check)
        status = "rejected"
        if decision.accepted:
            status = "waiting" if self.config.approval.required else "accepted"
        self.archive.set_status(child.id, status, self.archive.score(child.id, "heldin"))
        self._event(kind="step", step=index, parent=parent.id, child=child.id, proposer=child.meta.get("proposer"),
                    status=status, reason=decision.reason, numbers=decision.numbers, model_calls=calls,
                    best=self._best())

    def _best(self) -> float:
        """The best held-in score among the accepted candidates: every step event carries it, a
        step that made no candidate too (the progress line showed 0.000 for those)."""
        return max(self.archive.score(c.id, "heldin") or 0.0 for c in self.archive.candidates("accepted"))
