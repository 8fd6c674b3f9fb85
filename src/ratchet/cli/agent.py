"""``ratchet agent``: run the coding agent on a task suite, on one repository, or set up a workspace."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ratchet.cli.options import RootAlias, StoreOption, store_root
from ratchet.config import parse_override
from ratchet.contracts import RatchetError
from ratchet.models.spec import load_model
from ratchet.runtime import HarnessWorkspace, replay_model, solve
from ratchet.runtime.suite import load_suite, run_suite, verify
from ratchet.store import RunStore, StoreConfig

console = Console()
agent_app = typer.Typer(help="The coding agent: run it on a suite or a repository; make a workspace.",
                        no_args_is_help=True)

WorkspaceOption = typer.Option(None, "--workspace", "-w", help="Harness workspace directory (default: the shipped one).")
SetOption = typer.Option([], "--set", help="Override a settings.yaml key, e.g. --set step_limit=10 (repeatable).")
ModelSetOption = typer.Option([], "--model-set", help="Backend setting, e.g. --model-set n_threads=2 (repeatable).")


def _model_options(pairs: list[str]) -> dict:
    return {".".join(keys): value for keys, value in map(parse_override, pairs)}


def _selection(suite: str, task: list[str], limit: int) -> list:
    """The suite's tasks that --task and --limit pick, in the suite's order."""
    tasks = load_suite(suite)
    if task:
        unknown = sorted(set(task) - {t.id for t in tasks})
        if unknown:
            raise RatchetError(f"unknown task id(s) {', '.join(unknown)}", hint="`ratchet agent verify` lists them")
        tasks = [t for t in tasks if t.id in task]
    return tasks[:limit] if limit else tasks


@agent_app.command("run")
def run_command(
    model: str | None = typer.Option(None, "--model", "-m", help="Model spec, e.g. local:qwen2.5-coder-0.5b "
                                     "(required; a resumed run keeps its own)."),
    suite: str | None = typer.Option(None, "--suite", help="Suite name or directory (default: coding-basics)."),
    task: list[str] = typer.Option([], "--task", help="Only these task ids (repeatable)."),
    limit: int = typer.Option(0, "--limit", help="Only the first N tasks (0: all)."),
    workspace: Path | None = WorkspaceOption,
    overrides: list[str] = SetOption,
    model_set: list[str] = ModelSetOption,
    resume: str | None = typer.Option(None, "--resume", help="Continue this run id with the tasks, workspace, "
                                      "settings and model it started with: finished tasks are skipped."),
    store_dir: Path | None = StoreOption,
    root: Path | None = RootAlias,
) -> None:
    """Run the agent on every task of a suite and report the solve rate, judged by the tests."""
    if limit < 0:
        raise RatchetError(f"--limit {limit}: the number of tasks cannot be negative", hint="give 0 for all tasks or N > 0")
    root = store_root(store_dir, root, "--root")
    store = RunStore(root if root is not None else StoreConfig().root)
    run = None
    if resume:
        run = store.open_run(resume)
        if run.kind != "agent":
            raise RatchetError(f"run {run.id} is not a run of `ratchet agent run` (its kind is {run.kind})",
                               hint="list the agent runs with: ratchet runs list")
        recorded = run.config
        # A resumed run's solve rate is over the tasks it started with, under one harness, its
        # settings and one model: a flag that would change them mid-run is refused, not half applied
        # (the same flags given again, as a repeated command line does, are fine).
        changed = []
        if (suite is not None or task or limit) and [t.id for t in _selection(suite or "coding-basics", task, limit)] \
                != recorded["tasks"]:
            changed.append("--suite/--task/--limit (the tasks)")
        if workspace is not None and str(HarnessWorkspace(workspace).path) != recorded["workspace"]:
            changed.append("--workspace")
        if overrides and list(overrides) != list(recorded.get("overrides") or []):
            changed.append("--set")
        if model is not None and model != recorded["model"]:
            changed.append(f"--model (it ran {recorded['model']!r})")
        if changed:
            raise RatchetError(f"run {run.id} keeps the tasks, workspace, settings and model it started with; "
                               f"{', '.join(changed)} would change them",
                               hint=f"resume with `ratchet agent run --resume {run.id}` alone (--model-set and --store "
                                    f"may be given), or start a new run with those flags")
        suite, model, workspace = recorded["suite"], recorded["model"], Path(recorded["workspace"])
        overrides = list(recorded.get("overrides") or [])
        by_id = {t.id: t for t in load_suite(suite)}
        tasks = [by_id[i] for i in recorded["tasks"]]
        options = {**(recorded.get("model_options") or {}), **_model_options(model_set)}
    else:
        if model is None:
            raise RatchetError("--model is required to start a run", hint="e.g. --model local:qwen2.5-coder-0.5b "
                               "(see `ratchet models list`), or --resume RUN_ID to continue one")
        suite = suite or "coding-basics"
        tasks = _selection(suite, task, limit)
        options = _model_options(model_set)
    ws = HarnessWorkspace(workspace)
    ws.settings(tuple(overrides))  # a bad override fails here, before any model loads
    loaded = load_model(model, **options)  # a bad spec fails before a run is made for it
    if run is None:
        config = {"model": model, "suite": suite, "tasks": [t.id for t in tasks], "workspace": str(ws.path),
                  "overrides": list(overrides), "model_options": options}
        run = store.create_run("agent", config)
    else:
        run.set_status("running")  # resumed: running again, so a failure now is recorded as one
    console.print(f"run {run.id}: {len(tasks)} tasks, model {model}, workspace {ws.path}")
    lines = sys.stdout.isatty()
    # Ctrl-C marks the run stopped, an error marks it failed with why; either way it resumes.
    with run.marks_failure():
        summary = run_suite(tasks, loaded, run.dir, workspace=ws, model_spec=model,
                            overrides=tuple(overrides), on_model_call=run.record_llm_call,
                            progress=(lambda line: console.print(line)) if lines else (lambda line: print(line, flush=True)))
    run.write_json("summary.json", summary)
    run.set_status("done", {k: summary[k] for k in ("tasks", "solved", "solve_rate", "tokens")})
    console.print(f"solved {summary['solved']}/{summary['tasks']} (solve rate {summary['solve_rate']:.3f}); "
                  f"{summary['tokens']} tokens, {summary['agent_s']:.0f} s of agent time; run {run.id}")


@agent_app.command("solve")
def solve_command(
    statement: str = typer.Argument(..., help="What to do, in one line."),
    workdir: Path = typer.Option(Path("."), "--workdir", "-C", help="Repository to work in."),
    model: str = typer.Option(..., "--model", "-m", help="Model spec."),
    workspace: Path | None = WorkspaceOption,
    overrides: list[str] = SetOption,
    model_set: list[str] = ModelSetOption,
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Where the trace goes (default: next to the workdir)."),
) -> None:
    """Run the agent once in a repository; prints how it ended and where the trace is."""
    ws = HarnessWorkspace(workspace)
    result = solve(workdir, statement, load_model(model, **_model_options(model_set)), workspace=ws.path,
                   run_dir=run_dir, config=ws.settings(tuple(overrides)), model_spec=model)
    console.print(f"{result.exit_status} after {result.steps} steps: {result.submission}\ntrace: {result.trace_path}")


@agent_app.command("replay")
def replay_command(
    trace: Path = typer.Argument(..., help="A trace.jsonl written by an earlier text-protocol run."),
    statement: str = typer.Option(..., "--statement", help="The task statement of that run."),
    workdir: Path = typer.Option(..., "--workdir", "-C", help="A fresh copy of the repository it started from."),
    workspace: Path | None = WorkspaceOption,
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Where the new trace goes."),
) -> None:
    """Run again with the recorded replies as the model: the same tool calls on the same files."""
    result = solve(workdir, statement, replay_model(trace), workspace=workspace, run_dir=run_dir)
    console.print(f"{result.exit_status} after {result.steps} steps; trace: {result.trace_path}")


@agent_app.command("init")
def init_command(dest: Path = typer.Argument(..., help="New directory for the workspace.")) -> None:
    """Copy the default harness workspace (prompt, tools, hooks, policies, skills) to DEST to edit."""
    ws = HarnessWorkspace.init(dest)
    console.print(f"harness workspace at {ws.path}: " + ", ".join(sorted(ws.files())))


@agent_app.command("verify")
def verify_command(suite: str = typer.Option("coding-basics", "--suite", help="Suite name or directory.")) -> None:
    """Check every task's grader: its tests fail on the repository and pass with the reference fix."""
    table = Table(title=f"suite {suite}")
    for col in ("task", "before fix", "after fix", "statement"):
        table.add_column(col)
    bad = 0
    for t in load_suite(suite):
        before, after = verify(t)
        ok = before.score == 0.0 and after.score == 1.0
        bad += not ok
        table.add_row(t.id, "fails" if before.score == 0 else "[red]passes[/]",
                      "passes" if after.score == 1 else "[red]fails[/]", t.statement)
    console.print(table)
    if bad:
        raise RatchetError(f"{bad} task(s) of {suite} have a broken grader", hint="see the table above")


def register(app: typer.Typer) -> None:
    app.add_typer(agent_app, name="agent")
