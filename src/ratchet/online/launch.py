"""Start the learning server: load the served model, the queue, the judge and trainer loops, serve
until Ctrl-C or SIGTERM, then stop everything in order. ``ratchet serve`` and
:func:`ratchet.api.serve` both run :func:`run_server`."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from ratchet.contracts import RatchetError
from ratchet.online.api import is_loopback

console = Console()

#: Environment variable holding the bearer key clients must send.
KEY_ENV = "RATCHET_SERVER_KEY"


def runs_root(runs_root: Path | None) -> Path:
    """The run store's directory: ``runs_root`` when given, else the store's default."""
    from ratchet.store.config import default_root

    return Path(runs_root) if runs_root else default_root()


def _policy_factory(config: Any, versions_dir: Path):
    """(factory(adapter) -> Policy, version source) for the configured model."""
    from ratchet.online.http_policy import HttpPolicy
    from ratchet.online.llama_policy import LlamaPolicy
    from ratchet.online.policy import version_store_source

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


def _check_judge(config: Any):
    """Choose the judge (``auto``: the stacked judge when its label model is pulled, else the
    classifier) and return the :class:`~ratchet.online.judge.JudgeChoice`. Say at start when the
    classifier's encoder is missing: it then judges by its cues alone. A stacked judge without its
    label model cannot judge at all: refused before anything is served."""
    from ratchet.online.judge import choose_judge
    from ratchet.online.loops import label_model_of, make_judge

    choice = choose_judge(config.judge.kind, label_model_of(config))
    if choice.kind == "stacked":
        make_judge(_judged_by(config, choice))  # raises with the pull command; loads nothing until the first turn
    if choice.kind in ("classifier", "stacked"):  # the stacked judge reads with the classifier too
        from ratchet.models.registry import is_verified
        from ratchet.online.judge import FeedbackClassifier

        encoder = FeedbackClassifier.load().encoder
        if encoder and not is_verified(encoder):
            console.print(f"[yellow]judge: {encoder} is not pulled; judging by lexical cues alone "
                          f"(less accurate, see bench/results/online_judge.md). Fix: ratchet models pull {encoder}[/]")
    return choice


def _judged_by(config: Any, choice: Any) -> Any:
    """``config`` with ``judge.kind`` the chosen kind, so the judging loop (a process or a Ray actor,
    maybe on another machine) runs the judge chosen here rather than choosing again."""
    if config.judge.kind == choice.kind:
        return config
    return config.model_copy(update={"judge": config.judge.model_copy(update={"kind": choice.kind})})


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
    run_dir = runs_root(config.runs_root) / run_name
    base = status_mod.online_dir(run_dir)
    base.mkdir(parents=True, exist_ok=True)
    queue_path, versions_dir = base / status_mod.QUEUE_NAME, base / status_mod.VERSIONS_NAME
    (base / "config.json").write_text(config.model_dump_json(indent=2, exclude={"api_key"}))
    pin_threads(config.serving_threads)
    judge = _check_judge(config)
    config = _judged_by(config, judge)
    judge.save(base)
    factory, source = _policy_factory(config, versions_dir)
    with console.status(f"loading {config.model}"):
        host = PolicyHost(factory, source, poll_s=config.version_poll_s)
    tracker = SessionTracker(infer=config.sessions.infer, max_sessions=config.sessions.max_sessions,
                             default_turn_type=config.sessions.default_turn_type)
    state = make_state(host, TurnQueue(queue_path), tracker=tracker, served_name=config.served_name or config.model,
                       api_key=api_key, max_tokens=config.max_tokens, max_body_bytes=config.max_body_bytes,
                       backend_concurrency=config.backend_concurrency, context=_served_context(config, base))
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
    console.print(f"[bold]ratchet serve[/] {config.model} learn={config.learn} "
                  f"judge={judge.kind}{' (auto)' if judge.automatic else ''} → http://{config.host}:{config.port}/v1"
                  f"  run: {run_dir}  ({'API key required' if api_key else 'no API key: local only'})")
    if judge.automatic:  # why this judge, and without the label model how to get the stronger one
        from rich.markup import escape

        console.print(f"[yellow]{escape(judge.line())}[/]" if judge.fix else escape(judge.line()), soft_wrap=True)
    if config.learn != "off":
        # Said now; the trainer decides again when it loads (the memory then available may differ)
        # and records its choice on every version.
        from ratchet.online.teacher import choose_teacher

        trained = config.resolved_trainer()
        teacher = choose_teacher(trained.teacher_model, trained.teacher_unfinished, trained.model)
        console.print(f"hinted teacher at start: {teacher.name}, cut replies {teacher.unfinished} ({teacher.reason})",
                      soft_wrap=True, markup=False)
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


def _served_context(config: Any, run_dir: Path):
    """``context.online``: every prompt gets the playbook the judge loop learns (beside the queue)."""
    if not config.context.online:
        return None
    from functools import partial

    from ratchet.context.online import playbook_path, serve_embedder, served_messages

    return partial(served_messages, playbook=playbook_path(config.context, run_dir), config=config.context,
                   embedder=serve_embedder(config.context))
