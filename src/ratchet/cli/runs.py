"""``ratchet runs``: look at what runs left behind, and erase a person's session on request."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.tree import Tree

from ratchet.cli.options import RootAlias, StoreOption, store_root
from ratchet.contracts import RatchetError
from ratchet.store import Run, RunStore, StoreConfig

console = Console()


runs_app = typer.Typer(help="List and inspect runs; erase a session's data.", no_args_is_help=True)

def open_store(root: Path | None) -> RunStore:
    """The store at ``root``; a read-only command never creates one where there is none."""
    path = Path(root) if root is not None else StoreConfig().root
    if not path.is_dir():
        raise RatchetError(f"no run store at {path}", hint="pass --store DIR or set RATCHET_RUNS")
    return RunStore(path)


STATUS_STYLE = {"running": "cyan", "done": "green", "stopped": "yellow", "failed": "red", "budget_exhausted": "magenta",
                "interrupted": "yellow",
                "waiting": "blue"}


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else ""


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


@runs_app.command("list")
def list_runs(
    kind: str | None = typer.Option(None, "--kind", help="Only runs of this kind (autoharness, serve, ...)."),
    store_dir: Path | None = StoreOption,
    root: Path | None = RootAlias,
    limit: int = typer.Option(50, "--limit", help="At most this many runs, newest first."),
) -> None:
    """Runs, newest first: status, candidates, best score, model calls and tokens."""
    root = store_root(store_dir, root, "--root")
    path = Path(root) if root is not None else StoreConfig().root
    if not path.is_dir():
        console.print(f"no runs in {path}")
        return
    store = RunStore(path)
    rows = store.list_runs(kind=kind, limit=limit)
    if not rows:
        console.print(f"no runs in {store.root}" + (f" of kind {kind!r}" if kind else ""))
        return
    table = Table(title=f"runs in {store.root}")
    for column, justify in [
        ("id", "left"), ("kind", "left"), ("status", "left"), ("created", "left"), ("candidates", "right"),
        ("best score", "right"), ("llm calls", "right"), ("tokens", "right"),
    ]:
        table.add_column(column, justify=justify, no_wrap=column == "id")
    for row in rows:
        style = STATUS_STYLE.get(row["status"], "")
        table.add_row(
            row["id"], row["kind"], f"[{style}]{row['status']}[/]" if style else row["status"],
            _when(row["created_at"]), str(row["candidates"]), _score(row["best_score"]),
            str(row["llm_calls"]), f"{row['tokens']:,}",
        )
    console.print(table)


def candidate_tree(run: Run) -> Tree | None:
    """The run's candidates as a lineage tree (roots are candidates without a known parent)."""
    rows = run.candidates()
    if not rows:
        return None
    best_eval: dict[str, float] = {}
    for evaluation in run.evaluations():
        cid = evaluation["candidate_id"]
        best_eval[cid] = max(best_eval.get(cid, float("-inf")), evaluation["score"])
    known = {row["id"] for row in rows}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        parent = row["parent_id"] if row["parent_id"] in known else None
        children.setdefault(parent, []).append(row)
    tree = Tree(f"[bold]candidates[/] ({len(rows)})")

    def add(node: Tree, parent: str | None, depth: int) -> None:
        for row in children.get(parent, []):
            score = row["score"] if row["score"] is not None else best_eval.get(row["id"])
            label = f"{row['id']}  [dim]{row['kind']}[/]  {row['status']}"
            if score is not None:
                label += f"  score [bold]{score:.3f}[/]"
            branch = node.add(label)
            if depth < 200:  # lineage is a tree; the guard only stops a damaged index from recursing forever
                add(branch, row["id"], depth + 1)

    add(tree, None, 0)
    return tree


@runs_app.command("show")
def show_run(run_id: str = typer.Argument(..., help="Run id (a unique prefix is enough)."),
             store_dir: Path | None = StoreOption, root: Path | None = RootAlias) -> None:
    """One run: config, summary, candidate tree with scores, model-call totals."""
    store = open_store(store_root(store_dir, root, "--root"))
    info = store.get_run(run_id)
    run = store.open_run(info["id"])
    style = STATUS_STYLE.get(info["status"], "")
    console.print(
        f"[bold]{info['id']}[/]  kind {info['kind']}  status [{style}]{info['status']}[/]  "
        f"created {_when(info['created_at'])}  updated {_when(info['updated_at'])}"
        + (f"  name {info['name']}" if info.get("name") else "")
    )
    console.print(f"[dim]{run.dir}[/]")
    console.print(Panel(Syntax(json.dumps(info["config"], indent=2, sort_keys=True), "json"), title="config"))
    if info["summary"]:
        console.print(Panel(Syntax(json.dumps(info["summary"], indent=2, sort_keys=True), "json"), title="summary"))
    counts = f"candidates {info['candidates']}  evaluations {info['evaluations']}  episodes {info['episodes']}"
    console.print(counts)
    tree = candidate_tree(run)
    if tree is not None:
        console.print(tree)
    breakdown = run.llm_breakdown()
    if breakdown:
        table = Table(title="model calls")
        for column in ("purpose", "calls", "errors", "prompt tokens", "completion tokens", "latency s", "cost $"):
            table.add_column(column, justify="left" if column == "purpose" else "right")
        for purpose, t in [*breakdown.items(), ("total", info["llm"])]:
            table.add_row(
                f"[bold]{purpose}[/]" if purpose == "total" else purpose, str(t["calls"]), str(t["errors"]),
                f"{t['prompt_tokens']:,}", f"{t['completion_tokens']:,}", f"{t['latency_s']:.1f}", f"{t['cost_usd']:.4f}",
            )
        console.print(table)
    else:
        console.print("no model calls recorded")


@runs_app.command("delete-session")
def delete_session(
    session_id: str = typer.Argument(..., help="The session id the conversations were tagged with."),
    store_dir: Path | None = StoreOption,
    root: Path | None = RootAlias,
) -> None:
    """Erase a session everywhere: its conversation records are deleted, its model calls untagged."""
    store = open_store(store_root(store_dir, root, "--root"))
    changed = store.delete_session_data(session_id)
    console.print(f"session {session_id}: {changed} record(s) removed or untagged in {store.root}")


@runs_app.command("reindex")
def reindex(store_dir: Path | None = StoreOption, root: Path | None = RootAlias) -> None:
    """Rebuild index.sqlite from the run directories (the files are the source of truth)."""
    store = open_store(store_root(store_dir, root, "--root"))
    count = store.reindex()
    console.print(f"reindexed {count} run(s) in {store.root}")


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
