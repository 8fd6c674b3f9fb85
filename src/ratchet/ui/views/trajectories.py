"""Trajectories: episodes step by step (observation, action, legal, reason, reward) and logged
conversations (messages, tool calls and results), paged and searchable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from ratchet.store import Run, RunStore, read_json
from ratchet.store.files import check_version
from ratchet.store.run import safe_name
from ratchet.ui import paths
from ratchet.ui.context import Page, ui_of
from ratchet.ui.views import View

router = APIRouter()
view = View("trajectories", "Trajectories", router)

#: A run-wide search stops after this many matching steps: it reads every episode log.
MAX_HITS = 50


def log_lines(path: Path, needle: str = "") -> list[bytes]:
    """The lines of a JSONL log, only those containing ``needle`` (any case) when one is given.

    Pages parse only the lines they show: a 10,000-step episode is split into lines and filtered
    as bytes, then one page of them is decoded. The needle is matched in its JSON-escaped form, as
    the store writes text (``ensure_ascii=False``), so quotes and newlines in it match too."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = [line for line in data.split(b"\n") if line.strip()]
    if not needle:
        return lines
    wanted = json.dumps(needle, ensure_ascii=False)[1:-1].lower().encode()
    return [line for line in lines if wanted in line.lower()]


def decode(lines: list[bytes], source: Path) -> list[dict[str, Any]]:
    """Records of the given lines; a torn line (a writer killed mid-append) is skipped, as the
    store's own reader does."""
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        check_version(record, source)
        records.append(record)
    return records


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
            log = _episode_log(run_path, episode["episode_id"])
            first = decode(log_lines(log, needle)[:1], log)
            if first:
                hits.append({"kind": "episode", "id": episode["episode_id"], "index": first[0].get("index"), "action": first[0].get("action")})
            if len(hits) >= MAX_HITS:
                break
        for name in conversations:
            if len(hits) >= MAX_HITS:
                break
            if log_lines(_conversation_log(run_path, name), needle):
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
    lines = log_lines(log, q.strip())
    pager = Page.of(page, ui.config.page_size, len(lines))
    summary = next((e for e in _episodes(ui.store, run_path) if e["episode_id"] == episode_id), None)
    return ui.render(request, "episode.html", {"run_id": run_id, "episode_id": episode_id, "steps": decode(pager.slice(lines), log),
                                               "pager": pager, "q": q, "summary": summary})


@router.get("/trajectories/{run_id}/conversation/{name}", response_class=HTMLResponse)
def conversation_page(request: Request, run_id: str, name: str, page: int = 1, q: str = "") -> HTMLResponse:
    ui = ui_of(request)
    log = _conversation_log(ui.run_dir(run_id), name)
    if not log.is_file():
        return ui.render(request, "error.html", {"status": 404, "detail": f"no conversation log {name!r} in run {run_id}"}, status_code=404)
    lines = log_lines(log, q.strip())
    pager = Page.of(page, max(10, ui.config.page_size // 5), len(lines))
    return ui.render(request, "conversation.html", {"run_id": run_id, "name": name, "records": decode(pager.slice(lines), log),
                                                    "pager": pager, "q": q})
