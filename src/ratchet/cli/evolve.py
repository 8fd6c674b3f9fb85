"""``ratchet evolve``: improve a harness workspace with the engine, only on honest evidence.

    ratchet evolve init DIR --suite tasks.jsonl      # a starter workspace for your own suite
    ratchet evolve run.yaml                          # start (``run`` may be left out)
    ratchet evolve run.yaml --set iterations=20 --set budget.max_calls=200
    ratchet evolve resume RUN_ID                     # after a kill, a budget stop, an approval
    ratchet evolve run.yaml --executor ray --address auto   # evaluations as Ray tasks on a cluster
    ratchet evolve status RUN_ID
    ratchet evolve diff RUN_ID CAND                  # a candidate against its parent
    ratchet evolve approve RUN_ID CAND               # release a candidate held for approval
    ratchet evolve reject RUN_ID CAND --reason TEXT  # turn it down instead
    ratchet evolve export RUN_ID DIR                 # a git repository, one commit per accepted candidate
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table
from typer.core import TyperGroup

from ratchet.api import EVOLVE_KIND
from ratchet.cli.options import RootAlias, StoreOption, store_root
from ratchet.config import load_config
from ratchet.contracts import RatchetError
from ratchet.evolve.approval import Verdict, approve, reject
from ratchet.evolve.archive import Archive
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.export import export_run
from ratchet.evolve.loop import EVENTS, stored_totals
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.preflight import CONFIG_COPY, load_evolve_config
from ratchet.store import RunStore
from ratchet.store.files import write_bytes_atomic

console = Console()
KIND = EVOLVE_KIND

HELP = """Evolve a harness workspace: select a parent, propose a change, check it, evaluate it, keep it
only if it beats the parent beyond noise on held-in tasks.

\b
Examples:
  ratchet evolve init my-harness --suite tasks.jsonl
  ratchet evolve examples/humaneval-coder/evolve.yaml
  ratchet evolve run.yaml --set iterations=20 --set budget.max_calls=200
  ratchet evolve resume RUN_ID
  ratchet evolve run.yaml --executor ray --address auto
  ratchet evolve status RUN_ID
  ratchet evolve diff RUN_ID CAND
  ratchet evolve approve RUN_ID CAND
  ratchet evolve reject RUN_ID CAND --reason "too clever by half"
  ratchet evolve export RUN_ID ./evolved-harness
"""

SetOption = typer.Option([], "--set", help="Override a config field: --set iterations=20 --set gate.options.alpha=0.01")
ThreadsOption = typer.Option(None, help="llama.cpp threads for a local model.")
ExecutorOption = typer.Option(None, "--executor", help="Where task evaluations run: local | ray (default: local, in this process).")
AddressOption = typer.Option(None, "--address", help="Ray cluster to join: auto | ray://HOST:10001 (with --executor ray).")
WorkersOption = typer.Option(None, "--workers", help="Evaluations in flight at once (local processes or Ray tasks).")


def executor_overrides(executor: str | None, address: str | None, workers: int | None) -> list[str]:
    """The executor flags as --set overrides (the flags win over the YAML file)."""
    given = {"executor.kind": executor, "executor.address": address, "executor.workers": workers}
    return [f"{key}={value}" for key, value in given.items() if value is not None]


class DefaultRunGroup(TyperGroup):
    """``ratchet evolve CONFIG.yaml`` means ``ratchet evolve run CONFIG.yaml``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


evolve_app = typer.Typer(cls=DefaultRunGroup, help=HELP, no_args_is_help=True, rich_markup_mode="rich")


def _model(spec: str | None, threads: int | None):
    if spec is None:
        return None
    from ratchet.models import load_model  # loads backends (llama.cpp) only when a model is named

    return load_model(spec, threads=threads)


@contextmanager
def _events(config: EvolveConfig) -> Iterator[Callable[[dict[str, Any]], None]]:
    """The engine's events shown: a progress bar on a terminal; otherwise a line per step and one
    per task evaluation run. A warning is printed either way."""
    def warn(event: dict[str, Any]) -> None:
        console.print(f"[yellow]warning:[/] {escape(str(event['message']))}", soft_wrap=True)

    if not console.is_terminal:
        def line(event: dict[str, Any]) -> None:
            if event["kind"] == "warning":
                warn(event)
            elif event["kind"] == "step":
                console.print(f"step {event['step'] + 1}/{config.iterations} {event['status']:<9} "
                              f"{event.get('child', '-')} <- {event['parent']} [{event.get('proposer')}] "
                              f"best {event.get('best', 0):.3f}: {event.get('reason', '')}", soft_wrap=True, markup=False)
            elif event["kind"] == "evaluated":
                console.print(f"  evaluated {event['candidate'][:12]} on {event['task']} (seed {event['seed']}): "
                              f"score {event['score']:g} [{event['run']} run by this process]", soft_wrap=True, markup=False)
            else:
                console.print(f"{event['kind']}: " + ", ".join(f"{k}={v}" for k, v in event.items() if k not in ("kind", "at")),
                              soft_wrap=True, markup=False)

        yield line
        return
    with Progress(TextColumn("[bold]evolve"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("evolve", total=config.iterations, info="evaluating the original")

        def update(event: dict[str, Any]) -> None:
            if event["kind"] == "warning":
                warn(event)
            elif event["kind"] == "step":
                bar.update(task, completed=event["step"] + 1,
                           info=f"{event['status']} · best held-in {event.get('best', 0):.3f}")
            elif event["kind"] == "evaluated":
                bar.update(task, info=f"evaluating {event['candidate'][:12]}: {event['task']} {event['score']:g} "
                                      f"({event['run']} task evaluations run)")

        yield update


def _show_summary(run_id: str, summary: dict[str, Any]) -> None:
    state = summary.get("state")
    console.print(f"run {run_id}: {state}; {summary.get('accepted', 0)} accepted, {summary.get('rejected', 0)} rejected, "
                  f"{summary.get('task_evals', 0)} task evaluations, {summary.get('model_calls', 0)} model calls")
    if summary.get("lost_attempts"):
        console.print(f"workers lost: {summary['lost_attempts']} evaluation attempts died with their worker, "
                      f"{summary.get('retried', 0)} were run again (their results are counted once)")
    report = summary.get("report")
    if report:
        o, b, n = report["original"], report["best"], report["original_best_of_n"]
        # greedy attempts that could not sample are one run N times: say how many were distinct
        distinct = n.get("distinct_attempts")
        shown = f"{n['attempts']}" + (f" ({distinct} distinct)" if distinct is not None and n["attempts"] > 1 else "")
        console.print(f"{report['split']} split ({report['tasks']} tasks): original {o['mean']:.3f} [{o['low']:.3f}, {o['high']:.3f}]"
                      f" · best {b['mean']:.3f} [{b['low']:.3f}, {b['high']:.3f}] ({b['id']})"
                      f" · original best-of-{shown} {n['mean']:.3f} [{n['low']:.3f}, {n['high']:.3f}]")
        if not report["split_untouched"]:
            console.print("note: no test split is configured, so this is the held-out split the gate's regression "
                          "bound saw; set splits.test for an untouched one")
        stage = report.get("suite_report")
        if stage:  # the suite's own report stage (evolve/report.py: ReportingSuite)
            console.print(f"{stage['name']}: {stage['summary']}", markup=False, soft_wrap=True)
    if state == "waiting":
        for cand in summary.get("waiting_for", []):
            console.print(f"waiting for approval: {cand}; see it with `ratchet evolve diff {run_id} {cand}`, "
                          f"release it with `ratchet evolve approve {run_id} {cand}`, then `ratchet evolve resume {run_id}`")


@evolve_app.command("run")
def run_cmd(
    config: Path = typer.Argument(..., help="YAML file of EvolveConfig fields (fields: `ratchet config show ratchet.evolve.config:EvolveConfig`)."),
    set_: list[str] = SetOption,
    store: Optional[Path] = StoreOption,
    root: Optional[Path] = RootAlias,
    threads: Optional[int] = ThreadsOption,
    executor: Optional[str] = ExecutorOption,
    address: Optional[str] = AddressOption,
    workers: Optional[int] = WorkersOption,
) -> None:
    """Start an improvement run from CONFIG (a YAML file)."""
    from ratchet import api

    cfg = load_evolve_config(config, [*set_, *executor_overrides(executor, address, workers)])
    load_manifest(cfg.workspace)  # a workspace without a manifest is refused before a model loads
    model = _model(cfg.model, threads)  # a bad model spec fails before a run is made for it
    proposer_model = _model(cfg.proposer_model, threads)

    def started(run: Any) -> None:
        console.print(f"run {run.id} ({run.name}): {cfg.iterations} steps; store {run.dir}", soft_wrap=True)

    with _events(cfg) as on_event:
        result = api.evolve(cfg, store=store_root(store, root, "--root"), model=model, proposer_model=proposer_model,
                            on_event=on_event, on_start=started)
    _show_summary(result.run_id, result.summary)


def _open(root: Path | None, run_id: str) -> Any:
    """The evolve run ``run_id``; another kind of run is refused by name (read as an archive it
    would show an empty table, and `resume` would write an evolve config into it)."""
    given = Path(run_id)
    if root is None and len(given.parts) > 1 and (given / "run.json").is_file():
        root, run_id = given.parent, given.name  # the run's directory, as `ratchet evolve` prints it
    run = RunStore(root).open_run(run_id)
    if run.kind != KIND and not run.path(EVENTS).is_file():
        raise RatchetError(f"run {run.id} is not an evolve run (its kind is {run.kind})",
                           hint="list the evolve runs with: ratchet runs list --kind evolve")
    return run


def _candidate(run: Any, given: str) -> str:
    """The full id of the candidate ``given`` names, or of the one candidate whose id starts with it
    (as run ids do); a prefix of several is refused with them."""
    ids = [c["id"] for c in run.candidates()]
    if given in ids:
        return given
    matches = [i for i in ids if given and i.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise RatchetError(f"{given!r} starts {len(matches)} candidates of run {run.id}: {', '.join(matches[:5])}",
                           hint="give more of the id")
    return given  # unknown: the command says so in its own words


@evolve_app.command("init")
def init_cmd(
    directory: Path = typer.Argument(..., help="Where the workspace goes (made if missing; nothing in it is overwritten)."),
    suite: Optional[Path] = typer.Option(None, "--suite", help="Your JSONL suite, one task per line (default: three "
                                         "sample tasks in DIR/tasks.jsonl)."),
    model: str = typer.Option("local:qwen2.5-coder-0.5b", "--model", help="The model spec the run uses."),
) -> None:
    """Write a starter workspace for a JSONL suite: evolve.yaml, manifest.yaml, workflow.py and
    prompts/system.md (docs/first-run.md explains each)."""
    from ratchet.cli.evolve_init import write_starter

    written = write_starter(directory, suite, model)
    for path in written:
        console.print(f"wrote {path}", markup=False, soft_wrap=True)
    shown = Path(os.path.relpath(written[0]))
    console.print(f"start it with: ratchet evolve {written[0] if shown.parts[:1] == ('..',) else shown}",
                  markup=False, soft_wrap=True)


@evolve_app.command("resume")
def resume_cmd(
    run_id: str = typer.Argument(..., help="The run to continue."),
    set_: list[str] = SetOption,
    store: Optional[Path] = StoreOption,
    root: Optional[Path] = RootAlias,
    threads: Optional[int] = ThreadsOption,
    executor: Optional[str] = ExecutorOption,
    address: Optional[str] = AddressOption,
    workers: Optional[int] = WorkersOption,
) -> None:
    """Continue a run after a kill, a budget stop or an approval; nothing finished is paid again.

    Overrides may raise limits (--set budget.max_calls=400 --set iterations=30) or move the run
    elsewhere (--executor ray --address auto)."""
    from ratchet import api

    run = _open(store_root(store, root, "--root"), run_id)
    overrides = [*set_, *executor_overrides(executor, address, workers)]
    if not run.path(CONFIG_COPY).is_file():
        # Killed between run.json and the config copy: run.json holds the same config, so the run
        # starts from it rather than being refused.
        write_bytes_atomic(run.path(CONFIG_COPY), yaml.safe_dump(run.config, sort_keys=False).encode())
    # Read here to load its models the way `run` does; the resume writes the run's copy itself.
    cfg = load_config(EvolveConfig, run.path(CONFIG_COPY), overrides)
    model = _model(cfg.model, threads)
    proposer_model = _model(cfg.proposer_model, threads)

    def started(run: Any) -> None:
        done = stored_totals(run)
        console.print(f"run {run.id} resumed: {cfg.iterations} steps in all; {done['accepted'] + done['rejected']} "
                      f"candidates decided and {done['task_evals']} task evaluations kept; store {run.dir}", soft_wrap=True)

    with _events(cfg) as on_event:
        result = api.resume_evolve(run.id, overrides=overrides, store=run.root, model=model, proposer_model=proposer_model,
                                   on_event=on_event, on_start=started)
    _show_summary(result.run_id, result.summary)


@evolve_app.command("status")
def status_cmd(run_id: str = typer.Argument(...), store: Optional[Path] = StoreOption,
               root: Optional[Path] = RootAlias) -> None:
    """The run's state, its candidates (lineage, status, held-in score, the gate's reason), its report."""
    run = _open(store_root(store, root, "--root"), run_id)
    status = run.status()
    archive = Archive(run)
    summary = dict(status.get("summary") or {})
    if status["status"] == "running" or not summary.get("state"):
        # Going (or killed): the summary is written when a run stops, and a resumed run still
        # holds the one of its last stop, so the counts are read from the store as they stand.
        summary = {"state": status["status"], **stored_totals(run)}
    state = summary["state"]
    table = Table(title=f"{run.id}: {status['status']}" + (f" ({state})" if state != status["status"] else ""))
    for column in ("candidate", "parent", "status", "proposer", "held-in"):
        table.add_column(column, no_wrap=True)  # ids are what a person copies into `diff` and `approve`
    table.add_column("reason", overflow="fold")
    for c in archive.candidates():
        decision = archive.decision(c.id)
        score = archive.score(c.id, "heldin")
        table.add_row(c.id, c.parent_id or "-", archive.status(c.id) or "", str(c.meta.get("proposer", "original")),
                      "" if score is None else f"{score:.3f}", escape(decision.reason[:90]) if decision else "")
    console.print(table)
    failed = archive.unusable()
    if failed:  # steps that made no candidate: their calls were spent, so they are shown too
        steps = Table(title="failed proposals (no candidate made)")
        for column in ("step", "parent", "proposer", "calls"):
            steps.add_column(column, no_wrap=True)
        steps.add_column("reason", overflow="fold")
        for f in failed[::-1]:  # steps are stored from 0 and shown from 1, as the progress lines show them
            steps.add_row(str(f["step"] + 1), f["parent"], f["proposer"], str(f.get("model_calls", "")), escape(f["reason"][:300]))
        console.print(steps)
    report = run.read_json("evolve/report.json")
    if report:
        summary["report"] = report
    _show_summary(run.id, summary)


@evolve_app.command("diff")
def diff_cmd(run_id: str = typer.Argument(...), candidate: str = typer.Argument(..., help="Candidate id (or a unique start of it)."),
             store: Optional[Path] = StoreOption, root: Optional[Path] = RootAlias) -> None:
    """Show a candidate against its parent (a unified diff of every changed file) and its decision."""
    run = _open(store_root(store, root, "--root"), run_id)
    archive = Archive(run)
    candidate = _candidate(run, candidate)
    child = archive.get(candidate)
    console.print(f"{candidate} <- {child.parent_id or '(original)'}: {archive.status(candidate)}", markup=False)
    decision = archive.decision(candidate)
    if decision:
        console.print(f"gate: {decision.reason}\n{json.dumps(decision.numbers, sort_keys=True)}", soft_wrap=True, markup=False)
    text = archive.diff(candidate) or "(no change)\n"
    if console.is_terminal:
        console.print(Syntax(text, "diff", theme="ansi_dark", word_wrap=True))
    else:  # piped: the diff as it is, every line whole (rich would crop code lines at 80 columns)
        sys.stdout.write(text)


@evolve_app.command("approve")
def approve_cmd(run_id: str = typer.Argument(...), candidate: str = typer.Argument(..., help="Candidate id (or a unique start of it)."),
                store: Optional[Path] = StoreOption,
                root: Optional[Path] = RootAlias) -> None:
    """Release a candidate the gate accepted and the run holds for approval."""
    run = _open(store_root(store, root, "--root"), run_id)
    _said(approve(run, _candidate(run, candidate)), run_id)


@evolve_app.command("reject")
def reject_cmd(run_id: str = typer.Argument(...), candidate: str = typer.Argument(..., help="Candidate id (or a unique start of it)."),
               reason: str = typer.Option("", help="Why: kept in its decision and shown to later proposals."),
               store: Optional[Path] = StoreOption,
               root: Optional[Path] = RootAlias) -> None:
    """Turn down a candidate the gate accepted and the run holds for approval."""
    run = _open(store_root(store, root, "--root"), run_id)
    _said(reject(run, _candidate(run, candidate), reason), run_id)


def _said(verdict: Verdict, run_id: str) -> None:
    console.print(f"{verdict.verdict} {verdict.candidate}" + ("; the running loop picks it up" if verdict.run_running
                  else f"; continue the run with `ratchet evolve resume {run_id}`"))


@evolve_app.command("export")
def export_cmd(run_id: str = typer.Argument(...), dest: Path = typer.Argument(..., help="A new directory."),
               store: Optional[Path] = StoreOption,
               root: Optional[Path] = RootAlias) -> None:
    """Write the run as a git repository: one commit per accepted candidate, main at the best."""
    run = _open(store_root(store, root, "--root"), run_id)
    out = export_run(run, dest)
    console.print(f"wrote {out['commits']} commits to {out['path']}; main is {out['best']} ({out['head'][:10]})")


def register(app: typer.Typer) -> None:
    app.add_typer(evolve_app, name="evolve")
