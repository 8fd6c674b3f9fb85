"""Is learning from use helping? Live metrics per weight version, in the run store and a table.

Per version: turns it served, the fraction of its main turns that got judged, its judge score
(mean of the raw votes) and reward mean (majority verdicts), the reward moving average at the
time, and from the version's own record: training loss, KL to the base, held-out evaluation score
and whether it was promoted (a regressing version is kept on disk but never served), rolled back
by the served-reward watch (:mod:`ratchet.online.watch`), or gated without held-out checks (too
few held-out turns: :mod:`ratchet.online.gate`). Above them: which judge the server runs, and for
``judge.kind=auto`` why that one (:mod:`ratchet.online.judge.choice`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ratchet.online.evaluation import refusal_line
from ratchet.online.queue import TurnQueue
from ratchet.online.supervision import read_status

QUEUE_NAME = "queue.sqlite"
VERSIONS_NAME = "versions"
#: The loops' pid files and supervision state (``loops.json``).
LOOPS_NAME = "loops"
STATUS_NAME = "status.json"
METRICS_NAME = "metrics.jsonl"


def online_dir(run_dir: Path) -> Path:
    """Where a run keeps its learning-from-use state."""
    return Path(run_dir) / "online"


@dataclass(frozen=True)
class VersionRow:
    version: int
    turns: int
    main_turns: int
    judged_fraction: float
    reward_mean: float | None
    judge_score_mean: float | None
    reward_ma: float | None
    train_loss: float | None
    kl_to_base: float | None
    eval_score: float | None
    promoted: bool
    current: bool
    refused: str | None = None
    """Which promotion checks refused this version, with their numbers, or why else it was not
    promoted (None when it was)."""
    rolled_back: str | None = None
    """Why the served-reward watch rolled this version back after it served (None when it did not)."""
    gate_note: str | None = None
    """Why the gate promoted this version without its held-out checks (too few held-out turns), or None."""


def moving_average(values: list[int], alpha: float = 0.1) -> float | None:
    """Exponential moving average (newest weighs ``alpha``)."""
    if not values:
        return None
    ma = float(values[0])
    for v in values[1:]:
        ma = (1 - alpha) * ma + alpha * v
    return ma


def _num(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def collect(run_dir: Path) -> dict[str, Any]:
    """The status of a serving run, computed from its queue and version store."""
    base = online_dir(run_dir)
    queue = TurnQueue(base / QUEUE_NAME)
    per_version = queue.version_stats()
    judged = queue.judged_rows()
    versions: list[Any] = []
    current = 0
    try:
        from ratchet.online.versions import VersionStore

        store = VersionStore(base / VERSIONS_NAME)
        versions = store.list()
        current = store.current_number()
    except ImportError:  # serving without the training extra: no versions beyond the base
        pass
    numbers = sorted(set(per_version) | {v.number for v in versions} | {0})
    by_number = {v.number: v for v in versions}
    rows = []
    for n in numbers:
        qs = per_version.get(n, {})
        mine = [r for r in judged if r[0] == n]
        votes = [v for r in mine for v in r[2]]
        up_to = [r[1] for r in judged if r[0] <= n]
        v = by_number.get(n)
        metrics = v.metrics if v is not None else {}
        evaluation = metrics.get("evaluation") or {}
        rows.append(VersionRow(
            version=n,
            turns=int(qs.get("turns", 0)),
            main_turns=int(qs.get("main", 0)),
            judged_fraction=float(qs.get("judged_fraction", 0.0)),
            reward_mean=qs.get("reward_mean"),
            judge_score_mean=(sum(votes) / len(votes)) if votes else None,
            reward_ma=moving_average(up_to),
            train_loss=_num(metrics.get("loss")),
            kl_to_base=_num(metrics.get("kl_to_base")),
            eval_score=_num(evaluation.get("score")),
            promoted=bool(v.promoted) if v is not None else n == 0,
            current=n == current,
            refused=(refusal_line(evaluation) or metrics.get("not_promoted")) if v is not None and not v.promoted
            else None,
            rolled_back=v.rolled_back if v is not None else None,
            gate_note=evaluation.get("fallback"),
        ))
    return {
        "at": time.time(),
        "current_version": current,
        "queue": queue.stats(),
        "holdout": queue.holdout(),
        "reward_moving_average": moving_average([r[1] for r in judged]),
        "versions": [asdict(r) for r in rows],
        "loops": read_status(base / LOOPS_NAME),
        "judge": _judge_choice(base),
    }


def _judge_choice(base: Path) -> dict[str, Any] | None:
    from ratchet.online.judge.choice import JudgeChoice

    choice = JudgeChoice.load(base)
    return None if choice is None else choice.to_dict()


def judge_line(status: dict[str, Any]) -> str | None:
    """Which judge the server runs; for ``auto``, why, and after a fallback how to get the stacked
    judge. None for a run that recorded no choice (started before choices were recorded)."""
    from ratchet.online.judge.choice import JudgeChoice

    data = status.get("judge")
    return JudgeChoice.from_dict(data).line() if isinstance(data, dict) and data.get("kind") else None


def write(run_dir: Path, serving: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compute the status, write ``status.json`` atomically and append it to ``metrics.jsonl``."""
    from ratchet.store.files import append_jsonl, write_json_atomic

    status = collect(run_dir)
    if serving:
        status["serving"] = serving
    base = online_dir(run_dir)
    write_json_atomic(base / STATUS_NAME, status)
    append_jsonl(base / METRICS_NAME, {k: status[k] for k in ("at", "current_version", "queue",
                                                              "reward_moving_average", "versions")})
    return status


def claims_line(queue: dict[str, Any]) -> str:
    """The training claims in one line: held now, lost among those, reclaimed so far, failed.

    Counts only: a failed sample's reason may quote an error about its text, and status files hold
    no text (``TurnQueue.failed_samples()`` lists them from the queue itself).
    """
    claimed, lost = int(queue.get("claimed", 0)), int(queue.get("claimed_lost", 0))
    held = f"{claimed} claimed by the trainer"
    if lost:
        held += f" ({lost} by a trainer that is gone or whose lease expired; the next claim takes them back)"
    return (f"training claims: {held}, {queue.get('reclaimed', 0)} reclaimed "
            f"({queue.get('reclaimed_samples', 0)} samples), {queue.get('failed', 0)} failed after repeated reclaims")


def loops_line(loops: dict[str, Any] | None) -> str:
    """The supervised loops in one line: each one's state, pid, restarts and last death."""
    if not loops or not loops.get("loops"):
        return "loops: none recorded (executor=ray, or the server has not started them)"
    parts = []
    for name, loop in loops["loops"].items():
        part = f"{name} {loop['state']}"
        if loop.get("pid") and loop["state"] == "running":
            part += f" (pid {loop['pid']})"
        if loop.get("restarts"):
            part += f", restarted {loop['restarts']}×"
        if loop.get("last_exit"):
            part += f", last died: {loop['last_exit']}"
        if loop.get("restart_at") and loop["state"] == "restarting":
            part += f", restart in {max(0.0, loop['restart_at'] - time.time()):.0f}s"
        parts.append(part)
    server = "" if loops.get("server_alive") else " (as last recorded: its server is not running)"
    return "loops: " + "; ".join(parts) + server


def table(status: dict[str, Any]):
    """A rich table of the per-version rows; its caption ends with :func:`claims_line` and :func:`loops_line`."""
    from rich.table import Table

    def f(value: Any, fmt: str = "{:.3f}") -> str:
        return "—" if value is None else fmt.format(value)

    t = Table(title=f"learning from use — serving v{status['current_version']}")
    # Short headers so the table fits an 80-column terminal; the caption spells them out.
    for col in ("ver", "turns", "judged", "R avg", "R MA", "judge", "loss", "KL", "eval", "prom"):
        t.add_column(col, justify="right", no_wrap=True)
    t.caption = ("R avg: reward mean of the version's judged turns · R MA: reward moving average · judge: mean "
                 "vote · loss/KL: training loss, KL to base · eval: held-out score · prom: promoted (served), "
                 "back: rolled back after serving\n"
                 + claims_line(status.get("queue", {})) + "\n" + loops_line(status.get("loops")))
    for r in status["versions"]:
        t.add_row(
            f"{r['version']}{' *' if r['current'] else ''}", str(r["turns"]), f(r["judged_fraction"], "{:.0%}"),
            f(r["reward_mean"], "{:+.2f}"), f(r["reward_ma"], "{:+.2f}"), f(r["judge_score_mean"], "{:+.2f}"),
            f(r["train_loss"], "{:.3f}"), f(r["kl_to_base"], "{:.3f}"), f(r["eval_score"], "{:+.2f}"),
            "back" if r.get("rolled_back") else "yes" if r["promoted"] else "no",
        )
    return t


def refusals(status: dict[str, Any]) -> list[str]:
    """One line per version the promotion gate refused (the checks that failed and their numbers)
    and per version the served-reward watch rolled back (its numbers)."""
    lines = []
    for r in status["versions"]:
        if r.get("refused"):
            lines.append(f"v{r['version']} not served: {r['refused']}")
        if r.get("rolled_back"):
            lines.append(f"v{r['version']} rolled back: {r['rolled_back']}")
    return lines


def holdout_note(status: dict[str, Any]) -> str:
    """Which hold-out policy chose the gate's conversations and how many turns it held out early
    (while the held-out set was filling, :mod:`ratchet.online.holdout`)."""
    h = status.get("holdout") or {}
    policy = (h.get("policy") or {}).get("policy", "fixed")
    if policy == "fixed":
        return f"policy fixed, share {h.get('share', 0.0):g}"
    return f"policy {policy}, {h.get('early_turns', 0)} of them held out while the held-out set filled"


def gate_notes(status: dict[str, Any]) -> list[str]:
    """One line per version promoted without the held-out checks, saying why."""
    return [f"v{r['version']} gated without held-out checks: {r['gate_note']}" for r in status["versions"]
            if r.get("gate_note")]
