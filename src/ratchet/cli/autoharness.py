"""``ratchet autoharness``: the model writes its own harness for a TextArena game.

    ratchet autoharness --env TicTacToe-v0 --mode verifier --model local:qwen2.5-coder-0.5b
    ratchet autoharness --resume RUN_ID
    ratchet autoharness --suite autoharness-145 --model local:qwen2.5-coder-1.5b
    ratchet autoharness export RUN_ID -o harness_tictactoe.py
    ratchet autoharness learn --train-suite autoharness-40/puzzle --heldout-suite autoharness-40/line
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ratchet.api import protocol_config
from ratchet.cli.options import RootAlias, StoreOption, store_root
from ratchet.contracts import RatchetError

console = Console()


@contextmanager
def _reporter(cfg: Any) -> Iterator[Callable[[str], None]]:
    """on_phase for a synthesis: a spinner naming the phase on a terminal, plain lines elsewhere
    (the engine's steps are in the run's events, ``ratchet runs show``)."""
    if not console.is_terminal:
        lines = _Lines(cfg.env)
        lines.phase("harvesting and search")
        yield lines.phase
        lines.phase("done")
        return
    with Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task(f"{cfg.env} search", total=None)

        def phase(name: str) -> None:
            bar.update(task, description=f"{cfg.env} {name}")

        yield phase


class _Lines:
    """Progress as one plain line per phase, for a log or a pipe (a spinner prints nothing there
    until it ends)."""

    def __init__(self, env: str) -> None:
        self.env, self.started = env, time.monotonic()

    def phase(self, name: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f} s] {self.env}: {name}", flush=True)


def _show(report: dict) -> None:
    table = Table(title=f"AutoHarness: {report['env']} ({report['mode']}, {report['method']})")
    table.add_column("measure")
    table.add_column("without harness")
    table.add_column("with harness")
    b, a = report.get("before") or {}, report.get("after") or {}
    for key in ("legal_rate", "reward", "legal_steps", "play_calls"):
        table.add_row(key, str(b.get(key, "–")), str(a.get(key, "–")))
    alone = report.get("harness_alone") or {}
    if alone:
        table.add_row("harness alone: legal rate / verifier accuracy (held-out)", "", f"{alone.get('legal_rate')} / {alone.get('verifier_accuracy')}")
    console.print(table)
    s = report["search"]
    console.print(f"search: best h {s['best_h']:.3f} after {s['iterations']} iterations, {s['llm_calls']} LLM calls, "
                  f"{s['tokens']} tokens, {s['wall_s']} s ({s['stop_reason']}); run {report['run_id']}")
    adoption = report.get("adoption")
    if adoption:
        colour = {"adopted": "green", "rejected": "red"}.get(adoption["verdict"], "yellow")
        console.print(f"held-out check: [{colour}]{adoption['verdict']}[/{colour}] ({escape('; '.join(adoption['reasons']))})")


#: Proposers that write a harness without asking a model.
NO_MODEL_PROPOSERS = {"induced_rules": "rules fitted to the explored states, no model call",
                      "autofix": "a mechanical fix, no model call", "mutation": "a mechanical mutation, no model call",
                      "screened_mutation": "a mechanical mutation screened on the dense checks, no model call"}

#: The no-model proposers whose harness is a change of its parent's.
CHANGES = {"autofix", "mutation", "screened_mutation"}


def written_by(run: Any, report: dict) -> str:
    """Who wrote the kept harness, read from its candidate's record: the model (which proposer),
    the fitted rules, or the starting harness (nothing better was kept); a mechanical change says
    whose harness it changed (its nearest ancestor written otherwise)."""
    best = ((report.get("engine") or {}).get("best") or {}).get("id")
    if not best:
        return "a writer this run does not record (the dedicated search, removed, started it)"
    from ratchet.evolve.archive import Archive

    archive = Archive(run)
    candidate = archive.get(best)
    proposer = candidate.meta.get("proposer")
    if proposer is None:
        return "the starting harness (no proposal beat it)"
    if proposer not in NO_MODEL_PROPOSERS:
        repaired = (candidate.meta.get("proposal") or {}).get("repaired")
        if repaired:  # the model's sample, then single-point changes screened without a model call
            changes = "; ".join(repaired.get("changes") or ()) or "a mechanical fix"
            return (f"the model (proposer {proposer}), repaired without a model call "
                    f"({changes}; screen {repaired.get('before')} -> {repaired.get('after')})")
        return f"the model (proposer {proposer})"
    if proposer not in CHANGES:  # written anew, not a change of its parent
        return NO_MODEL_PROPOSERS[proposer]
    origin = candidate
    while origin.meta.get("proposer") in CHANGES and origin.parent_id:
        origin = archive.get(origin.parent_id)
    source = origin.meta.get("proposer")
    whose = ("the starting harness" if source is None or source in NO_MODEL_PROPOSERS
             else f"the model's harness (proposer {source})")
    return f"{NO_MODEL_PROPOSERS[proposer]}, of {whose}"


def phase_lines(run: Any, report: dict, export: Path | None = None) -> list[str]:
    """One line per phase of a finished run (explore, propose, evaluate, held-out check, export),
    each read from what the run recorded, so a reader sees who wrote the harness and what every
    phase cost in model calls."""
    config = run.config or {}
    calls = run.read_jsonl("llm_calls.jsonl")
    heldout_calls = sum(1 for c in calls if c.get("purpose") == "autoharness.heldout")
    s = report.get("search") or {}
    ideas = config.get("ideas") or {}
    fitted = "on" if ideas.get("induce", True) and config.get("method") != "faithful" else "off"
    lines = [(f"explore:  games on search seeds {config.get('search_seeds')} give the labelled states "
              f"(rules fitted to them: {fitted})")]
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e.get("kind") == "step"]
    if steps:
        kept = sum(1 for e in steps if e.get("status") == "accepted")
        lines.append(f"propose:  {len(steps)} steps, {kept} harnesses kept, {s.get('llm_calls', 0)} model calls")
    else:
        lines.append(f"propose:  {s.get('iterations', 0)} iterations, {s.get('llm_calls', 0)} model calls")
    lines.append(f"evaluate: best held-in h {float(s.get('best_h') or 0):.3f}, written by {written_by(run, report)}")
    alone, before, after = report.get("harness_alone") or {}, report.get("before") or {}, report.get("after") or {}
    if alone:
        check = (f"held-out: the harness alone legal {alone.get('legal_rate')} on {alone.get('steps')} steps, "
                 f"verifier accuracy {alone.get('verifier_accuracy')}")
        if after:
            check += (f"; the model's legal rate {before.get('legal_rate')} without it, {after.get('legal_rate')} with it "
                      f"({heldout_calls} model calls; {(report.get('adoption') or {}).get('verdict', 'no verdict')})")
        lines.append(check)
    else:
        lines.append("held-out: not run (no harness played a held-in game legally)")
    lines.append(f"export:   {'writing ' + str(export) if export else 'ratchet autoharness export ' + run.id + ' -o harness.py'}")
    return lines


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Let the model write its own harness for a TextArena game (AutoHarness).",
                        invoke_without_command=True, no_args_is_help=False)

    @group.callback()
    def autoharness(
        ctx: typer.Context,
        env: Optional[str] = typer.Option(None, help="TextArena environment id [default: TicTacToe-v0]."),
        mode: Optional[str] = typer.Option(None, help="verifier | filter | policy [default: verifier]"),
        method: Optional[str] = typer.Option(None, help="faithful (the paper's loop) | ratchet (plus small-model ideas) [default: ratchet]"),
        model: Optional[str] = typer.Option(None, help="Refiner (and player) model spec [default: local:qwen2.5-coder-0.5b]."),
        iterations: Optional[int] = typer.Option(None, help="Most refinement iterations."),
        max_calls: Optional[int] = typer.Option(None, help="Most refiner LLM calls."),
        config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML file of AutoHarnessConfig fields."),
        set_: list[str] = typer.Option([], "--set", help="Override a config field: --set eval_steps=50"),
        resume: Optional[str] = typer.Option(None, help="Resume the run RUN_ID after a kill or a stop."),
        suite: Optional[str] = typer.Option(None, help="Run every game of a suite (e.g. autoharness-145), resumable."),
        protocol: str = typer.Option("quick", help="full (the paper's sizes) | quick | demo (a few minutes) | none"),
        protocol_set: list[str] = typer.Option([], "--protocol-set", help="Override a ProtocolConfig field."),
        threads: Optional[int] = typer.Option(None, help="llama.cpp threads for local models."),
        export: Optional[Path] = typer.Option(None, "--export", "-o", help="Write the best harness to this file."),
        force: bool = typer.Option(False, "--force", help="Export even a harness the held-out check rejected."),
        store: Optional[Path] = StoreOption,
        root: Optional[Path] = RootAlias,
        on_engine: bool = typer.Option(True, "--engine/--search", hidden=True,
                                       help="Removed: the engine is the one search (--engine is accepted and does nothing; "
                                            "--search is refused)."),
        executor: Optional[str] = typer.Option(None, "--executor", help="With --suite: where games run, local | ray "
                                               "(default: local, one after another in this process)."),
        address: Optional[str] = typer.Option(None, "--address", help="Ray cluster to join: auto | ray://HOST:10001."),
        workers: Optional[int] = typer.Option(None, "--workers", help="With --suite: games in flight at once."),
        stop_after: Optional[float] = typer.Option(None, "--stop-after", help="With --suite, games run here: start no new game "
                                                   "after this many seconds; the same command later carries on."),
        executor_set: list[str] = typer.Option([], "--executor-set", help="Override an ExecutorConfig field: "
                                               "--executor-set max_retries=5"),
    ) -> None:
        if ctx.invoked_subcommand is not None:
            return
        if not on_engine:
            console.print("[red]error:[/red] --search: the dedicated search was removed; the engine is the one search "
                          "(run the same command without --search)")
            raise typer.Exit(2)
        from ratchet.autoharness.config import AutoHarnessConfig
        from ratchet.config import load_config
        from ratchet.store import RunStore

        given = {"env": env, "mode": mode, "method": method, "model": model}
        overrides = [f"{k}={v}" for k, v in given.items() if v is not None] + list(set_)
        if iterations is not None:
            overrides.append(f"iterations={iterations}")
        if max_calls is not None:
            overrides.append(f"budget.max_calls={max_calls}")
        cfg = load_config(AutoHarnessConfig, config, overrides)
        run_store = RunStore(store_root(store, root, "--root"))
        proto = protocol_config(protocol, protocol_set)
        if suite:
            from ratchet.autoharness.batch import run_suite
            from ratchet.autoharness.report import failed_games
            from ratchet.executors import ExecutorConfig, build_executor

            flags = {"kind": executor, "address": address, "workers": workers}
            ex_cfg = load_config(ExecutorConfig, None, [f"{k}={v}" for k, v in flags.items() if v is not None] + executor_set)
            pool = build_executor(ex_cfg)
            before = set(run_store.run_ids())
            try:
                state = run_suite(suite, cfg, run_store, proto, threads=threads, resume=resume, console=console, executor=pool,
                                  stop_after_s=stop_after)
            except BaseException as exc:
                _mark_failed(run_store, set(run_store.run_ids()) - before, exc)
                raise
            finally:
                pool.close()
            if pool.stats.lost:
                console.print(f"workers lost: {pool.stats.lost} game attempts died with their worker, "
                              f"{pool.stats.retried} were run again (each game is counted once)")
            failed = failed_games(state["reports"])
            console.print(f"{len(state['reports'])} games done" + (f", {len(failed)} without a result:" if failed else ""))
            for env_id, reason in failed.items():
                console.print(f"  {env_id}: {reason}", markup=False)
            return
        from ratchet import api

        with _reporter(cfg) as phase:
            result = api.synthesize_harness(config=cfg, protocol=protocol, protocol_overrides=protocol_set,
                                            store=run_store.root, resume=resume, threads=threads, on_phase=phase)
        report = result.report
        _show(report)
        run = run_store.open_run(result.run_id)
        for line in phase_lines(run, report, export):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if export:
            _export(run_store, result.run_id, export, force)

    @group.command("export")
    def export_cmd(
        run_id: str = typer.Argument(..., help="The AutoHarness run to export from."),
        output: Path = typer.Option(..., "-o", "--output", help="Path of the .py file to write."),
        force: bool = typer.Option(False, "--force", help="Export even a harness the held-out check rejected (it did worse "
                                                          "than the model alone on held-out seeds)."),
        store: Optional[Path] = StoreOption,
        root: Optional[Path] = RootAlias,
    ) -> None:
        """Write the run's best harness as a standalone Python file (load it with load_harness).

        A harness whose held-out check showed a loss (the model did worse with it than without it)
        is refused unless --force is given."""
        from ratchet.store import RunStore

        _export(RunStore(store_root(store, root, "--root")), run_id, output, force)

    @group.command("show")
    def show_cmd(run_id: str = typer.Argument(...), store: Optional[Path] = StoreOption,
                 root: Optional[Path] = RootAlias) -> None:
        """Print a run's per-game report."""
        from ratchet.store import RunStore

        report = RunStore(store_root(store, root, "--root")).open_run(run_id).read_json("report.json")
        if not report:
            raise RatchetError(f"run {run_id} has no report yet", hint=f"resume it: ratchet autoharness --resume {run_id}")
        console.print_json(json.dumps(report))

    @group.command("learn", help=LEARN_HELP)
    def learn_cmd(
        train_suite: Optional[str] = typer.Option(None, "--train-suite", help="Training games: game ids, suites or "
                                                  "SUITE/FAMILY, comma-separated (e.g. autoharness-40/puzzle)."),
        heldout_suite: Optional[str] = typer.Option(None, "--heldout-suite", help="Held-out games, written the same way; "
                                                    "no family may be on both sides."),
        model: Optional[str] = typer.Option(None, help="Base model, local:NAME [default: local:qwen2.5-coder-0.5b]."),
        rounds: Optional[int] = typer.Option(None, help="Rounds of search, training and games gate [default: 2]."),
        train_seeds: Optional[int] = typer.Option(None, "--train-seeds", help="Searches per training game per round [default: 2]."),
        heldout_seeds: Optional[str] = typer.Option(None, "--heldout-seeds", help="Held-out search seeds, comma-separated "
                                                    "[default: 0,1,2]."),
        max_calls: Optional[int] = typer.Option(None, "--max-calls", help="Most refiner calls per search [default: 12]."),
        config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML file of CurriculumConfig fields."),
        set_: list[str] = typer.Option([], "--set", help="Override a config field: --set search.eval_steps=20"),
        resume: Optional[str] = typer.Option(None, help="Resume the curriculum run RUN_ID (--rounds may raise its rounds)."),
        show: Optional[str] = typer.Option(None, "--show", help="Print the report of the curriculum run RUN_ID and exit."),
        as_json: bool = typer.Option(False, "--json", help="With --show: the report as JSON."),
        threads: Optional[int] = typer.Option(None, help="llama.cpp threads of the searches' model."),
        store: Optional[Path] = StoreOption,
        root: Optional[Path] = RootAlias,
    ) -> None:
        from ratchet.store import RunStore

        run_store = RunStore(store_root(store, root, "--root"))
        if show:
            from ratchet.curriculum.report import JSON_NAME, MD_NAME

            run = run_store.open_run(show)
            if not run.path(JSON_NAME).is_file():
                raise RatchetError(f"run {run.id} has no curriculum report ({JSON_NAME})",
                                   hint="name a run `ratchet autoharness learn` made (see `ratchet runs list`)")
            if as_json:
                console.print_json(json.dumps(run.read_json(JSON_NAME)))
            else:
                console.print(run.path(MD_NAME).read_text(), markup=False, highlight=False, soft_wrap=True)
            return
        from ratchet.config import load_config
        from ratchet.curriculum import CurriculumConfig
        from ratchet.curriculum.loop import learn

        given = {"train_suite": train_suite, "heldout_suite": heldout_suite, "model": model, "rounds": rounds,
                 "train_seeds": train_seeds, "threads": threads, "search.budget.max_calls": max_calls,
                 "heldout_seeds": f"[{heldout_seeds}]" if heldout_seeds else None}
        overrides = [f"{k}={v}" for k, v in given.items() if v is not None] + list(set_)
        changed = [k for k, v in given.items() if v is not None and k != "rounds"] + list(set_) + ([str(config)] if config else [])
        if resume and changed:
            raise RatchetError(f"--resume keeps the config the curriculum started with; given: {', '.join(changed)}",
                               hint=f"ratchet autoharness learn --resume {resume} [--rounds N] (a new curriculum for new settings)")
        cfg = None
        if not resume or overrides:
            cfg = load_config(CurriculumConfig, config, overrides)
            if not resume and not (cfg.train_suite and cfg.heldout_suite):
                raise RatchetError("a curriculum needs training and held-out games",
                                   hint="ratchet autoharness learn --train-suite TicTacToe-v0 --heldout-suite GuessTheNumber-v0")
        run, report = learn(cfg, run_store, resume=resume,
                            say=lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True))
        from ratchet.curriculum.report import markdown

        console.print(markdown(report), markup=False, highlight=False, soft_wrap=True)
        console.print(f"report: {run.path('learn.md')}; again: ratchet autoharness learn --show {run.id}")

    app.add_typer(group, name="autoharness")


LEARN_HELP = """A curriculum across game families: the model learns from its own harness searches.

Per round: AutoHarness searches on the training games with the current weight version (the rules fitted without a model off: the model's own code), their samples fed as judged turns to the online trainer (as `ratchet serve feed` feeds them), one update published as a new version, then the games gate: the new version's searches on the held-out games (the same search seeds) against the version it would replace (solve rate h = 1.0, mean best h, calls to solve); promoted only if better, refused ones kept and reported. No game family may be both trained on and held out.

Resumable (--resume RUN_ID: every search, sample, version and held-out result is in the store). The report, per version: learn.json and learn.md in the run (--show RUN_ID). Its versions load as local:NAME@vN with RATCHET_VERSIONS=<run>/online/versions.

\b
  ratchet autoharness learn --train-suite autoharness-40/puzzle --heldout-suite autoharness-40/line --rounds 2
  ratchet autoharness learn --resume RUN_ID
  ratchet autoharness learn --show RUN_ID
"""


def _mark_failed(store: Any, made: set[str], exc: BaseException) -> None:
    """The runs this command made that still read 'running' (the suite's batch run, a game's run)
    marked failed with the error: the suite makes its runs itself, out of this command's reach."""
    for run_id in sorted(made):
        store.open_run(run_id).record_failure(exc)


def _export(store, run_id: str, output: Path, force: bool = False) -> None:
    from ratchet.autoharness.config import AutoHarnessConfig
    from ratchet.autoharness.export import export_harness
    from ratchet.autoharness.pipeline import best_code

    run = store.open_run(run_id)
    code, provenance = best_code(run)
    gate = AutoHarnessConfig.model_validate((run.read_json("run.json") or {}).get("config") or {}).adoption.gate
    if provenance["adoption"] == "rejected" and gate and not force:
        reasons = ((run.read_json("report.json") or {}).get("adoption") or {}).get("reasons") or []
        raise RatchetError(
            f"run {run_id}: the held-out check rejected this harness ({'; '.join(reasons) or 'a loss with the harness'})",
            hint=f"run a longer search (ratchet autoharness --env {provenance['env']} --max-calls N), or export this one "
                 "anyway with --force",
        )
    path = export_harness(code, output, provenance)
    console.print(f"wrote {path} (h = {provenance['score']:.3f}); load it with "
                  f"[bold]from ratchet.autoharness.export import load_harness[/bold]")
