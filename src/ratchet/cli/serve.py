"""``ratchet serve``: the OpenAI-compatible server that learns from use; ``serve status``,
``serve forget SESSION`` and ``ratchet rollback VERSION``."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from ratchet.contracts import RatchetError
from ratchet.online.api import is_loopback

console = Console()
serve_app = typer.Typer(help="Serve a model over an OpenAI-compatible API and train it on its conversations.",
                        invoke_without_command=True, no_args_is_help=False)

KEY_ENV = "RATCHET_SERVER_KEY"


def _root(runs_root: Path | None) -> Path:
    from ratchet.store.config import default_root

    return Path(runs_root) if runs_root else default_root()


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
            raise RatchetError(f"no run {run!r} under {root}", hint="see `ratchet runs list`, or pass --runs-root")
        return path
    runs = _serving_runs(root)
    if not runs:
        raise RatchetError(f"no serving run under {root}", hint="start one with `ratchet serve`, or pass --run")
    return runs[-1]


def _policy_factory(config: Any, versions_dir: Path):
    """(factory(adapter) -> Policy, version source) for the configured model."""
    from ratchet.online.policy import HttpPolicy, LlamaPolicy, version_store_source

    spec = config.model
    source = version_store_source(versions_dir)
    if spec.startswith("local:"):
        from ratchet.models import model_path

        path = model_path(spec.split(":", 1)[1])

        def local(adapter: Path | None):
            return LlamaPolicy(path, lora_path=adapter, n_ctx=config.n_ctx, n_threads=config.serving_threads,
                               name=spec)

        return local, source
    if spec.startswith(("http://", "https://")):
        base, _, name = spec.partition("#")
        key = os.environ.get("RATCHET_BACKEND_KEY")

        def remote(adapter: Path | None):
            # vLLM runtime LoRA: load the new version's peft adapter and address it by name.
            if adapter is None:
                return HttpPolicy(base, name, api_key=key)
            import httpx

            lora_name = f"ratchet-{adapter.parent.name}"
            httpx.post(f"{base.rstrip('/')}/load_lora_adapter",
                       json={"lora_name": lora_name, "lora_path": str(adapter.parent / "adapter")},
                       headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=120).raise_for_status()
            return HttpPolicy(base, lora_name, api_key=key)

        return remote, source
    raise RatchetError(f"cannot serve {spec!r}", hint="serve local:NAME or http://host:port/v1#model")


@serve_app.callback()
def serve(
    ctx: typer.Context,
    model: str = typer.Option(None, "--model", "-m", help="Model spec, e.g. local:qwen2.5-coder-0.5b."),
    learn: str = typer.Option(None, "--learn", help="off | binary | opd | combine."),
    host: str = typer.Option(None, "--host", help="Interface (default 127.0.0.1)."),
    port: int = typer.Option(None, "--port", help="Port (default 8000)."),
    run: str = typer.Option(None, "--run", help="Run name in the run store."),
    judge: str = typer.Option(None, "--judge", help="'rule' or a model spec for the judge."),
    executor: str = typer.Option(None, "--executor", help="process | ray."),
    address: str = typer.Option(None, "--address", help="With --executor ray: the cluster to join, auto | "
                                                         "ray://HOST:10001 (default: a private Ray instance)."),
    config_path: Path = typer.Option(None, "--config", "-c", help="YAML config (OnlineConfig)."),
    overrides: list[str] = typer.Option([], "--set", help="Override a config key: --set judge.votes=5."),
) -> None:
    """Serve /v1/chat/completions and /v1/models; judge and train in the background."""
    if ctx.invoked_subcommand is not None:
        return
    from ratchet.config import load_config
    from ratchet.online.config import OnlineConfig

    flags = {"model": model, "learn": learn, "host": host, "port": port, "run": run, "executor": executor,
             "address": address}
    sets = [f"{k}={v}" for k, v in flags.items() if v is not None]
    if judge is not None:
        sets += ["judge.kind=rule"] if judge == "rule" else ["judge.kind=model", f"judge.model={judge}"]
    config = load_config(OnlineConfig, config_path, [*overrides, *sets])
    run_server(config)


def run_server(config: Any) -> None:
    """Start the loops, serve until Ctrl-C, stop everything in order."""
    from ratchet.online import status as status_mod
    from ratchet.online.loops import pin_threads, start_loops
    from ratchet.online.policy import PolicyHost
    from ratchet.online.queue import TurnQueue
    from ratchet.online.server import GracefulServer, create_app, make_state
    from ratchet.online.sessions import SessionTracker

    api_key = config.api_key or os.environ.get(KEY_ENV) or None
    if not is_loopback(config.host) and not api_key:
        raise RatchetError(f"refusing to listen on {config.host} without an API key",
                           hint=f"set {KEY_ENV} (or --set api_key=...), or keep --host 127.0.0.1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_name = config.run or time.strftime("serve-%Y%m%d-%H%M%S")
    run_dir = _root(config.runs_root) / run_name
    base = status_mod.online_dir(run_dir)
    base.mkdir(parents=True, exist_ok=True)
    queue_path, versions_dir = base / status_mod.QUEUE_NAME, base / status_mod.VERSIONS_NAME
    (base / "config.json").write_text(config.model_dump_json(indent=2, exclude={"api_key"}))
    pin_threads(config.serving_threads)
    factory, source = _policy_factory(config, versions_dir)
    with console.status(f"loading {config.model}"):
        host = PolicyHost(factory, source, poll_s=config.version_poll_s)
    tracker = SessionTracker(infer=config.sessions.infer, max_sessions=config.sessions.max_sessions,
                             default_turn_type=config.sessions.default_turn_type)
    state = make_state(host, TurnQueue(queue_path), tracker=tracker, served_name=config.served_name or config.model,
                       api_key=api_key, max_tokens=config.max_tokens, max_body_bytes=config.max_body_bytes,
                       backend_concurrency=config.backend_concurrency)
    loops = start_loops(config, queue_path, versions_dir)
    host.start()
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(config.status_every_s):
            try:
                status_mod.write(run_dir, {"requests": state.requests, "errors": state.errors,
                                           "sessions": len(tracker), "swaps": host.swaps})
            except Exception:
                logging.getLogger("ratchet.online").exception("could not write the status")

    threading.Thread(target=report, name="status", daemon=True).start()
    if config.learn != "off":
        threading.Thread(target=_watch_served_reward, args=(config, queue_path, versions_dir, stop),
                         name="reward-watch", daemon=True).start()
    (base / "server.json").write_text(json.dumps({"url": f"http://{config.host}:{config.port}", "pid": os.getpid()}))
    console.print(f"[bold]ratchet serve[/] {config.model} learn={config.learn} → http://{config.host}:{config.port}/v1"
                  f"  run: {run_dir}  ({'API key required' if api_key else 'no API key: local only'})")
    import uvicorn

    # uvicorn re-raises the signal that stopped it once it is done; with the default SIGTERM
    # action that killed this process there, before the loops below were stopped. Handled, it
    # only says why we stop.
    signal.signal(signal.SIGTERM, lambda *_: logging.getLogger("ratchet.online").info("SIGTERM: stopping"))
    app = create_app(state)
    server = GracefulServer(uvicorn.Config(app, host=config.host, port=config.port, log_level="warning",
                                           access_log=False), state, grace_s=config.shutdown_grace_s)
    try:
        server.run()
    except KeyboardInterrupt:  # the Ctrl-C uvicorn re-raised once stopped; uvicorn.run() ends it here too
        pass
    finally:
        console.print("stopping: serving, collection, judging, training …")
        stopped = state.stop_generating(timeout_s=10.0)
        stop.set()
        host.stop()
        state.collector.close()
        loops.stop()
        status_mod.write(run_dir, {"requests": state.requests, "errors": state.errors, "sessions": len(tracker)})
        (base / "server.json").unlink(missing_ok=True)
        if not stopped:  # the interpreter would wait for that thread at exit, unbounded
            logging.getLogger("ratchet.online").error("a generation did not stop; exiting without it")
            os._exit(1)


def _watch_served_reward(config: Any, queue_path: Path, versions_dir: Path, stop: threading.Event) -> None:
    """Roll back a version whose served reward fell beyond noise (``trainer.gate.watch``), as often
    as status is written."""
    from ratchet.online.queue import TurnQueue
    from ratchet.online.versions import VersionStore
    from ratchet.online.watch import RewardWatch

    log = logging.getLogger("ratchet.online")
    watch, queue, store = RewardWatch(config.trainer.gate.watch), TurnQueue(queue_path), VersionStore(versions_dir)
    while not stop.wait(config.status_every_s):
        try:
            drop = watch.check(queue, store)
        except Exception:
            log.exception("the served-reward watch failed")
            continue
        if drop is not None and drop.rolled_back:
            log.warning("v%d rolled back to v%d: %s", drop.current, drop.previous, drop.reason(watch.config.alpha))


@serve_app.command("status")
def status_cmd(
    run: str = typer.Option(None, "--run", help="Run name or directory (default: the latest serving run)."),
    runs_root: Path = typer.Option(None, "--runs-root", help="Run store root (default $RATCHET_RUNS or ./runs)."),
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
) -> None:
    """Per-version metrics: turns, judged fraction, rewards, training loss, KL, evaluation, promotion."""
    from ratchet.online import status as status_mod

    run_dir = _pick_run(run, runs_root)
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
    runs_root: Path = typer.Option(None, "--runs-root", help="Run store root."),
) -> None:
    """Delete a session's conversations and judgements everywhere they are stored."""
    from ratchet.online.queue import TurnQueue
    from ratchet.online.status import QUEUE_NAME, online_dir

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
    runs_root: Path = typer.Option(None, "--runs-root", help="Run store root."),
) -> None:
    """Serve an earlier weight version; a running server hot-swaps to it between requests."""
    from ratchet.online.status import VERSIONS_NAME, online_dir
    from ratchet.online.versions import VersionStore

    run_dir = _pick_run(run, runs_root)
    v = VersionStore(online_dir(run_dir) / VERSIONS_NAME).rollback(version)
    console.print(f"{run_dir.name}: now serving v{v.number}" + (" (base model)" if v.number == 0 else ""))


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")
    app.command("rollback")(rollback_cmd)
