"""A person's verdict on a candidate the gate accepted and the run holds for approval.

``ratchet evolve approve|reject`` and the dashboard both call :func:`approve` / :func:`reject`,
so the two do exactly the same thing. A verdict is appended to ``evolve/approvals.jsonl``; the
loop applies it (at once when it polls, else when the run is resumed), since the loop is the one
writer of the archive: an approved candidate becomes ``accepted`` and may be a parent; a rejected
one becomes ``rejected`` with the person's reason in its decision, so later proposals are shown it
like any other rejection. Records written before verdicts existed (no ``verdict``) are approvals.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ratchet.contracts import Decision, RatchetError
from ratchet.evolve.archive import Archive
from ratchet.evolve.config import ApprovalConfig

APPROVALS = "evolve/approvals.jsonl"
APPROVED, REJECTED = "approved", "rejected"


@dataclass(frozen=True)
class Verdict:
    """What was recorded, and whether a running loop picks it up (else the run is to be resumed)."""

    candidate: str
    verdict: str
    reason: str
    run_running: bool


def verdicts(run: Any) -> dict[str, dict[str, Any]]:
    """Candidate id -> its recorded verdict (``verdict``, ``reason``, ``at``)."""
    out: dict[str, dict[str, Any]] = {}
    for record in run.read_jsonl(APPROVALS):
        out.setdefault(record["candidate"], {"verdict": APPROVED, "reason": "", **record})
    return out


def _record(run: Any, candidate: str, verdict: str, reason: str) -> Verdict:
    state = Archive(run).status(candidate)
    if state != "waiting":
        raise RatchetError(f"candidate {candidate} of run {run.id} is not waiting for approval (it is {state or 'unknown'})",
                           hint=f"see the waiting ones with `ratchet evolve status {run.id}`")
    earlier = verdicts(run).get(candidate)
    if earlier is not None:
        raise RatchetError(f"candidate {candidate} of run {run.id} is already {earlier['verdict']}; "
                           "the run applies it when it continues",
                           hint=f"continue the run with `ratchet evolve resume {run.id}`")
    run.append_jsonl(APPROVALS, {"candidate": candidate, "verdict": verdict, "reason": reason, "at": time.time()})
    return Verdict(candidate, verdict, reason, run.status()["status"] == "running")


def approve(run: Any, candidate: str) -> Verdict:
    """Release a waiting candidate: it becomes accepted, and a parent, when the loop next settles."""
    return _record(run, candidate, APPROVED, "")


def reject(run: Any, candidate: str, reason: str = "") -> Verdict:
    """Turn a waiting candidate down: it becomes rejected (with ``reason``) when the loop next settles."""
    return _record(run, candidate, REJECTED, reason.strip())


class Waiting(Exception):
    """Candidates are held for approval and the run is to end as waiting (``args[0]``: their ids)."""


def settle(archive: Archive, run: Any, cfg: ApprovalConfig, event: Callable[..., None]) -> None:
    """Apply every recorded verdict to the waiting candidates; with some still undecided, poll
    (``wait: poll``, up to ``timeout_s``) or raise :class:`Waiting` (``wait: end``, or timed out)."""
    started = time.monotonic()
    while True:
        waiting = archive.candidates("waiting")
        decided = verdicts(run)
        for c in waiting:
            if c.id not in decided:
                continue
            if decided[c.id]["verdict"] == APPROVED:
                archive.set_status(c.id, "accepted")
                event(kind="approved", candidate=c.id)
            else:
                reject_by_person(archive, c.id, decided[c.id]["reason"], event)
        pending = [c.id for c in waiting if c.id not in decided]
        if not pending:
            return
        timed_out = cfg.timeout_s is not None and time.monotonic() - started >= cfg.timeout_s
        if cfg.wait == "end" or timed_out:
            event(kind="waiting", candidates=pending)
            raise Waiting(pending)
        time.sleep(cfg.poll_s)


def reject_by_person(archive: Archive, candidate_id: str, reason: str, event: Callable[..., None]) -> None:
    """A person turned the candidate down: the gate's numbers stay; the reason says who turned it
    down and what the gate had said."""
    gate = archive.decision(candidate_id)
    said = f" (the gate had accepted it: {gate.reason})" if gate else ""
    decision = Decision(False, f"rejected by a person: {reason or 'no reason given'}{said}", gate.numbers if gate else {})
    archive.record_decision(candidate_id, decision, archive.claim_check(candidate_id))
    archive.set_status(candidate_id, "rejected")
    event(kind="rejected_by_person", candidate=candidate_id, reason=reason)
