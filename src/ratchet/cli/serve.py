"""``ratchet serve``: the OpenAI-compatible server that learns from use; ``serve status``,
``serve forget SESSION`` and ``ratchet rollback VERSION``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer
from rich.console import Console

from ratchet.cli.options import RunsRootAlias, StoreOption, store_root
from ratchet.contracts import RatchetError
from ratchet.online.launch import KEY_ENV, run_server, runs_root as _root  # noqa: F401 - run_server: importable from here as before

console = Console()
serve_app = typer.Typer(help="Serve a model over an OpenAI-compatible API and train it on its conversations.",
                        invoke_without_command=True, no_args_is_help=False)



def _serving_runs(root: Path) -> list[Path]:
    from ratchet.online.status import QUEUE_NAME, online_dir

    if not root.is_dir():
        return []
    runs = [p for p in root.iterdir() if (online_dir(p) / QUEUE_NAME).is_file()]
    return sorted(runs, key=lambda p: (online_dir(p) / QUEUE_NAME).stat().st_mtime)


def _pick_run(run: str | None, runs_root: Path | None) -> Path:
    root = _root(runs_root)
    if run:
        path = Path(run) if Path(run).is_dir() else root / run
        if not path.is_dir():
            raise RatchetError(f"no run {run!r} under {root}", hint="see `ratchet runs list`, or pass --store")
        return path
    runs = _serving_runs(root)
    if not runs:
        raise RatchetError(f"no serving run under {root}", hint="start one with `ratchet serve`, or pass --run")
    return runs[-1]


@serve_app.callback()
def serve(
    ctx: typer.Context,
    model: str = typer.Option(None, "--model", "-m", help="Model spec, e.g. local:qwen2.5-coder-0.5b."),
    learn: str = typer.Option(None, "--learn", help="off | binary | opd | combine."),
    host: str = typer.Option(None, "--host", help="Interface (default 127.0.0.1)."),
    port: int = typer.Option(None, "--port", help="Port (default 8000)."),
    run: str = typer.Option(None, "--run", help="Run name in the run store."),
    store: Path = StoreOption,
    judge: str = typer.Option(None, "--judge", help="'classifier' (default), 'rule' or a model spec for the judge."),
    executor: str = typer.Option(None, "--executor", help="process | ray."),
    address: str = typer.Option(None, "--address", help="With --executor ray: the cluster to join, auto | "
                                                         "ray://HOST:10001 (default: a private Ray instance)."),
    config_path: Path = typer.Option(None, "--config", "-c", help="YAML config (OnlineConfig)."),
    overrides: list[str] = typer.Option([], "--set", help="Override a config key: --set judge.votes=5."),
) -> None:
    """Serve /v1/chat/completions and /v1/models; judge and train in the background."""
    if ctx.invoked_subcommand is not None:
        return
    from ratchet.api import serve as serve_api

    flags = {"run": run, "executor": executor, "address": address}
    sets = [f"{k}={v}" for k, v in flags.items() if v is not None]
    if judge is not None:
        sets += [f"judge.kind={judge}"] if judge in ("classifier", "rule") else ["judge.kind=model", f"judge.model={judge}"]
    serve_api(model, learn=learn, host=host, port=port, store=store, config=config_path, overrides=[*overrides, *sets])


@serve_app.command("status")
def status_cmd(
    run: str = typer.Option(None, "--run", help="Run name or directory (default: the latest serving run)."),
    store: Path = StoreOption,
    runs_root: Path = RunsRootAlias,
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
) -> None:
    """Per-version metrics: turns, judged fraction, rewards, training loss, KL, evaluation, promotion."""
    from ratchet.online import status as status_mod

    run_dir = _pick_run(run, store_root(store, runs_root, "--runs-root"))
    status = status_mod.collect(run_dir)
    if as_json:
        console.print_json(json.dumps(status))
        return
    console.print(status_mod.table(status))
    for line in status_mod.refusals(status):
        console.print(f"[yellow]{line}[/]", soft_wrap=True)
    for line in status_mod.gate_notes(status):
        console.print(f"[dim]{line}[/]", soft_wrap=True)
    q = status["queue"]
    console.print(f"run {run_dir}: {q['turns']} turns ({q['main']} main, {q['side']} side, {q['inferred']} in "
                  f"inferred sessions), {q['judged']} judged (+{q['positive']} / −{q['negative']} / 0×{q['zero']}), "
                  f"{q.get('heldout', 0)} held out for the gate, {q['trained']} trained, {q['dropped_stale']} dropped "
                  f"as stale, {q.get('reclaimed', 0)} reclaimed from lost trainers, {q.get('failed', 0)} failed")


@serve_app.command("forget")
def forget_cmd(
    session: str = typer.Argument(..., help="The session id to delete."),
    run: str = typer.Option(None, "--run", help="Only this run (default: every serving run in the store)."),
    store: Path = StoreOption,
    runs_root: Path = RunsRootAlias,
) -> None:
    """Delete a session's conversations and judgements everywhere they are stored."""
    from ratchet.online.queue import TurnQueue
    from ratchet.online.status import QUEUE_NAME, online_dir

    runs_root = store_root(store, runs_root, "--runs-root")
    runs = [_pick_run(run, runs_root)] if run else _serving_runs(_root(runs_root))
    total, versions = 0, set()
    for run_dir in runs:
        queue = TurnQueue(online_dir(run_dir) / QUEUE_NAME)
        versions.update((run_dir.name, v) for v in queue.trained_versions(session))
        deleted = queue.delete_session(session)
        total += deleted
        server = online_dir(run_dir) / "server.json"
        if server.is_file():  # a running server also forgets it from memory
            try:
                import httpx

                url = json.loads(server.read_text())["url"]
                key = os.environ.get(KEY_ENV)
                httpx.delete(f"{url}/v1/ratchet/sessions/{session}", timeout=5,
                             headers={"Authorization": f"Bearer {key}"} if key else {})
            except Exception:
                console.print(f"[yellow]could not reach the server of {run_dir.name}; its memory forgets the "
                              f"session when it restarts or evicts it[/]")
        if deleted:
            console.print(f"{run_dir.name}: deleted {deleted} turns of session {session}")
    console.print(f"deleted {total} turns of session {session} from {len(runs)} run(s)")
    if versions:
        listed = ", ".join(f"{r} v{v}" for r, v in sorted(versions))
        console.print(f"[yellow]weights trained on this session: {listed}. They cannot be un-trained; "
                      f"`ratchet rollback N --run RUN` to a version before them removes its influence.[/]")


def rollback_cmd(
    version: int = typer.Argument(..., help="Version to serve (0 = the base model)."),
    run: str = typer.Option(None, "--run", help="Run name or directory (default: the latest serving run)."),
    store: Path = StoreOption,
    runs_root: Path = RunsRootAlias,
) -> None:
    """Serve an earlier weight version; a running server hot-swaps to it between requests."""
    from ratchet.online.status import VERSIONS_NAME, online_dir
    from ratchet.online.versions import VersionStore

    run_dir = _pick_run(run, store_root(store, runs_root, "--runs-root"))
    v = VersionStore(online_dir(run_dir) / VERSIONS_NAME).rollback(version)
    console.print(f"{run_dir.name}: now serving v{v.number}" + (" (base model)" if v.number == 0 else ""))


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")
    app.command("rollback")(rollback_cmd)
