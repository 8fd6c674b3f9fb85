"""Runs: every run in the store with kind, status, budget used, best score and live progress; one
run's overview; and any text file of a run, read only and confined to it."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse

from ratchet.store import Run, read_json
from ratchet.ui import catalog, paths
from ratchet.ui.context import Page, ui_of
from ratchet.ui.views import View

router = APIRouter()
view = View("runs", "Runs", router)

#: Files bigger than this are shown truncated; the dashboard is not a download server.
MAX_FILE_BYTES = 256 * 1024


def _page(request: Request, page: int) -> tuple[list[catalog.RunRow], Page]:
    ui = ui_of(request)
    size = ui.config.page_size
    rows, total = catalog.list_rows(ui.store, (max(page, 1) - 1) * size, size)
    return rows, Page.of(page, size, total)


@router.get("/", response_class=HTMLResponse)
def runs_page(request: Request, page: int = 1) -> HTMLResponse:
    rows, pager = _page(request, page)
    return ui_of(request).render(request, "runs.html", {"rows": rows, "pager": pager, "root": str(ui_of(request).store.root)})


@router.get("/api/runs")
def runs_api(request: Request, page: int = 1) -> JSONResponse:
    """The rows of one page, polled by the page itself for live progress."""
    rows, pager = _page(request, page)
    return JSONResponse({"page": pager.number, "total": pager.total, "runs": [r.to_json() for r in rows]})


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str) -> HTMLResponse:
    ui = ui_of(request)
    run_path = ui.run_dir(run_id)
    row = catalog.find_row(ui.store, run_id, run_path)
    record = read_json(run_path / "run.json") or {}
    status = read_json(run_path / "status.json") or {}
    llm = Run(ui.store.root, ui.store.index, record).llm_breakdown() if record else {}
    return ui.render(request, "run.html", {"row": row, "config": record.get("config") or {}, "summary": status.get("summary") or {},
                                           "files": _listing(run_path), "llm": llm})


def _listing(run_path: Path, per_dir: int = 40, limit: int = 300) -> list[str]:
    """The run's files two levels deep (hidden temp files left out), for links to the file view."""
    out: list[str] = []
    for entry in sorted(run_path.iterdir()):
        if entry.name.startswith("."):
            continue
        is_dir = entry.is_dir() and not entry.is_symlink()
        out.append(entry.name + ("/" if is_dir else ""))
        if is_dir:
            children = sorted(c for c in entry.iterdir() if not c.name.startswith("."))
            out += [f"{entry.name}/{c.name}" + ("/" if c.is_dir() else "") for c in children[:per_dir]]
            if len(children) > per_dir:
                out.append(f"{entry.name}/… ({len(children) - per_dir} more)")
    return out[:limit]


@router.get("/runs/{run_id}/files/{relpath:path}", response_class=HTMLResponse)
def file_page(request: Request, run_id: str, relpath: str) -> HTMLResponse:
    ui = ui_of(request)
    path = paths.confined(ui.run_dir(run_id), relpath)
    if not path.is_file():
        return ui.render(request, "error.html", {"status": 404, "detail": "no such file in the run store"}, status_code=404)
    with open(path, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    binary = b"\0" in data[:4096]
    return ui.render(request, "file.html", {"run_id": run_id, "relpath": relpath, "size": path.stat().st_size,
                                            "binary": binary, "truncated": len(data) > MAX_FILE_BYTES,
                                            "text": "" if binary else data[:MAX_FILE_BYTES].decode("utf-8", "replace")})
