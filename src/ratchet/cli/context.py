"""``ratchet context``: learn a playbook of lessons from stored runs, and look at one."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ratchet.cli.options import StoreOption
from ratchet.contracts import RatchetError

console = Console()

HELP = """Evolving context: a playbook of short lessons (ACE) learned from what agents did.

\b
A playbook is a Markdown file of items, one a line:
  - \\[ctx-00001] (+3/-0) Return only the function, without test code after it.

A reflector model reads each stored attempt and names a lesson; a curator model turns it into operations (ADD, UPDATE, MERGE, DELETE; helpful/harmful tags) that code applies, never a rewrite of the file. Near-duplicates are folded by meaning (all-MiniLM-L6-v2), items that hurt are pruned, and every version is kept in the run store. See docs/context.md.

\b
  ratchet context learn --from RUN --playbook ws/playbook.md --model local:qwen2.5-coder-0.5b
  ratchet context show ws/playbook.md --task "Reverse a list" --budget 200
  ratchet context history CONTEXT_RUN --diff 1 5
"""

context_app = typer.Typer(help=HELP, no_args_is_help=True, rich_markup_mode="rich")


def _store(root: Path | None):
    from ratchet.store import RunStore, StoreConfig

    path = Path(root) if root is not None else StoreConfig().root
    if not path.is_dir():
        raise RatchetError(f"no run store at {path}", hint="pass --store DIR or set RATCHET_RUNS")
    return RunStore(path)


def _config(config_path: Path | None, overrides: list[str]):
    from ratchet.config import load_config
    from ratchet.context.config import ContextConfig

    return load_config(ContextConfig, config_path, overrides)


@context_app.command("learn")
def learn(
    source: str = typer.Option(..., "--from", help="Run to learn from (id or unique prefix): an engine run "
                                                   "(its per-task results) or a rollout run (its episodes)."),
    playbook: Path = typer.Option(..., "--playbook", help="Playbook file to learn into (made if absent), "
                                                         "e.g. the workspace's playbook.md."),
    model: str = typer.Option("local:qwen2.5-coder-0.5b", "--model", help="Model spec of the reflector "
                                                                          "(and the curator, unless --curator-model)."),
    curator_model: str = typer.Option(None, "--curator-model", help="Model spec of the curator, if another."),
    resume: str = typer.Option(None, "--resume", help="A context run to continue: trajectories it already "
                                                      "learned from are skipped."),
    split: str = typer.Option(None, "--split", help="Only engine results of this split (heldin, guard, ...)."),
    limit: int = typer.Option(None, "--limit", min=1, help="Learn from at most this many trajectories."),
    store: Path = StoreOption,
    config_path: Path = typer.Option(None, "--config", help="YAML of context settings (docs/context.md)."),
    overrides: list[str] = typer.Option([], "--set", help="Override a setting, e.g. --set budget_tokens=300."),
) -> None:
    """Learn a playbook offline from the trajectories a stored run kept."""
    from ratchet.context.offline import default_embedder, learn_from_run
    from ratchet.models import load_model

    cfg = _config(config_path, overrides)
    runs = _store(store)
    runs.open_run(source)  # a wrong id fails here, before a model is loaded
    if resume:
        runs.open_run(resume)
    embedder = default_embedder(cfg)
    if embedder is None:
        console.print(f"[yellow]{cfg.encoder} is not pulled: items are chosen by their record alone and "
                      f"near-duplicates are not folded. Fix: ratchet models pull {cfg.encoder}[/]")
    reflector = load_model(model)
    curator = load_model(curator_model) if curator_model else None
    run, stats = learn_from_run(runs, source, playbook, model=reflector, curator_model=curator, config=cfg,
                                embedder=embedder, resume=resume, split=split, limit=limit)
    console.print(f"learned from {stats.steps} trajectories into {playbook}: {len(stats.sizes) and stats.sizes[-1]} "
                  f"items; {stats.applied} operations applied, {stats.duplicates} duplicates folded, "
                  f"{stats.pruned} pruned, {stats.curator_problems} malformed curator operations, "
                  f"{stats.reflector_problems} malformed reflections")
    console.print(f"history: run {run.id} (ratchet context history {run.id} --store {runs.root})")


@context_app.command("show")
def show(
    playbook: Path = typer.Argument(..., help="Playbook file."),
    task: str = typer.Option(None, "--task", help="Show only what would enter a prompt for this task."),
    budget: int = typer.Option(None, "--budget", min=0, help="Token budget for --task (default: the config's)."),
    config_path: Path = typer.Option(None, "--config", help="YAML of context settings."),
    overrides: list[str] = typer.Option([], "--set", help="Override a setting."),
) -> None:
    """Print a playbook, or the items a task would get within the token budget."""
    from ratchet.context.budget import select
    from ratchet.context.offline import default_embedder
    from ratchet.context.playbook import Playbook

    if not playbook.is_file():
        raise RatchetError(f"no playbook at {playbook}", hint="learn one first: ratchet context learn --from RUN "
                                                              f"--playbook {playbook}")
    book = Playbook.load(playbook)
    if task is None:
        typer.echo(book.render(), nl=False)
        return
    cfg = _config(config_path, overrides)
    sel = select(book, task, cfg.budget_tokens if budget is None else budget, embedder=default_embedder(cfg),
                 record_weight=cfg.record_weight, min_relevance=cfg.min_relevance)
    typer.echo(book.render(sel.items, provenance=False), nl=False)
    console.print(f"{len(sel.items)} of {len(book)} items, {sel.tokens} tokens; {sel.dropped} left out")


@context_app.command("history")
def history(
    run_id: str = typer.Argument(..., help="The context run (id or unique prefix) that learned the playbook."),
    name: str = typer.Option("playbook", "--name", help="Playbook name within the run."),
    version: int = typer.Option(None, "--version", help="Print this version of the playbook."),
    diff: tuple[int, int] = typer.Option(None, "--diff", help="Print the diff between two versions: --diff 1 5."),
    store: Path = StoreOption,
) -> None:
    """List a playbook's versions (what changed each), print one, or diff two."""
    from ratchet.context.history import PlaybookHistory

    hist = PlaybookHistory(_store(store).open_run(run_id), name)
    if diff:
        typer.echo(hist.diff(*diff) or "(no difference)\n", nl=False)
        return
    if version is not None:
        typer.echo(hist.load(version).render(), nl=False)
        return
    entries = hist.entries()
    if not entries:
        raise RatchetError(f"run {run_id} keeps no versions of playbook {name!r}",
                           hint="is it a context run? list them with: ratchet runs list --kind context")
    for e in entries:
        ops = ", ".join(a["op"] + (f" {a.get('id', '')}" if a.get("id") else "") for a in e.get("applied", []))
        console.print(f"v{e['version']:<5} {e['items']:>3} items  {e.get('trajectory', '')}  "
                      f"{ops or '-'}  problems={len(e.get('problems', []))}")


def register(app: typer.Typer) -> None:
    app.add_typer(context_app, name="context")
