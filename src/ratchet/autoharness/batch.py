"""Batch mode: synthesize and evaluate harnesses for every game of a suite, for hours, resumable.

A batch is itself a run (kind ``autoharness-batch``) whose checkpoint maps each game to its own
AutoHarness run and state; resuming skips finished games and resumes the interrupted one.
The batch writes ``reports.json`` and ``table.md`` after every game.
"""

from __future__ import annotations

import traceback
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.jobs import run_games
from ratchet.autoharness.pipeline import accounted, load_refiner, open_or_create, synthesize_game
from ratchet.autoharness.report import failed_games, markdown_table
from ratchet.envs import suite_ids

BATCH_KIND = "autoharness-batch"


def run_suite(suite: str, cfg: AutoHarnessConfig, store: Any, protocol: Any, *, threads: int | None = None,
              resume: str | None = None, console: Any = None, games: list[str] | None = None,
              executor: Any = None) -> dict[str, Any]:
    """Every game of ``suite``. With no executor (or one that runs in this process) games run here
    one after another, each resumable mid-game; with a pool or Ray executor each game is one task
    (:mod:`ratchet.autoharness.jobs`) and the results are written here as they arrive."""
    if games is None and not resume:
        games = suite_ids(suite)
    resume = resume or _unfinished(store, f"{suite}-{cfg.method}", cfg, games)
    if resume:
        batch = store.open_run(resume)
        state = batch.load_checkpoint("batch") or {}
        cfg = AutoHarnessConfig.model_validate(state["config"])
    else:
        batch = store.create_run(BATCH_KIND, cfg.model_dump(), f"{suite}-{cfg.method}")
        state = {"config": cfg.model_dump(), "games": games, "runs": {}, "reports": {}}
        batch.checkpoint("batch", state)
    if executor is not None and not getattr(executor, "in_process", True):
        return run_games(batch, state, cfg, store, protocol, executor, threads=threads,
                         on_report=lambda env_id, report: _keep_report(batch, state, suite, cfg, env_id, report))
    llm = load_refiner(cfg.model, threads)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task(suite, total=len(state["games"]), completed=len(state["reports"]), info="")
        for env_id in state["games"]:
            if env_id in state["reports"]:
                continue
            game_cfg = cfg.model_copy(update={"env": env_id})
            run, game_cfg = open_or_create(store, game_cfg, state["runs"].get(env_id))
            state["runs"][env_id] = run.id
            batch.checkpoint("batch", state)
            bar.update(task, description=f"{suite}: {env_id}")
            try:
                report = synthesize_game(
                    game_cfg, accounted(llm, run), run, protocol=protocol, play_model=llm,
                    on_progress=lambda info: bar.update(task, info=f"it {info['iteration']} · h {info['best_h']:.2f} · {info['calls']} calls"),
                )
            except Exception as exc:  # one broken game must not end a batch of hours
                report = {"env": env_id, "status": "not run", "reason": f"{type(exc).__name__}: {exc}"[:200],
                          "trace": traceback.format_exc()[-2000:]}
                run.set_status("failed", {"error": report["reason"]})
            _keep_report(batch, state, suite, cfg, env_id, report)
            bar.advance(task)
            if console is not None and not console.is_terminal:  # a log gets a line per game (a bar prints nothing there)
                search = report.get("search") or {}
                print(f"{suite} {len(state['reports'])}/{len(state['games'])} {env_id}: best h {search.get('best_h')}, "
                      f"{search.get('llm_calls')} calls, {report.get('wall_s')} s{' (' + report['reason'] + ')' if 'reason' in report else ''}",
                      flush=True)
    batch.set_status("done", {"games": len(state["reports"]), "failed": failed_games(state["reports"])})
    return state


def _keep_report(batch: Any, state: dict[str, Any], suite: str, cfg: AutoHarnessConfig, env_id: str,
                 report: dict[str, Any]) -> None:
    state["reports"][env_id] = report
    batch.checkpoint("batch", state)
    reports = [state["reports"].get(g, {"env": g, "status": "not run", "reason": "pending"}) for g in state["games"]]
    batch.write_json("reports.json", reports)
    batch.path("table.md").write_text(markdown_table(reports, f"AutoHarness on {suite} ({cfg.method}, {cfg.model})"))


def _unfinished(store: Any, name: str, cfg: AutoHarnessConfig, games: list[str] | None) -> str | None:
    """The newest batch of these games and this configuration in ``store`` that has not finished:
    the same command with the same ``--store`` carries on with it instead of starting over."""
    for run_id in reversed(store.run_ids()):
        run = store.open_run(run_id)
        if run.kind == BATCH_KIND and run.name == name and run.status().get("status") != "done":
            saved = run.load_checkpoint("batch") or {}
            if saved.get("config") == cfg.model_dump() and saved.get("games") == games:
                return run.id
    return None
