"""``ratchet serve``: the OpenAI-compatible server that learns from use; ``serve status``,
``serve forget SESSION``, ``serve feed RUN`` (a harness run's verdicts as training turns) and
``ratchet rollback VERSION``."""

from __future__ import annotations

import json
import os
import time
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
    model: str = typer.Option(None, "--model", "-m", help="Model spec, e.g. local:qwen2.5-coder-0.5b; local:NAME@vN (@current, @latest) serves "
                                                               "and trains on from a published weight version (from "
                                                               "RATCHET_VERSIONS, else the run's own)."),
    learn: str = typer.Option(None, "--learn", help="off | binary | opd | combine."),
    host: str = typer.Option(None, "--host", help="Interface (default 127.0.0.1)."),
    port: int = typer.Option(None, "--port", help="Port (default 8000)."),
    run: str = typer.Option(None, "--run", help="Run name in the run store."),
    store: Path = StoreOption,
    judge: str = typer.Option(None, "--judge", help="'auto' (default: 'stacked' when its 1.5B is pulled, else "
                              "'classifier'), 'classifier', 'rule', 'stacked' (the classifier weighed with the 1.5B's "
                              "reading; needs `ratchet models pull qwen2.5-coder-1.5b`) or a model spec for the judge."),
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

    if model is not None and model.startswith("local:") and "@" in model:
        run = run or time.strftime("serve-%Y%m%d-%H%M%S")
        model = start_from_version(model, _root(store) / run)
    flags = {"run": run, "executor": executor, "address": address}
    sets = [f"{k}={v}" for k, v in flags.items() if v is not None]
    if judge is not None:
        sets += [f"judge.kind={judge}"] if judge in ("auto", "classifier", "rule", "stacked") else ["judge.kind=model", f"judge.model={judge}"]
    serve_api(model, learn=learn, host=host, port=port, store=store, config=config_path, overrides=[*overrides, *sets])


@serve_app.command("status")
def status_cmd(
    run: str = typer.Option(None, "--run", help="Run name or directory (default: the latest serving run)."),
    store: Path = StoreOption,
    runs_root: Path = RunsRootAlias,
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
) -> None:
    """Which judge runs (for judge.kind=auto, why), then per-version metrics: turns, judged fraction, rewards,
    training loss, KL, evaluation, promotion."""
    from ratchet.online import status as status_mod

    run_dir = _pick_run(run, store_root(store, runs_root, "--runs-root"))
    status = status_mod.collect(run_dir)
    if as_json:
        console.print_json(json.dumps(status))
        return
    line = status_mod.judge_line(status)
    if line:
        console.print(line, style="yellow" if (status.get("judge") or {}).get("fix") else None, markup=False,
                      soft_wrap=True)
    console.print(status_mod.table(status))
    for line in status_mod.refusals(status):
        console.print(f"[yellow]{line}[/]", soft_wrap=True)
    for line in status_mod.gate_notes(status):
        console.print(f"[dim]{line}[/]", soft_wrap=True)
    q = status["queue"]
    console.print(f"run {run_dir}: {q['turns']} turns ({q['main']} main, {q['side']} side, {q['inferred']} in "
                  f"inferred sessions), {q['judged']} judged (+{q['positive']} / −{q['negative']} / 0×{q['zero']}), "
                  f"{q.get('heldout', 0)} held out for the gate ({status_mod.holdout_note(status)}), "
                  f"{q['trained']} trained, {q['dropped_stale']} dropped as stale, {q.get('reclaimed', 0)} reclaimed from lost trainers, {q.get('failed', 0)} failed")


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


def start_from_version(spec: str, run_dir: Path) -> str:
    """Serve ``local:NAME@vN`` (``@current``, ``@latest``): the version, from the version store
    ``RATCHET_VERSIONS`` names (else the serving run's own), becomes the serving run's current
    version, and the run serves and trains on from it; returns the spec to serve (``local:NAME``).

    A version of the run's own store is made current (a rollback); one of another store (a
    curriculum's, another serve run's) is copied in as the run's next version, its record saying
    where from, unless the run's current version is already that copy (the same command again)."""
    from ratchet.models.registry import model_path
    from ratchet.models.versioned import VERSION_FORM, VERSIONS_ENV, resolve, split_version, versions_dir
    from ratchet.online.status import VERSIONS_NAME, online_dir
    from ratchet.online.versions import VersionStore
    from ratchet.online.weights import gguf_sha256

    base, version = split_version(spec.split(":", 1)[1])
    if version is None:
        return spec
    if VERSION_FORM.match(version) is None:
        raise RatchetError(f"bad weight version {version!r} in {spec!r}",
                           hint="write local:NAME@vN (N a number, v0 = the base), @current or @latest")
    own = online_dir(run_dir) / VERSIONS_NAME
    source = versions_dir(None, spec) if os.environ.get(VERSIONS_ENV) else own
    if not source.is_dir():
        raise RatchetError(f"{spec!r} names a weight version, but serving run {run_dir.name} has published none and "
                           f"no version store is given",
                           hint=f"set {VERSIONS_ENV} to the store the version is in (runs/<run>/online/versions), "
                                f"or serve local:{base}")
    found = resolve(spec, base, version, source, lambda: gguf_sha256(model_path(base)))
    target = VersionStore(own)
    if source.resolve() == own.resolve():
        target.rollback(found.number)
        console.print(f"{run_dir.name}: serving from its v{found.number}")
        return f"local:{base}"
    if found.number == 0:
        target.rollback(0)
        return f"local:{base}"
    current = target.current()
    if (current.metrics.get("imported_from") or {}).get("digest") == found.digest:
        console.print(f"{run_dir.name}: serving from v{current.number} (a copy of v{found.number} of {source})")
        return f"local:{base}"
    original = VersionStore(source).get(found.number)
    if original.adapter_dir is None:
        raise RatchetError(f"weight version v{found.number} in {source} has no peft adapter (adapter/) to copy",
                           hint="pick a version published with its adapter, or serve it from the run that published it")
    metrics = {k: v for k, v in original.metrics.items() if k in ("base_model", "signal")}
    metrics.update(parent_version=current.number, optimizer_steps=0,
                   imported_from={"store": str(source), "version": found.number, "digest": found.digest})
    copy = target.publish(original.adapter_dir, metrics, promote=True, lora_gguf=found.lora_gguf)
    console.print(f"{run_dir.name}: serving from v{copy.number}, a copy of v{found.number} of {source}", soft_wrap=True)
    return f"local:{base}"


FEED_HELP = """Feed finished harness runs' verdicts to a serving run's trainer as judged turns.

What is fed: every sample a critic/refiner step asked the model for (AutoHarness, and `ratchet evolve` with the critic_refiner proposer, record them in evolve/samples.jsonl), as a turn of the serving run's queue. Its reward is +1 / -1 when its code scored above / below the other samples of the same request (0: equal, or alone); its hint says what the screen and the games revealed, for OPD's teacher to read.

The serving run's trainer (its model, at the version serving now) is loaded in torch to tokenize and score the replies: tens of seconds. A running trainer takes the turns in its next batches, a stopped one when the run is served again. A second call adds nothing.

\b
  ratchet serve feed RUN [RUN ...] [--run SERVING_RUN] [--store DIR]
"""


def _serving_trainer(run_dir: Path):
    """The trainer settings of the serving run at ``run_dir``, as its training loop resolves them
    from the config ``ratchet serve`` wrote there; refused when it does not learn."""
    from pydantic import ValidationError

    from ratchet.online.config import OnlineConfig
    from ratchet.online.status import online_dir

    path = online_dir(run_dir) / "config.json"
    try:
        config = OnlineConfig.model_validate_json(path.read_text())
    except OSError:
        raise RatchetError(f"serving run {run_dir.name} has no {path} (`ratchet serve` writes it at start)",
                           hint=f"start it once with: ratchet serve --run {run_dir.name}") from None
    except ValidationError as exc:
        raise RatchetError(f"{path} is not a serving config: {exc.errors()[0]['msg']}",
                           hint=f"start the run again with `ratchet serve --run {run_dir.name}`") from None
    if config.learn == "off":
        raise RatchetError(f"serving run {run_dir.name} does not learn (it was served with --learn off): "
                           f"no trainer reads its queue",
                           hint=f"serve it learning, e.g. `ratchet serve --run {run_dir.name} --learn combine`, "
                                f"then feed it")
    return config.resolved_trainer()


def _harness_run(given: str, root: Path | None):
    """The engine or AutoHarness run ``given`` names (an id or unique prefix in the store, or its
    directory), refused when it recorded no samples."""
    from ratchet.evolve.proposers.critic import SAMPLES_FILE
    from ratchet.store import RunStore

    path = Path(given)
    if (path / "run.json").is_file():
        store, run_id = RunStore(path.parent), path.name
    else:
        where = _root(root)
        if not where.is_dir():
            raise RatchetError(f"no run store at {where}", hint="pass --store DIR or set RATCHET_RUNS")
        store, run_id = RunStore(where), given
    run = store.open_run(run_id)
    if not run.path(SAMPLES_FILE).is_file():
        raise RatchetError(f"run {run.id} ({run.kind}) recorded no proposer samples ({SAMPLES_FILE})",
                           hint="only the critic/refiner proposers record them: AutoHarness, and `ratchet evolve` "
                                "with the critic_refiner proposer (not reflective, mutation, diff, agentic or merge)")
    return run


def _writer_note(run, trainer_model: str) -> str | None:
    """A note when the run's replies were written by another local model than the one trained."""
    spec = str((run.config or {}).get("proposer_model") or (run.config or {}).get("model") or "")
    if not spec.startswith("local:"):
        return None
    name = spec.split(":", 1)[1].split("@", 1)[0]
    if name in (trainer_model, Path(trainer_model).stem):
        return None
    return (f"{run.id}: its replies were written by {name}; {trainer_model} is trained on them as if it had "
            f"written them")


@serve_app.command("feed", help=FEED_HELP)
def feed_cmd(
    runs: list[str] = typer.Argument(..., metavar="RUN...", help="Engine or AutoHarness run: id (a unique prefix "
                                                                 "is enough) in the store, or its directory."),
    run: str = typer.Option(None, "--run", help="The serving run to feed: name or directory (default: the "
                                                "latest serving run)."),
    store: Path = StoreOption,
    runs_root: Path = RunsRootAlias,
) -> None:
    from dataclasses import replace

    from ratchet.online import verdicts
    from ratchet.online.queue import TurnQueue
    from ratchet.online.status import QUEUE_NAME, VERSIONS_NAME, online_dir

    root = store_root(store, runs_root, "--runs-root")
    serving = _pick_run(run, root)
    trainer = _serving_trainer(serving)
    # Every input checked before a model loads; a run named twice (by id and by directory) fed once.
    harness = list({r.id: r for r in (_harness_run(given, root) for given in runs)}.values())
    queue = TurnQueue(online_dir(serving) / QUEUE_NAME)
    pairs = {r.id: verdicts.verdict_turns(r) for r in harness}
    interrupted = sum(verdicts.rejudge_interrupted(p, queue) for p in pairs.values())
    if interrupted:
        console.print(f"{interrupted} turn(s) an interrupted feed stored without their judgement are judged now")
    waiting = sum(len(verdicts.unfed(p, queue)) for p in pairs.values())
    policy, version = None, 0
    if waiting:
        # Measured for the 0.5B, 1 thread, weights cache warm, a busy 2-core machine: 7 s, then 38 s for 4 replies.
        console.print(f"loading {trainer.model} in torch as {serving.name}'s trainer to tokenize and score {waiting} "
                      f"replies on {trainer.num_threads} thread(s) (the 0.5B on 1: ~7 s to load, ~10 s a reply) …",
                      soft_wrap=True)
        policy, version = verdicts.trainer_policy(trainer, online_dir(serving) / VERSIONS_NAME)
    total = 0
    for r in harness:
        every = pairs[r.id]
        # Asked again: another feed may have added some while the model loaded.
        new = verdicts.unfed(every, queue) if policy is not None else []
        if new:
            new = verdicts.tokenized([(replace(t, policy_version=version), j) for t, j in new], policy)
            verdicts.add_judged(queue, new)
        total += len(new)
        rewards = [j.reward for _, j in every]
        console.print(
            f"{r.id}: {len(every)} turns, {len(new)} new, {len(every) - len(new)} already in the queue; "
            f"{sum(verdicts.unusable(j) for _, j in every)} gave no usable code; rewards +1×{rewards.count(1)} "
            f"−1×{rewards.count(-1)} 0×{rewards.count(0)}; {sum(bool(j.hint) for _, j in every)} with a hint",
            soft_wrap=True)
        empty = sum(not t.response_token_ids for t, _ in new)
        if empty:
            console.print(f"[yellow]{r.id}: {empty} new turn(s) have an empty reply: the trainer skips them[/]")
        long = sum(len(t.prompt_token_ids) + len(t.response_token_ids) > trainer.max_seq_len for t, _ in new)
        if long:
            console.print(f"[yellow]{r.id}: {long} new turn(s) are longer than trainer.max_seq_len "
                          f"({trainer.max_seq_len}): the trainer keeps their last tokens. Fix: serve with "
                          f"--set trainer.max_seq_len=4096[/]", soft_wrap=True)
        note = _writer_note(r, trainer.model)
        if note and new:
            console.print(f"[dim]{note}[/]", soft_wrap=True)
    if total and trainer.signal in ("opd", "combine") and trainer.distill_target == "teacher":
        console.print("[dim]trainer.distill_target is teacher: a hinted teacher's own code reply may run past "
                      "its limit (trainer.teacher_max_tokens_cap) and teach nothing; "
                      "--set trainer.distill_target=served distills along the fed reply (docs/online.md)[/]", soft_wrap=True)
    running = (online_dir(serving) / "server.json").is_file()
    when = ("its running trainer takes them in its next batches" if running else
            f"its trainer takes them when `ratchet serve --run {serving.name}` starts it again")
    console.print(f"{serving.name}: fed {total} new turn(s)" + (f" as v{version}'s samples; {when}" if total else ""),
                  soft_wrap=True)


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
