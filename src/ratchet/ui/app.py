"""The FastAPI application: templates, static files, the token guard, and the registered views.

A view is one module of :mod:`ratchet.ui.views` exposing ``view`` (a :class:`~ratchet.ui.views.View`:
slug, title, router) plus its templates; :data:`VIEWS` lists them in the order of the navigation
bar. Adding a view is adding a module, its templates and one entry there.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ratchet.contracts import RatchetError
from ratchet.store import RunStore
from ratchet.ui import access, formatting
from ratchet.ui.config import UIConfig
from ratchet.ui.context import UI
from ratchet.ui.views import View, autoharness, evolution, learning, runs, trajectories

HERE = Path(__file__).parent
VIEWS: tuple[View, ...] = (runs.view, autoharness.view, evolution.view, trajectories.view, learning.view)


def _templates() -> Jinja2Templates:
    # Autoescape on for every template: runs are full of model-written text. A field a record
    # lacks renders empty: records of older runs carry fewer fields.
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(formatting.FILTERS)
    return Jinja2Templates(env=env)


def create_app(config: UIConfig | None = None, *, store: RunStore | None = None) -> FastAPI:
    """The dashboard for ``config.root`` (or ``store``); ``config.token`` switches the guard on."""
    config = config or UIConfig()
    if store is None:
        if not config.root.is_dir():
            raise RatchetError(f"no run store at {config.root}", hint="pass --root DIR or set RATCHET_RUNS")
        store = RunStore(config.root)
    app = FastAPI(title="Ratchet", docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=[Depends(access.require_token)])
    app.state.ui = UI(store=store, config=config, templates=_templates(), views=VIEWS, token=config.token)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    for view in VIEWS:
        app.include_router(view.router)

    @app.middleware("http")
    async def headers(request: Request, call_next):  # noqa: ANN001, ANN202 - Starlette's middleware shape
        response: Response = await call_next(request)
        response.headers.update(access.SECURITY_HEADERS)
        given = request.query_params.get("token")
        token = app.state.ui.token
        if token and given == token and request.method in access.SAFE_METHODS:
            # The printed link: keep the token in a cookie and drop it from the address bar.
            response = RedirectResponse(request.url.remove_query_params("token"), status_code=303)
            response.set_cookie(access.COOKIE, token, httponly=True, samesite="strict")
        return response

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        return app.state.ui.render(request, "error.html", {"status": exc.status_code, "detail": exc.detail},
                                   status_code=exc.status_code)

    @app.exception_handler(RatchetError)
    async def ratchet_error(request: Request, exc: RatchetError) -> Response:
        # Bad input read from the store (an unknown candidate, a damaged file): a 404 that says why.
        return app.state.ui.render(request, "error.html", {"status": 404, "detail": str(exc)}, status_code=404)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> HTMLResponse:
        return HTMLResponse("ok")

    return app
