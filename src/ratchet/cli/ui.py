"""``ratchet ui``: the local web dashboard over the run store."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console

from ratchet.cli.options import RootAlias, store_root
from ratchet.contracts import RatchetError

console = Console()

TOKEN_ENV = "RATCHET_UI_TOKEN"


def ui(
    store: Path | None = typer.Option(None, "--store", help="Run store to show (default: $RATCHET_RUNS or ./runs)."),
    root: Path | None = RootAlias,
    host: str | None = typer.Option(None, "--host", help="Interface (default 127.0.0.1; anything else needs a token)."),
    port: int | None = typer.Option(None, "--port", help="Port (default 8765)."),
    token: str | None = typer.Option(None, "--token", help=f"Access token (default ${TOKEN_ENV}; generated off loopback)."),
    config_path: Path | None = typer.Option(None, "--config", "-c", help="YAML config (UIConfig)."),
    overrides: list[str] = typer.Option([], "--set", help="Override a config key: --set page_size=200."),
) -> None:
    """Serve the dashboard: runs, AutoHarness trees, trajectories, learning from use."""
    from ratchet.config import load_config

    try:  # the web stack is an optional extra; say which one when it is missing
        import uvicorn

        from ratchet.ui import UIConfig, create_app
        from ratchet.online.api import is_loopback
        from ratchet.ui.access import token_for
    except ModuleNotFoundError as exc:
        raise RatchetError(f"the dashboard needs {exc.name}", hint="pip install 'ratchet[ui]'") from None
    flags = {"root": store_root(store, root, "--root"), "host": host, "port": port}
    config = load_config(UIConfig, config_path, [*overrides, *(f"{k}={v}" for k, v in flags.items() if v is not None)])
    chosen, generated = token_for(config.host, token or config.token or os.environ.get(TOKEN_ENV))
    config.token = chosen
    app = create_app(config)
    url = f"http://{config.host}:{config.port}/"
    if not is_loopback(config.host):
        console.print(f"[bold yellow]warning:[/] listening on {config.host}: anyone who can reach this address and has the "
                      f"token can read every run (conversations included) and roll weights back.")
        if generated:
            console.print(f"[yellow]generated an access token (pass --token or set {TOKEN_ENV} to choose one)[/]")
    console.print(f"[bold]ratchet ui[/] {config.root} → {url}" + (f"?token={chosen}" if chosen else ""))
    uvicorn.run(app, host=config.host, port=config.port, log_level="warning")


def register(app: typer.Typer) -> None:
    app.command("ui")(ui)
