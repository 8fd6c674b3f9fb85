"""The archive: every candidate of a run with its lineage, results, decision and claim check.

It lives in the run store (the truth is on disk, so a resumed run sees the same archive):
candidates through ``Run.add_candidate`` / ``set_candidate_status``; per-split results under
``evolve/results/<cand>/<split>.json`` (and an ``Evaluation`` row each); the gate's decision and
the claim check under ``evolve/decisions/<cand>.json``. Rejected candidates keep their reasons,
which proposers read through :meth:`Archive.rejected` so the search does not repeat itself.
A step whose proposer made no usable change (a reply with no applicable edit after its retries,
a proposer error) made no candidate; it is kept as a **failed proposal** in
``evolve/unusable.jsonl`` (step, parent, proposer, reason, the claim it stated, model calls
spent), read through :meth:`Archive.unusable`, shown to later proposals and counted by the report.

Statuses: ``accepted`` (the original and every kept child), ``rejected``, ``waiting`` (accepted
by the gate, held for approval), ``evaluating`` (stored, not yet decided).
"""

from __future__ import annotations

import difflib
from dataclasses import asdict
from statistics import fmean
from typing import Any

from ratchet.contracts import Candidate, Decision, Evaluation, TaskResult
from ratchet.evolve.cache import result_from_record

STATUSES = ("evaluating", "accepted", "rejected", "waiting")
UNUSABLE = "evolve/unusable.jsonl"


#: Failures an evaluation record keeps (the first, in task order): what a reader of the store and
#: the dashboard's node page see; the results file keeps them all.
EVALUATION_FAILURES = 20


def shared_metric_means(results: list[TaskResult]) -> dict[str, float]:
    """The mean of each metric every result reports (a legality evaluation's ``legal_rate``,
    ``steps``…), so an evaluation record says more than its score; "results" is the count's key."""
    shared = set.intersection(*(set(r.metrics) for r in results)) if results else set()
    return {k: fmean(float(r.metrics[k]) for r in results) for k in sorted(shared - {"results"})
            if all(isinstance(r.metrics[k], (int, float)) for r in results)}


def per_task_means(results: list[TaskResult]) -> dict[str, float]:
    """Mean score per task id over its seeds."""
    by_task: dict[str, list[float]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(r.score)
    return {task: fmean(scores) for task, scores in by_task.items()}


class Archive:
    """Implements :class:`ratchet.contracts.ArchiveView` over one run (plus the writes the loop makes)."""

    def __init__(self, run: Any, before_step: int | None = None) -> None:
        self.run = run
        self.before_step = before_step
        self._candidates: dict[str, Candidate] = {}

    def as_of(self, step: int) -> Archive:
        """The archive as it stood when step ``step`` began: without the candidates that step (or a
        later one) made. A step cut off by a kill and run again after the resume is shown what the
        uninterrupted step was shown, so its selection and its proposal's prompt are the same."""
        view = Archive(self.run, before_step=step)
        view._candidates = self._candidates  # the same read cache: candidates are immutable
        return view

    def _visible(self, candidate_id: str) -> bool:
        if self.before_step is None:
            return True
        step = self.get(candidate_id).meta.get("step")
        return step is None or step < self.before_step

    # -- reads (ArchiveView) ---------------------------------------------------------------

    def get(self, candidate_id: str) -> Candidate:
        if candidate_id not in self._candidates:
            self._candidates[candidate_id] = self.run.get_candidate(candidate_id)
        return self._candidates[candidate_id]

    def status(self, candidate_id: str) -> str | None:
        # Not yet in the archive while incomplete on disk (a kill inside add): the step that
        # made it adds it again on the resume, and a half-written candidate is never read.
        if not self.run.has_candidate(candidate_id):
            return None
        state = self.run.read_json(f"candidates/{candidate_id}/status.json")
        return None if state is None or not self._visible(candidate_id) else state["status"]

    def candidates(self, status: str | None = None) -> list[Candidate]:
        """Candidates oldest first, optionally only those with ``status``."""
        return [self.get(row["id"]) for row in self.run.candidates()
                if (status is None or row["status"] == status) and self._visible(row["id"])]

    def results(self, candidate_id: str, split: str) -> list[TaskResult]:
        records = self.run.read_json(f"evolve/results/{candidate_id}/{split}.json") or []
        return [result_from_record(r) for r in records]

    def score(self, candidate_id: str, split: str) -> float | None:
        """The mean score on ``split``; None when not evaluated there, or when its held-in stage
        was stopped by futility: a mean over the tasks it ran is not comparable with the others'
        (a scored-pool selector would rank it), its results stay readable all the same."""
        results = self.results(candidate_id, split)
        if not results:
            return None
        if split == "heldin" and "heldin_tasks_run" in getattr(self.decision(candidate_id), "numbers", {}):
            return None
        return fmean(r.score for r in results)

    def children(self, candidate_id: str) -> list[str]:
        """Every candidate made from this one (kept or not; a merge counts for both parents)."""
        return [c.id for c in self.candidates()
                if c.parent_id == candidate_id or candidate_id in (c.meta.get("parents") or ())[1:]]

    def decision(self, candidate_id: str) -> Decision | None:
        record = self.run.read_json(f"evolve/decisions/{candidate_id}.json")
        return None if record is None else Decision(record["accepted"], record["reason"], record["numbers"])

    def rejected(self, limit: int = 10) -> list[tuple[Candidate, Decision]]:
        """The most recent rejected candidates (newest first) with the decision that rejected them."""
        out = []
        for c in reversed(self.candidates("rejected")):
            decision = self.decision(c.id)
            if decision is not None:
                out.append((c, decision))
            if len(out) >= limit:
                break
        return out

    def unusable(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The failed proposals (steps that made no candidate), newest first, one per step (a step
        run again after a kill recorded it again: the last record wins)."""
        by_step = {r["step"]: r for r in self.run.read_jsonl(UNUSABLE)
                   if self.before_step is None or r["step"] < self.before_step}
        rows = [by_step[step] for step in sorted(by_step, reverse=True)]
        return rows if limit is None else rows[:limit]

    def lineage(self, candidate_id: str) -> list[str]:
        """Ids from the original down to ``candidate_id``."""
        chain = [candidate_id]
        while (parent := self.get(chain[-1]).parent_id) is not None:
            chain.append(parent)
        return chain[::-1]

    def diff(self, candidate_id: str) -> str:
        """A unified diff of every file the candidate changed against its parent ("" when none)."""
        child = self.get(candidate_id)
        parent_files = self.get(child.parent_id).files if child.parent_id else {}
        chunks: list[str] = []
        for rel in sorted(parent_files.keys() | child.files.keys()):
            before, after = parent_files.get(rel, ""), child.files.get(rel, "")
            if before != after:
                chunks += difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{rel}", f"b/{rel}")
        return "".join(chunks)

    def claim_check(self, candidate_id: str) -> dict[str, Any] | None:
        record = self.run.read_json(f"evolve/decisions/{candidate_id}.json") or {}
        return record.get("claim_check")

    # -- writes (the loop only) ------------------------------------------------------------

    def add(self, candidate: Candidate, status: str = "evaluating") -> None:
        self.run.add_candidate(candidate, status=status)
        self._candidates[candidate.id] = candidate

    def set_status(self, candidate_id: str, status: str, score: float | None = None) -> None:
        assert status in STATUSES, status
        self.run.set_candidate_status(candidate_id, status, score)

    def record_results(self, candidate_id: str, split: str, results: list[TaskResult]) -> None:
        """Keep a candidate's results on a split (all seeds); replaces an earlier record of it."""
        self.run.write_json(f"evolve/results/{candidate_id}/{split}.json", [asdict(r) for r in results])
        if results:
            means = per_task_means(results)
            failures = [f for r in results for f in r.failures][:EVALUATION_FAILURES]
            self.run.add_evaluation(Evaluation(candidate_id, split, fmean(r.score for r in results),
                                               {"results": float(len(results)), **shared_metric_means(results)}, means,
                                               failures))

    def record_unusable(self, step: int, parent_id: str, proposer: str, reason: str, model_calls: int,
                        claim: str | None = None, attempts: list[dict[str, Any]] | None = None) -> None:
        """Keep a step that made no candidate, with why, as a failed proposal."""
        self.run.append_jsonl(UNUSABLE, {"step": step, "parent": parent_id, "proposer": proposer, "reason": reason,
                                         "model_calls": model_calls, "claim": claim,
                                         "attempts": [{k: a.get(k) for k in ("ask", "error")} for a in attempts or []]})

    def record_decision(self, candidate_id: str, decision: Decision, claim_check: dict[str, Any] | None = None) -> None:
        self.run.write_json(f"evolve/decisions/{candidate_id}.json",
                            {"accepted": decision.accepted, "reason": decision.reason,
                             "numbers": decision.numbers, "claim_check": claim_check})


def claim_check(candidate: Candidate, parent_means: dict[str, float], child_means: dict[str, float]) -> dict[str, Any]:
    """Which tasks actually flipped (parent failed, child solved: mean below / at-or-above 0.5)
    against the claim's predicted flips, restricted to tasks both were evaluated on."""
    common = parent_means.keys() & child_means.keys()
    actual = sorted(t for t in common if parent_means[t] < 0.5 <= child_means[t])
    predicted = sorted(set((candidate.meta.get("claim") or {}).get("predicted_flips") or ()) & common)
    hit = sorted(set(predicted) & set(actual))
    return {"predicted": predicted, "actual": actual, "hit": hit, "proposer": candidate.meta.get("proposer")}
