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
from dataclasses import dataclass
from typing import Any

from ratchet.contracts import RatchetError
from ratchet.evolve.archive import Archive

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
