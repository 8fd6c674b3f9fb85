"""Evolution: the improvement engine's archive. The lineage graph (inline SVG, each node a link),
one candidate's diff against its parent, its claim against what flipped, its per-task results
beside its parent's, the gate's decision with its numbers; score over time; and the human gate:
approve / reject buttons that call :mod:`ratchet.evolve.approval`, as ``ratchet evolve approve``
and ``reject`` do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from markupsafe import Markup

from ratchet.contracts import RatchetError
from ratchet.evolve import approval
from ratchet.evolve.archive import Archive, per_task_means
from ratchet.evolve.loop import CHECKPOINT, EVENTS
from ratchet.store import Run, read_json
from ratchet.ui.context import Page, ui_of
from ratchet.ui.lineage import LineageNode, lineage_svg
from ratchet.ui.plots import Series, line_chart
from ratchet.ui.views import View

router = APIRouter()


def _has_archive(run_dir: Path) -> bool:
    return (run_dir / EVENTS).is_file() or (read_json(run_dir / "run.json") or {}).get("kind") == "evolve"


view = View("evolution", "Evolution", router, applies=_has_archive)

#: The splits a candidate can have results on, in the order a step makes them.
SPLITS = ("smoke", "search", "heldin", "guard", "heldout")
RECENT_STEPS = 100
KIND_OF_DIFF_LINE = {"+": "add", "-": "del", "@": "hunk"}


def _evolve_run(request: Request, run_id: str) -> Run:
    run = ui_of(request).store_run(run_id)
    if not run.path(EVENTS).is_file() and run.kind != "evolve":
        raise HTTPException(404, f"run {run_id} has no evolution archive (it is a {run.kind} run)")
    return run


def step_labels(events: list[dict[str, Any]]) -> dict[str, str]:
    """Candidate id -> "step N · proposer" from the step events (the original: "original")."""
    labels = {e["candidate"]: "original" for e in events if e.get("kind") == "original"}
    for e in events:
        if e.get("kind") == "step" and e.get("child"):
            labels.setdefault(e["child"], f"step {e['step'] + 1} · {e.get('proposer') or '?'}")
    return labels


def score_chart(events: list[dict[str, Any]], scores: dict[str, float | None]) -> Markup:
    """Best accepted held-in score after each step, and each evaluated child's own held-in score."""
    best: list[tuple[float, float]] = [(0.0, e["heldin"]) for e in events
                                       if e.get("kind") == "original" and e.get("heldin") is not None]
    children: list[tuple[float, float]] = []
    for e in events:
        if e.get("kind") != "step":
            continue
        if e.get("best") is not None:
            best.append((e["step"] + 1.0, e["best"]))
        if scores.get(e.get("child") or "") is not None and e.get("status") in ("accepted", "waiting", "rejected"):
            children.append((e["step"] + 1.0, scores[e["child"]]))
    return line_chart([Series("best accepted (held-in)", best), Series("child (held-in)", children)],
                      title="Score over steps", x_label="step", y_label="held-in score")


def diff_lines(text: str) -> list[tuple[str, str]]:
    """(css class, line) of a unified diff."""
    return [(KIND_OF_DIFF_LINE.get(line[:1], "ctx"), line) for line in text.splitlines()]


def task_table(archive: Archive, candidate_id: str, parent_id: str | None, check: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per split: each task's mean score for the candidate and its parent, and whether it flipped."""
    predicted = set((check or {}).get("predicted") or ())
    actual = set((check or {}).get("actual") or ())
    out = []
    for split in SPLITS:
        mine = per_task_means(archive.results(candidate_id, split))
        if not mine:
            continue
        theirs = per_task_means(archive.results(parent_id, split)) if parent_id else {}
        rows = [{"task": t, "parent": theirs.get(t), "child": s,
                 "delta": None if theirs.get(t) is None else s - theirs[t],
                 "predicted": t in predicted, "flipped": t in actual} for t, s in sorted(mine.items())]
        out.append({"split": split, "rows": rows, "seeds": len(archive.results(candidate_id, split)) // max(1, len(mine))})
    return out


def candidate_detail(run: Run, archive: Archive, candidate_id: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    candidate = archive.get(candidate_id)
    check = archive.claim_check(candidate_id)
    status = archive.status(candidate_id)
    return {
        "id": candidate_id, "status": status, "parent_id": candidate.parent_id, "meta": candidate.meta,
        "parents": candidate.meta.get("parents") or [], "claim": candidate.meta.get("claim") or {}, "check": check,
        "decision": archive.decision(candidate_id), "diff": diff_lines(archive.diff(candidate_id)),
        "files": sorted(candidate.files), "tasks": task_table(archive, candidate_id, candidate.parent_id, check),
        "lineage": archive.lineage(candidate_id), "children": [r["id"] for r in rows if r["parent_id"] == candidate_id],
        "verdict": approval.verdicts(run).get(candidate_id),
    }


@router.get("/evolution/{run_id}", response_class=HTMLResponse)
def evolution_page(request: Request, run_id: str, cand: str | None = None, page: int = 1,
                   verdict: str | None = None) -> HTMLResponse:
    ui = ui_of(request)
    run = _evolve_run(request, run_id)
    archive = Archive(run)
    rows = run.candidates()
    events = run.read_jsonl(EVENTS)
    labels = step_labels(events)
    nodes = [LineageNode(r["id"], r["parent_id"], r["status"], r["score"], labels.get(r["id"], "")) for r in rows]
    graph = lineage_svg(nodes, lambda c: f"/evolution/{run_id}?cand={c}", current=cand, limit=ui.config.tree_limit)
    pager = Page.of(page, ui.config.page_size, len(rows))
    listed = [{**r, "label": labels.get(r["id"], ""), "decision": archive.decision(r["id"])} for r in pager.slice(rows)]
    steps = [e for e in events if e.get("kind") == "step"]
    return ui.render(request, "evolution.html", {
        "run_id": run_id, "config": run.config, "status": run.status(), "state": run.load_checkpoint(CHECKPOINT) or {},
        "report": run.read_json("evolve/report.json"), "graph": graph, "drawn": min(len(rows), ui.config.tree_limit),
        "total": len(rows), "chart": score_chart(events, {r["id"]: r["score"] for r in rows}),
        "waiting": [r["id"] for r in rows if r["status"] == "waiting"], "candidates": listed, "pager": pager,
        "steps": steps[-RECENT_STEPS:], "steps_total": len(steps), "verdict": verdict,
        "detail": candidate_detail(run, archive, cand, rows) if cand else None,
        "others": [e for e in events if e.get("kind") not in ("step", "original")][-20:],
    })


def _decided(request: Request, run_id: str, candidate: str, confirm: str,
             decide: Callable[[Run, str], approval.Verdict]) -> RedirectResponse:
    if confirm != "yes":
        raise HTTPException(400, "a verdict needs its confirmation (confirm=yes)")
    run = _evolve_run(request, run_id)
    try:
        said = decide(run, candidate)
    except RatchetError as exc:  # not waiting, already decided, unknown candidate: the request conflicts with the archive
        raise HTTPException(409, str(exc)) from None
    return RedirectResponse(f"/evolution/{run_id}?cand={candidate}&verdict={said.verdict}", status_code=303)


@router.post("/evolution/{run_id}/approve")
def approve(request: Request, run_id: str, candidate: str = Form(...), confirm: str = Form("")) -> RedirectResponse:
    """What ``ratchet evolve approve RUN CAND`` does: :func:`ratchet.evolve.approval.approve`."""
    return _decided(request, run_id, candidate, confirm, approval.approve)


@router.post("/evolution/{run_id}/reject")
def reject(request: Request, run_id: str, candidate: str = Form(...), confirm: str = Form(""),
           reason: str = Form("")) -> RedirectResponse:
    """What ``ratchet evolve reject RUN CAND --reason TEXT`` does: :func:`ratchet.evolve.approval.reject`."""
    return _decided(request, run_id, candidate, confirm, lambda run, c: approval.reject(run, c, reason))
