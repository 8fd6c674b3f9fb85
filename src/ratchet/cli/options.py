"""The run store's flag, one name for every command: ``--store DIR``.

Commands once named it differently (``--root``, ``--run-dir``, ``--runs-root``); those names still
work, hidden from ``--help`` so that one name is taught and old scripts keep running.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ratchet.contracts import RatchetError

STORE_HELP = "Run store directory (default: $RATCHET_RUNS or ./runs)."

StoreOption = typer.Option(None, "--store", help=STORE_HELP)
RootAlias = typer.Option(None, "--root", hidden=True, help="Old name of --store.")
RunDirAlias = typer.Option(None, "--run-dir", hidden=True, help="Old name of --store.")
RunsRootAlias = typer.Option(None, "--runs-root", hidden=True, help="Old name of --store.")


def store_root(store: Path | None, alias: Path | None, alias_name: str) -> Path | None:
    """The run store a command was given, by ``--store`` or by its old name ``alias_name``; None
    when neither was (the store's default). Two different directories are refused, not guessed."""
    if store is not None and alias is not None and Path(store).absolute() != Path(alias).absolute():
        raise RatchetError(f"--store {store} and {alias_name} {alias} name two different run stores",
                           hint=f"give --store alone ({alias_name} is its old name)")
    return store if store is not None else alias
