"""AutoHarness: the tree of harness versions a search grew (value h, refinements, when each node
was picked to refine), one node's code, diff from its parent, the failures it was shown and its
evaluation; the held-out report and the adoption verdict."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from ratchet.autoharness.heldout import verdict_of
from ratchet.autoharness.pipeline import SEARCH_CHECKPOINT as CHECKPOINT
from ratchet.contracts import Failure
from ratchet.store import Run, read_json
from ratchet.ui.context import Page, ui_of
from ratchet.ui.lineage import preorder
from ratchet.ui.views import View

router = APIRouter()
view = View("autoharness", "AutoHarness", router)


@dataclass
class TreeNode:
    """A node as drawn: its row in the store plus what the search's checkpoint knows of it."""

    id: str
    parent_id: str | None
    status: str
    h: float | None
    depth: int = 0
    refinements: int = 0
    selected: list[int] = field(default_factory=list)  # iterations at which this node was refined
    samples: int = 0  # other samples of its refinements that did not enter the tree
    best: bool = False


def selection_order(history: list[dict[str, Any]], parents: dict[str, str | None]) -> dict[int, str | None]:
    """Iteration → the node refined in it (None: a fresh root was sampled), from the search history."""
    chosen: dict[int, str | None] = {}
    for entry in history:
        iteration = entry.get("iteration", 0)
        if iteration and iteration not in chosen and entry.get("candidate") in parents:
            chosen[iteration] = parents[entry["candidate"]]
    return chosen


def build_tree(rows: list[dict[str, Any]], state: dict[str, Any] | None, limit: int) -> tuple[list[TreeNode], int]:
    """The nodes in drawing order (pre-order, children oldest first) with their depth, at most
    ``limit`` of them, and how many tree nodes there are in all.

    With a checkpoint the tree is the search's own (the best sample of each refinement); without
    one (a run of another kind), every scored candidate is a node."""
    parents = {r["id"]: r["parent_id"] for r in rows}
    by_id = {r["id"]: r for r in rows}
    if state and state.get("tree"):
        nodes = {n["candidate_id"]: TreeNode(n["candidate_id"], n["parent_id"], by_id.get(n["candidate_id"], {}).get("status", "evaluated"),
                                             n["h"], refinements=n.get("refinements", 0)) for n in state["tree"]}
    else:
        nodes = {r["id"]: TreeNode(r["id"], r["parent_id"], r["status"], r["score"]) for r in rows if r["score"] is not None}
    for iteration, parent in selection_order((state or {}).get("history", []), parents).items():
        if parent in nodes:
            nodes[parent].selected.append(iteration)
    for r in rows:
        if r["id"] not in nodes and r["parent_id"] in nodes:
            nodes[r["parent_id"]].samples += 1
    if nodes:
        best = max(nodes.values(), key=lambda n: -1.0 if n.h is None else n.h)
        best.best = True
    ordered = []
    for node_id, depth in preorder({n.id: n.parent_id for n in nodes.values()}, limit):
        nodes[node_id].depth = depth
        ordered.append(nodes[node_id])
    return ordered, len(nodes)


def diff_lines(old: str | None, new: str) -> list[tuple[str, str]]:
    """(css class, line) of the unified diff from ``old`` (None: everything is new)."""
    lines = difflib.unified_diff((old or "").splitlines(), new.splitlines(), "parent", "this node", lineterm="", n=3)
    kinds = {"+": "add", "-": "del", "@": "hunk"}
    return [(kinds.get(line[:1], "ctx"), line) for line in lines]


def node_detail(run: Run, node_id: str, rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    candidate = run.get_candidate(node_id)
    name = "harness.py" if "harness.py" in candidate.files else next(iter(candidate.files), "")
    code = candidate.files.get(name, "")
    parent_code = None
    if candidate.parent_id and candidate.parent_id in rows:
        parent = run.get_candidate(candidate.parent_id)
        parent_code = parent.files.get(name)
    meta = dict(candidate.meta)
    return {
        "id": node_id, "row": rows.get(node_id, {}), "parent_id": candidate.parent_id, "file": name, "code": code,
        "diff": diff_lines(parent_code, code), "shown": [failure_fields(f) for f in meta.pop("failures_shown", []) or []],
        "prompt": meta.pop("prompt", []) or [], "response": meta.pop("response", None), "meta": meta,
        "evaluations": [{**e, "failures": [failure_fields(f) for f in e.get("failures") or []]} for e in run.evaluations(node_id)],
    }


def failure_fields(record: dict[str, Any]) -> dict[str, Any]:
    """A stored failure (typed, or an untyped dict of an older run) as the rows the page lists:
    its kind, its detail (the board and expected moves shown apart) and its message last."""
    failure = Failure.from_record(record)
    return {"kind": failure.kind, **({"task": failure.task_id} if failure.task_id else {}), **failure.detail,
            "feedback": failure.message}


@router.get("/autoharness/{run_id}", response_class=HTMLResponse)
def autoharness_page(request: Request, run_id: str, node: str | None = None, page: int = 1) -> HTMLResponse:
    ui = ui_of(request)
    run = ui.store_run(run_id)
    run_path = run.dir
    checkpoint = read_json(run_path / "checkpoints" / f"{CHECKPOINT}.json") or {}
    state = checkpoint.get("state")
    rows = run.candidates()
    tree, tree_total = build_tree(rows, state, ui.config.tree_limit)
    report = read_json(run_path / "report.json")
    pager = Page.of(page, ui.config.page_size, len(rows))
    by_id = {r["id"]: r for r in rows}
    detail = node_detail(run, node, by_id) if node else None
    return ui.render(request, "autoharness.html", {
        "run_id": run_id, "config": run.config, "state": state or {}, "tree": tree, "tree_total": tree_total,
        "report": report, "verdict": verdict_of(report) if report else None, "detail": detail,
        "candidates": pager.slice(rows), "pager": pager, "status": run.status(),
    })
