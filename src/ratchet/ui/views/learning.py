"""Learning from use: weight versions and their promotion decisions, reward and judge-score
curves, recent sessions with their judged turns and hints, and rollback (with a confirmation) by
the same library call as ``ratchet rollback``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from ratchet.online import status as online_status
from ratchet.online.evaluation import refusal_line
from ratchet.online.queue import TurnQueue
from ratchet.online.status import METRICS_NAME, QUEUE_NAME, VERSIONS_NAME, online_dir
from ratchet.online.versions import VersionStore
from ratchet.store.files import iter_jsonl
from ratchet.ui.context import Page, ui_of
from ratchet.ui.plots import Series, line_chart
from ratchet.ui.views import View

router = APIRouter()
view = View("learning", "Learning from use", router,
            applies=lambda run_dir: (online_dir(run_dir) / QUEUE_NAME).is_file())

RECENT_SESSIONS = 20


def _online(request: Request, run_id: str) -> Path:
    base = online_dir(ui_of(request).run_dir(run_id))
    if not (base / QUEUE_NAME).is_file():
        raise HTTPException(404, f"run {run_id} has no learning-from-use state (no online/{QUEUE_NAME})")
    return base


def _read_only(path: Path) -> sqlite3.Connection:
    # Read only, so looking never takes the queue's write lock from serving, judging or training.
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    conn.row_factory = sqlite3.Row
    return conn


def ema_points(values: list[float], alpha: float = 0.1) -> list[tuple[float, float]]:
    """(index, moving average so far) for each value: the curve whose last point ``status`` reports."""
    points, ma = [], None
    for i, v in enumerate(values, 1):
        ma = float(v) if ma is None else (1 - alpha) * ma + alpha * v
        points.append((float(i), ma))
    return points


def _version_records(versions_dir: Path) -> list[dict[str, Any]]:
    store = VersionStore(versions_dir)
    current = store.current_number()
    rows = []
    for v in store.list():
        meta = {}
        if v.number:
            meta = json.loads((versions_dir / f"v{v.number:06d}" / "version.json").read_text())
        evaluation = v.metrics.get("evaluation") or {}
        rows.append({"number": v.number, "promoted": v.promoted, "promoted_by": meta.get("promoted_by"), "created_at": v.created_at,
                     "metrics": v.metrics, "current": v.number == current, "rolled_back": v.rolled_back,
                     "refused": refusal_line(evaluation) or v.metrics.get("not_promoted"),
                     "gate_note": evaluation.get("fallback")})
    return rows


def _sessions(queue: Path, limit: int) -> list[dict[str, Any]]:
    with _read_only(queue) as db:
        rows = db.execute(
            "SELECT t.session_id, COUNT(*) AS turns, SUM(j.turn_id IS NOT NULL) AS judged, SUM(j.reward) AS reward,"
            " SUM(j.has_hint) AS hints, MAX(t.created_at) AS last_at, MAX(t.inferred) AS inferred FROM turns t"
            " LEFT JOIN judgements j ON j.turn_id = t.turn_id GROUP BY t.session_id ORDER BY last_at DESC LIMIT ?", (limit,)
        ).fetchall()
    return [dict(r) for r in rows]


@router.get("/learning/{run_id}", response_class=HTMLResponse)
def learning_page(request: Request, run_id: str, rolled: int | None = None) -> HTMLResponse:
    base = _online(request, run_id)
    status = online_status.collect(base.parent)
    judgements = TurnQueue(base / QUEUE_NAME).judged_rows()
    judged = [reward for _, reward, _, _ in judgements]
    votes = [sum(v) / len(v) for _, _, v, _ in judgements if v]
    history = list(iter_jsonl(base / METRICS_NAME))
    start = history[0]["at"] if history else 0.0
    rows = status["versions"]
    charts = [
        line_chart([Series("reward (moving average)", ema_points(judged)), Series("judge score (moving average)", ema_points(votes))],
                   title="Judged turns", x_label="judged turn", y_label="reward"),
        line_chart([Series("reward moving average", [((h["at"] - start) / 60, h["reward_moving_average"]) for h in history
                                                     if h.get("reward_moving_average") is not None])],
                   title="Over time (status snapshots)", x_label="minutes", y_label="reward MA"),
        line_chart([Series("reward mean", [(r["version"], r["reward_mean"]) for r in rows if r["reward_mean"] is not None]),
                    Series("judge score", [(r["version"], r["judge_score_mean"]) for r in rows if r["judge_score_mean"] is not None]),
                    Series("held-out eval", [(r["version"], r["eval_score"]) for r in rows if r["eval_score"] is not None])],
                   title="Per weight version", x_label="version", y_label="score"),
    ]
    rollbacks = list(iter_jsonl(base / VERSIONS_NAME / "rollbacks.jsonl"))
    return ui_of(request).render(request, "learning.html", {
        "run_id": run_id, "status": status, "versions": _version_records(base / VERSIONS_NAME), "charts": charts,
        "sessions": _sessions(base / QUEUE_NAME, RECENT_SESSIONS), "rollbacks": rollbacks[-10:], "rolled": rolled,
    })


@router.get("/learning/{run_id}/session/{session_id}", response_class=HTMLResponse)
def session_page(request: Request, run_id: str, session_id: str, page: int = 1) -> HTMLResponse:
    base = _online(request, run_id)
    with _read_only(base / QUEUE_NAME) as db:
        rows = db.execute(
            "SELECT t.turn_id, t.turn_type, t.policy_version, t.created_at, t.state, t.data, t.next_state, j.reward, j.data AS judgement"
            " FROM turns t LEFT JOIN judgements j ON j.turn_id = t.turn_id WHERE t.session_id = ? ORDER BY t.created_at", (session_id,)
        ).fetchall()
    if not rows:
        raise HTTPException(404, f"no session {session_id!r} in run {run_id}")
    turns = []
    for r in rows:
        data = json.loads(r["data"])
        judgement = json.loads(r["judgement"]) if r["judgement"] else None
        turns.append({"id": r["turn_id"], "type": r["turn_type"], "version": r["policy_version"], "at": r["created_at"],
                      "state": r["state"], "messages": data.get("messages") or [], "response": data.get("response_text", ""),
                      "next_state": r["next_state"], "reward": r["reward"], "judgement": judgement})
    pager = Page.of(page, max(10, ui_of(request).config.page_size // 5), len(turns))
    return ui_of(request).render(request, "session.html", {"run_id": run_id, "session_id": session_id,
                                                           "turns": pager.slice(turns), "pager": pager})


@router.get("/learning/{run_id}/rollback/{version}", response_class=HTMLResponse)
def rollback_confirm(request: Request, run_id: str, version: int) -> HTMLResponse:
    base = _online(request, run_id)
    store = VersionStore(base / VERSIONS_NAME)
    target = store.get(version)  # an unknown version is a 404 with the known ones named
    return ui_of(request).render(request, "rollback.html", {"run_id": run_id, "target": target, "current": store.current_number()})


@router.post("/learning/{run_id}/rollback")
def rollback(request: Request, run_id: str, version: int = Form(...), confirm: str = Form("")) -> RedirectResponse:
    """What ``ratchet rollback VERSION --run RUN`` does: :meth:`VersionStore.rollback`."""
    if confirm != "yes":
        raise HTTPException(400, "a rollback needs its confirmation (confirm=yes)")
    base = _online(request, run_id)
    VersionStore(base / VERSIONS_NAME).rollback(version)
    return RedirectResponse(f"/learning/{run_id}?rolled={version}", status_code=303)
