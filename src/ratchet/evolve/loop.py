"""The one loop: select -> propose -> static check -> smoke -> held-in -> gate -> archive.

:class:`Engine` wires the named components of an :class:`EvolveConfig` around one run of the
store. Everything it decides is on disk before it moves on: the checkpoint (the next step, the
RNG, the reply journal's count) is written after every step, candidates, results and
decisions as they happen, so a killed run resumes at its step and pays nothing twice (evaluations
come from the cache, model replies from the journal).

Stops: ``iterations`` reached (``done``); a budget limit (``budget_exhausted``); a candidate held
for approval with ``approval.wait = end`` (status ``waiting``); a changed
protected file or a failed canary (``failed``, the error re-raised).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from statistics import fmean
from typing import Any

from ratchet.contracts import BudgetExceeded, Candidate, Decision, Executor, LLMCall, Model, RatchetError, Task, TaskResult
from ratchet.evolve.approval import APPROVALS, APPROVED, verdicts
from ratchet.evolve.archive import Archive, claim_check, per_task_means
from ratchet.evolve.cache import EVALS, PROPOSER_REPLIES, CachedEvaluator, JournaledModel
from ratchet.evolve.canary import CanaryFailed, check_canaries
from ratchet.evolve.components import build
from ratchet.evolve.config import EvolveConfig, SplitsConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.gate import noise_band, paired_differences
from ratchet.evolve.manifest import load_manifest
from ratchet.store.files import rng_from_json, rng_to_json
from ratchet.evolve.report import final_report
from ratchet.evolve.schedules import SCHEDULES
from ratchet.evolve.workspace import PinMismatch, StaticCheck, apply, pins, program_key, snapshot, verify_pins
from ratchet.executors import build_executor
from ratchet.executors.units import ScopedModel
from ratchet.models.budget import AccountedModel, Accountant

CHECKPOINT = "evolve"
EVENTS = "evolve/events.jsonl"
REPORT_SPEND = "evolve/report_spend.json"
GATED_SPLITS = ("heldin", "guard", "heldout")
LLM_CALL_FIELDS = set(LLMCall.__dataclass_fields__)


class _Waiting(Exception):
    """A candidate is held for approval and the run is to end as waiting."""


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
    for name in ("search", "heldin", "heldout", "test"):
        count = round(getattr(cfg, name) * len(rest))
        out[name] = [by_id[i] for i in cfg.ids.get(name, [])] + rest[start:start + count]
        start += count
    if not out["heldin"]:
        raise RatchetError("the held-in split is empty: the gate has nothing to decide on",
                           hint="raise splits.heldin or list splits.ids.heldin")
    return out


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
        self.on_event = on_event or (lambda event: None)
        self.manifest = load_manifest(config.workspace)
        self.accountant = Accountant(config.budget)
        for record in run.read_jsonl("llm_calls.jsonl"):  # a resumed run's budget counts what was spent
            self.accountant.record(LLMCall(**{k: v for k, v in record.items() if k in LLM_CALL_FIELDS}))
        self.accountant.on_call = run.record_llm_call
        self.journal = JournaledModel(AccountedModel(model, self.accountant, "evolve"), run) if model else None
        # The proposers' own model (``proposer_model``): the same budget, its own journal, so that a
        # resumed run replays each model's replies to the caller that asked for them.
        self.proposer_journal = (JournaledModel(AccountedModel(proposer_model, self.accountant, "evolve:proposer"),
                                                run, PROPOSER_REPLIES) if proposer_model else None)
        # Where this run (re)starts: what the gate counts the run's earlier tests up to.
        resumes_at = (run.load_checkpoint(CHECKPOINT) or {}).get("step", 0)
        self.ctx = EngineContext(self.manifest, config.workspace, self.journal, run, config.seed, resumes_at=resumes_at,
                                 extra=dict(extra or {}))
        self._owns_executor = executor is None
        self.executor = executor if executor is not None else build_executor(config.executor)
        if hasattr(self.executor, "on_lost"):
            self.executor.on_lost = self._lost
        self.gateway = None
        self.suite_ctx = self._suite_context()  # also what the report's sampled suite is built with
        self.suite = build("suite", config.suite, self.suite_ctx)
        self._check_remote_suite()
        self.paid_before = len(run.read_jsonl(EVALS))
        self.reports_before = self._reports_spent()[0]  # evaluations made by finished reports of this run
        self.evaluator = CachedEvaluator(self.suite, run, on_paid=self._charge, executor=self.executor,
                                         on_result=self._evaluated)
        self.selector = build("selector", config.selector, self.ctx)
        proposer_ctx = replace(self.ctx, model=self.proposer_journal) if self.proposer_journal else self.ctx
        self.proposers = [(build("proposer", spec, proposer_ctx), spec.weight) for spec in config.proposers]
        self.schedule = SCHEDULES[config.proposer_schedule]()
        self.gate = build("gate", config.gate, self.ctx)
        self.archive = Archive(run)
        self.static = StaticCheck(self.manifest, config.static)
        self.splits = split_tasks(self.suite.tasks(), config.splits)
        self.rng = random.Random(config.seed)
        self.unlimited = False
        self.program_keys: dict[str, str] = {}  # candidate id -> program_key (static.novelty)

    # -- budget ----------------------------------------------------------------------------

    def _charge(self, n: int) -> None:
        limit = self.config.max_task_evals
        spent = self.paid_before + self.evaluator.paid - self.reports_before  # earlier reports are measurement
        if limit is not None and not self.unlimited and spent + n > limit:
            raise BudgetExceeded(f"budget reached: max_task_evals={limit} ({spent} task evaluations run)",
                                 hint="raise it with --set max_task_evals=..., and resume the run")
        self.accountant.check()

    # -- where evaluations run --------------------------------------------------------------

    def _suite_context(self) -> EngineContext:
        """What the suite is built with. Its evaluations' model calls are numbered by evaluation
        (so a rerun evaluation is given its journaled replies): in this process through the
        journal itself; in other processes (a local pool, Ray workers) through the executor's
        gateway, which brings every call back here to the one budget and journal. A suite sent to
        other processes gets no run store: only the driver writes it."""
        if self.journal is None:
            return self.ctx
        if getattr(self.executor, "in_process", True):
            return replace(self.ctx, model=ScopedModel(self.journal))
        serve = getattr(self.executor, "serve", None)
        if serve is None:  # an executor with no way back to this process (refused below if the suite needs it)
            return replace(self.ctx, model=None, run=None)
        self.gateway = serve(self.journal)
        return replace(self.ctx, model=self.gateway.model, run=None)

    def _check_remote_suite(self) -> None:
        # A suite that calls the model inside an evaluation, on an executor with no gateway back to
        # the driver, would have its calls escape the run's one budget and journal.
        if getattr(self.executor, "in_process", True) or self.gateway is not None or self.journal is None:
            return
        if hasattr(getattr(self.suite, "ctx", None), "model"):
            if self._owns_executor:
                self.executor.close()
            raise RatchetError(f"the {self.suite.name} suite calls the model inside its evaluations, which this "
                               "executor (it has no `serve`) cannot bring back to the run's one budget and journal",
                               hint="run it with --executor local or ray (both serve the driver's model to their "
                                    "workers), or leave out `model` if its evaluations "
                                    "do not need one")

    def _lost(self, info: dict[str, Any]) -> None:
        """An evaluation's worker died; the executor runs it again (bounded). Kept in the events so
        that status shows lost and retried work across resumes."""
        self._event(kind="worker_lost", **info)

    # -- evaluation ------------------------------------------------------------------------

    def evaluate(self, candidate: Candidate, split: str, seeds: list[int] | None = None) -> list[TaskResult]:
        tasks = self.splits[split]
        return [r for seed in (seeds or self.config.seeds) for r in self.evaluator.evaluate(candidate, tasks, seed)]

    def gated_results(self, candidate: Candidate) -> dict[str, list[TaskResult]]:
        return {split: self.evaluate(candidate, split) for split in GATED_SPLITS if self.splits[split]}

    def child_results(self, child: Candidate, parent_results: dict[str, list[TaskResult]]
                      ) -> tuple[dict[str, list[TaskResult]], Decision | None]:
        """The child's results on the gated splits; with ``futility``, held-in task by task and a
        rejection as soon as the gate could not accept the child even if every remaining held-in
        task reached score 1 (None: no early stop)."""
        could_accept = getattr(self.gate, "could_accept", None)
        if not self.config.futility.enabled or could_accept is None:
            return self.gated_results(child), None
        tasks, parent_heldin = self.splits["heldin"], parent_results["heldin"]
        noise = noise_band(parent_heldin)
        most = {t: 1.0 - m for t, m in per_task_means(parent_heldin).items()}  # the most each task can gain
        heldin: list[TaskResult] = []
        for i, task in enumerate(tasks):  # once all are run, the gate itself decides
            done = paired_differences(parent_heldin, heldin)
            best = [done.get(t, most.get(t, 1.0)) for t in sorted(t.id for t in tasks)]  # the gate's order
            if not could_accept(best, noise):
                gain = fmean(best)
                return {"heldin": heldin}, Decision(False, (
                    f"futility: after {i} of {len(tasks)} held-in tasks, even with every other one solved the held-in "
                    f"gain would be {gain:+.3f}, which the gate would not accept"),
                    {"stage": 1.5, "heldin_tasks_run": float(i), "best_case_gain": gain})
            for seed in self.config.seeds:
                heldin += self.evaluator.evaluate(child, [task], seed)
        rest = {split: self.evaluate(child, split) for split in GATED_SPLITS if split != "heldin" and self.splits[split]}
        return {"heldin": heldin, **rest}, None

    def noise(self, results: dict[str, list[TaskResult]]) -> dict[str, float]:
        return {split: noise_band(rs) for split, rs in results.items()}

    def _record_all(self, candidate: Candidate, results: dict[str, list[TaskResult]]) -> None:
        for split, rs in results.items():
            self.archive.record_results(candidate.id, split, rs)

    # -- the run ---------------------------------------------------------------------------

    def _pin(self) -> None:
        current = pins(self.config.workspace, self.manifest, self.suite.fingerprint())
        pinned = self.run.read_json("evolve/pins.json")
        if pinned is None:
            self.run.write_json("evolve/pins.json", current)
        else:
            verify_pins(pinned, current)

    def _evaluated(self, candidate: Candidate, task: Task, seed: int, result: TaskResult) -> None:
        """Progress, one event per task evaluation run (an original's pass over 44 coding tasks is an
        hour with the 1.5B); not journaled: evals.jsonl holds the result itself."""
        self.on_event({"kind": "evaluated", "candidate": candidate.id, "task": task.id, "seed": seed,
                       "score": result.score, "run": self.evaluator.paid, "at": time.time()})

    def _event(self, **event: Any) -> None:
        event["at"] = time.time()
        self.run.append_jsonl(EVENTS, event)
        self.on_event(event)

    def _start(self) -> dict[str, Any]:
        root = snapshot(self.config.workspace, self.manifest)
        self.archive.add(root, "evaluating")
        results = {"search": self.evaluate(root, "search", self.config.seeds[:1]), **self.gated_results(root)}
        self._record_all(root, results)
        self.archive.set_status(root.id, "accepted", fmean(r.score for r in results["heldin"]))
        self._event(kind="original", candidate=root.id, heldin=self.archive.score(root.id, "heldin"))
        return {"step": 0, "root": root.id}

    def execute(self) -> dict[str, Any]:
        """Run (or resume) to a stop; returns the run's summary (the report when it finished)."""
        try:
            self._pin()
            if self.config.canaries.enabled:
                check_canaries(self.suite, self.manifest.name, self.config.canaries.required)
            state = self.run.load_checkpoint(CHECKPOINT)
            if state is None:
                state = self._start()
                self._checkpoint(state)
            else:
                self.rng.setstate(rng_from_json(state["rng"]))
                if self.journal is not None:
                    self.journal.resume(state["calls"])
                if self.proposer_journal is not None:
                    self.proposer_journal.resume(state.get("proposer_calls", 0))
            while state["step"] < self.config.iterations:
                self._settle_waiting()
                self._verify_between_steps(state["step"])
                self.step(state["step"])
                state["step"] += 1
                self._checkpoint(state)
            self._settle_waiting()
            summary = self.finish("done")
        except BudgetExceeded as exc:
            self._event(kind="budget", reason=str(exc))
            summary = self.finish("budget_exhausted", reason=str(exc).splitlines()[0])
        except _Waiting as waiting:
            summary = {"state": "waiting", **self.totals(), "waiting_for": list(waiting.args[0])}
            self.run.set_status("waiting", summary)
        except (PinMismatch, CanaryFailed) as exc:
            self._event(kind="stopped", reason=str(exc))
            self.run.set_status("failed", {"state": "failed", "error": str(exc).splitlines()[0]})
            raise
        finally:
            if self.gateway is not None:
                self.gateway.close()
            if self._owns_executor:
                self.executor.close()
        return summary

    def _checkpoint(self, state: dict[str, Any]) -> None:
        """Where a resumed run starts: the next step, the RNG before it, the journal's call count."""
        state["rng"] = rng_to_json(self.rng.getstate())
        state["calls"] = self.journal.calls if self.journal is not None else 0
        state["proposer_calls"] = self.proposer_journal.calls if self.proposer_journal is not None else 0
        self.run.checkpoint(CHECKPOINT, state)

    def _verify_between_steps(self, step: int) -> None:
        self._pin()
        every = self.config.canaries.every
        if self.config.canaries.enabled and every and step and step % every == 0:
            check_canaries(self.suite, self.manifest.name)

    def finish(self, status: str, reason: str | None = None) -> dict[str, Any]:
        self.unlimited = True  # the final measurement is not part of the search budget
        self.accountant.config = self.accountant.config.model_copy(update={
            "max_calls": None, "max_tokens": None, "max_wall_s": None, "max_usd": None})
        if not self.archive.candidates("accepted"):  # stopped before the original was fully evaluated
            summary = {"state": status, **self.totals(), "reason": reason}
            self.run.set_status(status, summary)
            return summary
        report = final_report(self, reason)
        self.run.write_json("evolve/report.json", report)
        done = self._raw_spend()
        self.run.write_json(REPORT_SPEND, {**self.run.read_json(REPORT_SPEND), "done_evals": done[0], "done_calls": done[1]})
        summary = {"state": status, "best": report["best"]["id"], **self.totals(),
                   "test_gain": report["comparison"]["best_minus_original"]["mean"]}
        self.run.set_status(status, summary)
        self._event(kind="finished", status=status, best=report["best"]["id"])
        return {**summary, "report": report}

    def _raw_spend(self) -> tuple[int, int]:
        return self.paid_before + self.evaluator.paid, self.accountant.snapshot()["calls"]

    def _reports_spent(self) -> tuple[int, int]:
        """Task evaluations and model calls that this run's finished final reports made (zero until
        one has finished): measurement, kept out of the search's budget and of its spend."""
        last = self.run.read_json(REPORT_SPEND) or {}
        evals, calls = last.get("measured_evals", 0), last.get("measured_calls", 0)
        if "done_evals" in last:
            evals, calls = evals + last["done_evals"] - last["at_evals"], calls + last["done_calls"] - last["at_calls"]
        return evals, calls

    def search_spend(self) -> dict[str, Any]:
        """What the search had spent (task evaluations, model calls) when the final report began,
        which sizes the report's best-of-N arm. The reports' own evaluations and calls are
        measurement: counted as spend, a report made again (the resume of a finished run, or of one
        killed inside its report) bought its best-of-N arm more attempts each time. Recorded in
        ``evolve/report_spend.json`` when a report begins at a step, reused by any report at that
        step; a run resumed for more steps leaves out what its earlier complete reports spent (a
        report killed and never finished before the run went on is counted as search)."""
        step = (self.run.load_checkpoint(CHECKPOINT) or {}).get("step", 0)
        last = self.run.read_json(REPORT_SPEND) or {}
        if last.get("step") == step:
            return last
        measured = self._reports_spent()
        evals, calls = self._raw_spend()
        spend = {"step": step, "evals": evals - measured[0], "calls": calls - measured[1], "at_evals": evals,
                 "at_calls": calls, "measured_evals": measured[0], "measured_calls": measured[1]}
        self.run.write_json(REPORT_SPEND, spend)
        return spend

    def totals(self) -> dict[str, Any]:
        return {**decided(self.run), "task_evals": self.paid_before + self.evaluator.paid, "cache_hits": self.evaluator.hits,
                "model_calls": self.accountant.snapshot()["calls"],
                "replayed_replies": sum(j.replayed for j in (self.journal, self.proposer_journal) if j is not None)}

    # -- approval --------------------------------------------------------------------------

    def _settle_waiting(self) -> None:
        cfg = self.config.approval
        started = time.monotonic()
        while True:
            waiting = [c for c in self.archive.candidates("waiting")]
            decided = verdicts(self.run)
            for c in waiting:
                if c.id not in decided:
                    continue
                if decided[c.id]["verdict"] == APPROVED:
                    self.archive.set_status(c.id, "accepted")
                    self._event(kind="approved", candidate=c.id)
                else:
                    self._reject_by_person(c.id, decided[c.id]["reason"])
            pending = [c.id for c in waiting if c.id not in decided]
            if not pending:
                return
            timed_out = cfg.timeout_s is not None and time.monotonic() - started >= cfg.timeout_s
            if cfg.wait == "end" or timed_out:
                self._event(kind="waiting", candidates=pending)
                raise _Waiting(pending)
            time.sleep(cfg.poll_s)

    def _reject_by_person(self, candidate_id: str, reason: str) -> None:
        # The gate's numbers stay; the reason says who turned it down and what the gate had said.
        gate = self.archive.decision(candidate_id)
        said = f" (the gate had accepted it: {gate.reason})" if gate else ""
        decision = Decision(False, f"rejected by a person: {reason or 'no reason given'}{said}", gate.numbers if gate else {})
        self.archive.record_decision(candidate_id, decision, self.archive.claim_check(candidate_id))
        self.archive.set_status(candidate_id, "rejected")
        self._event(kind="rejected_by_person", candidate=candidate_id, reason=reason)

    # -- one step --------------------------------------------------------------------------

    def step(self, index: int) -> None:
        # Selector and proposer see the archive as it was when this step began: after a kill that
        # came between this step's writes and its checkpoint, the rerun makes the same choice and
        # asks the same prompt (so the journal replays its reply) instead of reacting to itself.
        shown = self.archive.as_of(index)
        parent = self.selector.select(shown, self.rng)
        selection = dict(getattr(self.selector, "last", {}) or {})
        drawable = self._drawable(shown, parent)
        proposer = self.schedule.pick([p for p, _ in self.proposers], drawable, index, self.rng)
        before = self.model_calls()
        try:
            proposal = proposer.propose(parent, shown, self.rng)
        except (BudgetExceeded, PinMismatch, CanaryFailed):
            raise
        except RatchetError as exc:  # a proposer that could not make a change costs the step, not the run
            return self._unusable(index, parent, proposer, "proposer_error", str(exc).splitlines()[0],
                                  self.model_calls() - before)
        calls = self.model_calls() - before  # no evaluation has run yet: every call so far is the proposal's
        if proposal is None:
            # Proposers that keep why they had nothing (an unparseable reply, say) have it shown.
            reason = getattr(proposer, "last_reason", None) or "the proposer had nothing to offer"
            return self._unusable(index, parent, proposer, "no_proposal", reason, calls)
        child = apply(parent, proposal, selection=selection, step=index)
        if child.id == parent.id:  # nothing to store: the "child" is the parent itself
            return self._unusable(index, parent, proposer, "rejected", "static check: " + self.static.check(
                parent, proposal)[0].message, calls, proposal)
        # "evaluating", or made by this very step before a kill: decide it (again) now, from the cache.
        known = shown.status(child.id)
        if known not in (None, "evaluating"):
            return self._unusable(index, parent, proposer, "duplicate", f"already in the archive as {known}", calls,
                                  proposal, child=child.id)
        twin = self._same_program(child, shown) if self.config.static.novelty else None
        if twin is not None:
            return self._unusable(index, parent, proposer, "duplicate", f"the same program as {twin} ({shown.status(twin)}) "
                                  "once comments and layout are dropped", calls, proposal, child=child.id)
        failures = self.static.check(parent, proposal)
        if any(f.detail.get("rule") == "path" for f in failures):  # files that cannot even be stored
            return self._unusable(index, parent, proposer, "rejected", "static check: " + "; ".join(
                f.message for f in failures), calls, proposal)
        if failures:
            decision = Decision(False, "static check: " + "; ".join(f.message for f in failures), {"stage": 0.0})
            return self._decide(index, parent, child, decision, None, calls)
        self.archive.add(child, "evaluating")
        smoke = self.splits["heldin"][: self.config.smoke.tasks]
        if smoke:
            seed = self.config.seeds[0]
            child_smoke = self.evaluator.evaluate(child, smoke, seed)
            parent_smoke = self.evaluator.evaluate(parent, smoke, seed)
            c, p = fmean(r.score for r in child_smoke), fmean(r.score for r in parent_smoke)
            self.archive.record_results(child.id, "smoke", child_smoke)
            if c < p - self.config.smoke.margin:
                decision = Decision(False, f"smoke: {c:.3f} vs parent {p:.3f} on {len(smoke)} held-in tasks",
                                    {"stage": 1.0, "smoke_child": c, "smoke_parent": p})
                return self._decide(index, parent, child, decision, None, calls)
        parent_results = self.gated_results(parent)
        child_results, decision = self.child_results(child, parent_results)
        if decision is not None:  # futility: held-in can no longer pass; the rest is not paid for
            self._record_all(child, child_results)
            return self._decide(index, parent, child, decision, None, calls)
        decision = self.gate.decide(parent_results, child_results, self.noise(parent_results))
        child_results["search"] = self.evaluate(child, "search", self.config.seeds[:1])
        self._record_all(child, child_results)
        seen = {"search": self.archive.results(parent.id, "search"), "heldin": parent_results["heldin"]}
        check = claim_check(child, per_task_means([r for rs in seen.values() for r in rs]),
                            per_task_means(child_results["search"] + child_results["heldin"]))
        self._decide(index, parent, child, decision, check, calls)

    def _drawable(self, shown: Archive, parent: Candidate) -> list[tuple[Any, float]]:
        """The proposers this step may draw for ``parent``: not one whose proposal is a function of
        the archive alone (``deterministic``, as ``induced_rules`` is) that already had nothing for
        this parent since the archive last gained a candidate: asked again, it would give up again,
        and the step it was drawn for is lost. Read from the archive as of this step, so a resumed
        step draws what the uninterrupted one drew; every proposer when none is left."""
        newest = max((c.meta.get("step", -1) for c in shown.candidates()), default=-1)
        gave_up = {r["proposer"] for r in shown.unusable() if r["parent"] == parent.id and r["step"] > newest}
        left = [(p, w) for p, w in self.proposers if not (getattr(p, "deterministic", False) and p.name in gave_up)]
        return left or self.proposers

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

    def model_calls(self) -> int:
        """Model calls of this run through the journal so far, replayed ones included: a step's
        count is the difference around its proposal, whoever made the calls (a proposer's ``ask``
        or the agent loop of the agentic one, which calls the model itself), and a step rerun
        after a kill counts the calls its replies replay."""
        return sum(j.calls + j.replayed for j in (self.journal, self.proposer_journal) if j is not None)

    def _unusable(self, index: int, parent: Candidate, proposer: Any, status: str, reason: str, calls: int,
                  proposal: Any = None, **event: Any) -> None:
        """A step that made no new candidate (no usable proposal, a proposer error, a change the
        static check cannot store, a duplicate): kept in the archive as a failed proposal with
        its reason and the model calls it spent (paid like any other), shown to later proposals."""
        skip = (getattr(proposer, "last_skip", None) if status == "no_proposal" else None) or {}
        claim = proposal.claim.target if proposal is not None else skip.get("claim")
        self.archive.record_unusable(index, parent.id, proposer.name, reason, calls, claim, skip.get("attempts"))
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
