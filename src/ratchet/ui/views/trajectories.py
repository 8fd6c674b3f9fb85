"""Trajectories: episodes step by step (observation, action, legal, reason, reward) and logged
conversations (messages, tool calls and results), paged and searchable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from ratchet.store import Run, RunStore, read_json
from ratchet.store.files import iter_jsonl
from ratchet.store.run import safe_name
from ratchet.ui import paths
from ratchet.ui.context import Page, ui_of
from ratchet.ui.views import View

router = APIRouter()
view = View("trajectories", "Trajectories", router)

#: A run-wide search stops after this many matching steps: it reads every episode log.
MAX_HITS = 50


def matches(record: dict[str, Any], needle: str) -> bool:
    """Whether ``needle`` (lower case) occurs anywhere in the record's text."""
    return needle in json.dumps(record, ensure_ascii=False).lower()


def _episode_log(run_path: Path, episode_id: str) -> Path:
    return paths.confined(run_path, f"episodes/{safe_name(episode_id, 'episode id')}.jsonl")


def _conversation_log(run_path: Path, name: str) -> Path:
    return paths.confined(run_path, f"trajectories/{safe_name(name, 'trajectory name')}.jsonl")


def _episodes(store: RunStore, run_path: Path) -> list[dict[str, Any]]:
    record = read_json(run_path / "run.json")
    return Run(store.root, store.index, record).episodes() if record else []


@router.get("/trajectories/{run_id}", response_class=HTMLResponse)
def run_trajectories(request: Request, run_id: str, page: int = 1, q: str = "") -> HTMLResponse:
    ui = ui_of(request)
    run_path = ui.run_dir(run_id)
    episodes = _episodes(ui.store, run_path)
    pager = Page.of(page, ui.config.page_size, len(episodes))
    conversations = sorted(p.stem for p in (run_path / "trajectories").glob("*.jsonl")) if (run_path / "trajectories").is_dir() else []
    hits: list[dict[str, Any]] = []
    needle = q.strip().lower()
    if needle:
        for episode in episodes:
            for step in iter_jsonl(_episode_log(run_path, episode["episode_id"])):
                if matches(step, needle):
                    hits.append({"kind": "episode", "id": episode["episode_id"], "index": step.get("index"), "action": step.get("action")})
                    break
            if len(hits) >= MAX_HITS:
                break
        for name in conversations:
            if len(hits) >= MAX_HITS:
                break
            if any(matches(r, needle) for r in iter_jsonl(_conversation_log(run_path, name))):
                hits.append({"kind": "conversation", "id": name, "index": None, "action": None})
    return ui.render(request, "trajectories.html", {"run_id": run_id, "episodes": pager.slice(episodes), "pager": pager,
                                                    "conversations": conversations, "q": q, "hits": hits, "max_hits": MAX_HITS})


@router.get("/trajectories/{run_id}/episode/{episode_id}", response_class=HTMLResponse)
def episode_page(request: Request, run_id: str, episode_id: str, page: int = 1, q: str = "") -> HTMLResponse:
    ui = ui_of(request)
    run_path = ui.run_dir(run_id)
    log = _episode_log(run_path, episode_id)
    if not log.is_file():
        return ui.render(request, "error.html", {"status": 404, "detail": f"no episode {episode_id!r} in run {run_id}"}, status_code=404)
    needle = q.strip().lower()
    steps = [s for s in iter_jsonl(log) if not needle or matches(s, needle)]
    pager = Page.of(page, ui.config.page_size, len(steps))
    summary = next((e for e in _episodes(ui.store, run_path) if e["episode_id"] == episode_id), None)
    return ui.render(request, "episode.html", {"run_id": run_id, "episode_id": episode_id, "steps": pager.slice(steps),
                                               "pager": pager, "q": q, "summary": summary})


@router.get("/trajectories/{run_id}/conversation/{name}", response_class=HTMLResponse)
def conversation_page(request: Request, run_id: str, name: str, page: int = 1, q: str = "") -> HTMLResponse:
    ui = ui_of(request)
    log = _conversation_log(ui.run_dir(run_id), name)
    if not log.is_file():
        return ui.render(request, "error.html", {"status": 404, "detail": f"no conversation log {name!r} in run {run_id}"}, status_code=404)
    needle = q.strip().lower()
    records = [r for r in iter_jsonl(log) if not needle or matches(r, needle)]
    pager = Page.of(page, max(10, ui.config.page_size // 5), len(records))
    return ui.render(request, "conversation.html", {"run_id": run_id, "name": name, "records": pager.slice(records),
                                                    "pager": pager, "q": q})
