"""The dashboard's views. Each module defines ``view = View(...)`` with its own router and renders
its own templates; :data:`ratchet.ui.app.VIEWS` lists them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter


@dataclass(frozen=True)
class View:
    """One view: ``slug`` names its URLs (``/<slug>/<run>``), ``title`` its tab in the navigation."""

    slug: str
    title: str
    router: APIRouter
    nav: bool = True
    # Whether a run has anything for this view (its directory given): the navigation bar of a run's
    # page links only the views that apply, instead of tabs that answer 404.
    applies: Callable[[Path], bool] = lambda run_dir: True

    def url(self, run_id: str | None = None) -> str:
        return "/" if self.slug == "runs" and run_id is None else f"/{self.slug}" + (f"/{run_id}" if run_id else "")
