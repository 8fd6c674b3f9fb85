"""What every view gets: the store, the settings, the templates, and paging."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from ratchet.store import Run, RunStore, read_json
from ratchet.ui import access, paths
from ratchet.ui.config import UIConfig


@dataclass(frozen=True)
class Page:
    """One page of a long list: 1-based ``number`` of ``pages``, ``offset``/``size`` to slice with."""

    number: int
    size: int
    total: int

    @classmethod
    def of(cls, number: int, size: int, total: int) -> Page:
        pages = max(1, math.ceil(total / size))
        return cls(min(max(1, number), pages), size, total)

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.size))

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size

    def slice(self, items: list[Any]) -> list[Any]:
        return items[self.offset : self.offset + self.size]


@dataclass
class UI:
    """The dashboard's shared state, at ``app.state.ui``."""

    store: RunStore
    config: UIConfig
    templates: Jinja2Templates
    views: tuple[Any, ...]
    token: str | None

    def run_dir(self, run_id: str) -> Path:
        """The directory of a run named in a URL (checked to be inside the store)."""
        return paths.run_dir(self.store.root, run_id)

    def store_run(self, run_id: str) -> Run:
        """A run made through the store (it has a run.json), named in a URL; 404 otherwise."""
        record = read_json(self.run_dir(run_id) / "run.json") or {}
        if not record:
            raise HTTPException(404, f"{run_id} is not a store run")
        return Run(self.store.root, self.store.index, record)

    def render(self, request: Request, template: str, context: dict[str, Any], status_code: int = 200) -> HTMLResponse:
        run_id = context.get("run_id")
        run_path = self.run_dir(run_id) if run_id else None
        base = {
            "nav": [v for v in self.views if v.nav and (run_path is None or v.applies(run_path))],
            "poll_ms": int(self.config.poll_s * 1000),
            # Forms carry the token explicitly: the cookie alone never authorises a change.
            "form_token": self.token or "",
            "token_header": access.HEADER,
        }
        return self.templates.TemplateResponse(request, template, {**base, **context}, status_code=status_code)


def ui_of(request: Request) -> UI:
    return request.app.state.ui
