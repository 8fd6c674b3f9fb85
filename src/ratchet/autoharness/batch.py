"""Batch mode: synthesize and evaluate harnesses for every game of a suite, for hours, resumable.

A batch is itself a run (kind ``autoharness-batch``) whose checkpoint maps each game to its own
AutoHarness run and state; resuming skips finished games and resumes the interrupted one.
The batch writes ``reports.json`` and ``table.md`` after every game.

On an executor that runs work elsewhere (a pool, Ray), each game is one
:class:`~ratchet.store.transfer.RunJob` (:func:`game_job`); its run's files and its library changes
come back and the driver writes both. Every game sees the library as the batch found it, so results
do not depend on the number of workers or on the order games finish.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import synthesize_on_engine
from ratchet.autoharness.library import HarnessLibrary
from ratchet.autoharness.pipeline import accounted, open_or_create, refuse_search_run
from ratchet.envs.harness.protocol import ProtocolConfig
from ratchet.autoharness.report import failed_games, markdown_table
from ratchet.contracts import Model
from ratchet.models import load_model
from ratchet.envs import suite_ids
from ratchet.executors import UnitLost
from ratchet.store.transfer import RunJob, RunResult, continue_runs, directory_files

BATCH_KIND = "autoharness-batch"
#: The batch run's log of attempts lost to dead workers (one line each).
LOST = "executor/lost.jsonl"


def run_suite(suite: str, cfg: AutoHarnessConfig, store: Any, protocol: Any, *, threads: int | None = None,
              resume: str | None = None, console: Any = None, games: list[str] | None = None,
              executor: Any = None, stop_after_s: float | None = None) -> dict[str, Any]:
    """Every game of ``suite``. With no executor (or one that runs in this process) games run here
    one after another, each resumable mid-game; with a pool or Ray executor each game is one task
    (:func:`run_games`) and the results are written here as they arrive. ``stop_after_s``: in this
    process, start no new game once that many seconds have passed (the batch stays unfinished, and
    the same command carries on with it): a long suite run in chunks on a shared machine, each
    game whole, since a game resumed mid-search gets its time budget afresh. Each game is
    synthesized on the improvement engine (:func:`ratchet.autoharness.engine.synthesize_on_engine`)."""
    started = time.monotonic()
    if games is None and not resume:
        games = suite_ids(suite)
    resume = resume or _unfinished(store, f"{suite}-{cfg.method}", cfg, games)
    if resume:
        batch = store.open_run(resume)
        batch.set_status("running")  # this process runs it now
        state = batch.load_checkpoint("batch") or {}
        cfg = AutoHarnessConfig.model_validate(state["config"])
    else:
        batch = store.create_run(BATCH_KIND, cfg.model_dump(), f"{suite}-{cfg.method}")
        state = {"config": cfg.model_dump(), "games": games, "runs": {}, "reports": {}}
        batch.checkpoint("batch", state)
    if executor is not None and not getattr(executor, "in_process", True):
        return run_games(batch, state, cfg, store, protocol, executor, threads=threads,
                         on_report=lambda env_id, report: _keep_report(batch, state, suite, cfg, env_id, report))
    llm = load_model(cfg.model, threads=threads)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task(suite, total=len(state["games"]), completed=len(state["reports"]), info="")
        for env_id in state["games"]:
            if env_id in state["reports"]:
                continue
            if stop_after_s is not None and time.monotonic() - started >= stop_after_s:
                return state  # unfinished on purpose: resumable
            run, game_cfg = open_or_create(store, cfg.model_copy(update={"env": env_id}), state["runs"].get(env_id))
            state["runs"][env_id] = run.id
            batch.checkpoint("batch", state)
            bar.update(task, description=f"{suite}: {env_id}")
            report = synthesize_or_report(game_cfg, lambda: llm, run, protocol)
            _keep_report(batch, state, suite, cfg, env_id, report)
            bar.advance(task)
            if console is not None and not console.is_terminal:  # a log gets a line per game (a bar prints nothing there)
                search = report.get("search") or {}
                print(f"{suite} {len(state['reports'])}/{len(state['games'])} {env_id}: best h {search.get('best_h')}, "
                      f"{search.get('llm_calls')} calls, {report.get('wall_s')} s{' (' + report['reason'] + ')' if 'reason' in report else ''}",
                      flush=True)
    batch.set_status("done", {"games": len(state["reports"]), "failed": failed_games(state["reports"])})
    return state


def synthesize_or_report(cfg: AutoHarnessConfig, load_model: Callable[[], Model], run: Any,
                         protocol: ProtocolConfig | None, *,
                         library: HarnessLibrary | None = None) -> dict[str, Any]:
    """One game's synthesis report, on the engine; never raises for the game's own failures, a
    model that will not load included (one broken game must not end a batch of hours): they become
    a ``not run`` report, as does a game whose run the dedicated search (removed) started."""
    try:
        refuse_search_run(run)
        llm = load_model()
        player = accounted(llm, run, "autoharness.heldout")  # the held-out games' calls are the run's too
        return synthesize_on_engine(cfg, llm, run, protocol=protocol, play_model=player, library=library)
    except Exception as exc:  # noqa: BLE001 - reported per game
        report = {"env": cfg.env, "status": "not run", "reason": f"{type(exc).__name__}: {exc}"[:200],
                  "trace": traceback.format_exc()[-2000:]}
        run.set_status("failed", {"error": report["reason"]})
        return report


class RecordingLibrary(HarnessLibrary):
    """A scratch copy of the library that remembers the changes made to it, for the driver to replay."""

    def __init__(self, root: Any) -> None:
        super().__init__(root)
        self.ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def add(self, env_id: str, mode: str, code: str, score: float, **provenance: Any) -> bool:
        self.ops.append(("add", (env_id, mode, code, score), provenance))
        return super().add(env_id, mode, code, score, **provenance)

    def withdraw(self, env_id: str, mode: str, *, run_id: str) -> bool:
        self.ops.append(("withdraw", (env_id, mode), {"run_id": run_id}))
        return super().withdraw(env_id, mode, run_id=run_id)


@cache  # one load per worker process, reused by every game it runs (an embedded model takes seconds)
def _model(spec: str, threads: int | None) -> Model:
    return load_model(spec, threads=threads)


def _play_game(cfg: AutoHarnessConfig, protocol: ProtocolConfig | None, threads: int | None,
               root: Path, run: Any) -> tuple[dict[str, Any], list[Any]]:
    """A game's synthesis on a worker: its report and the library changes it made."""
    library = RecordingLibrary(root / "lib")
    report = synthesize_or_report(cfg, lambda: _model(cfg.model, threads), run, protocol, library=library)
    return report, library.ops


def game_job(cfg: AutoHarnessConfig, run: Any, protocol: ProtocolConfig | None, threads: int | None,
             library: dict[str, bytes]) -> RunJob:
    """One game (``cfg.env``, its run as it stands in the store) as a unit of work for an executor."""
    return RunJob(run.id, directory_files(run.dir), partial(_play_game, cfg, protocol, threads), {"lib": library})


def keep_game(result: RunResult, library_dir: str | None) -> dict[str, Any]:
    """Replay a finished game's library changes (its run is in the store already: see
    :func:`continue_runs`); returns its report. A batch killed halfway through this redoes it on resume."""
    report, ops = result.value
    library = HarnessLibrary(library_dir)
    for name, args, kwargs in ops:
        getattr(library, name)(*args, **kwargs)
    return report


def run_games(batch: Any, state: dict[str, Any], cfg: AutoHarnessConfig, store: Any, protocol: ProtocolConfig | None,
              executor: Any, *, threads: int | None, on_report: Any) -> dict[str, Any]:
    """The batch's unfinished games as one task each on ``executor``; each result is kept (store,
    library, ``on_report``) as it arrives. Attempts lost to dead workers are logged in the batch's
    ``executor/lost.jsonl`` and counted in its status."""
    library = directory_files(HarnessLibrary(cfg.library_dir).root)
    jobs, env_of = [], {}
    for env_id in [g for g in state["games"] if g not in state["reports"]]:
        run, game_cfg = open_or_create(store, cfg.model_copy(update={"env": env_id}), state["runs"].get(env_id))
        state["runs"][env_id], env_of[run.id] = run.id, env_id
        jobs.append(game_job(game_cfg, run, protocol, threads, library))
    batch.checkpoint("batch", state)
    if hasattr(executor, "on_lost"):
        executor.on_lost = lambda info: batch.append_jsonl(LOST, {**info, "env": env_of[jobs[info["index"]].run_id]})
    for result in continue_runs(executor, jobs, store, given_up=partial(_lost_game, store, env_of)):
        on_report(env_of[result.run_id], keep_game(result, cfg.library_dir))
    lost = batch.read_jsonl(LOST)
    batch.set_status("done", {"games": len(state["reports"]), "lost_attempts": len(lost),
                              "retried": sum(1 for r in lost if r.get("retried")), "failed": failed_games(state["reports"])})
    return state


def _lost_game(store: Any, env_of: dict[str, str], job: RunJob, error: UnitLost) -> RunResult:
    """A game whose worker died on every attempt: its run is marked failed with the reason and kept
    as it stood, and the batch goes on without it."""
    reason = f"lost: its worker died on all {error.attempts} attempts ({error.error})"
    run = store.open_run(job.run_id)
    run.set_status("failed", {"error": reason})
    report = {"env": env_of[job.run_id], "status": "not run", "reason": reason}
    return RunResult(job.run_id, directory_files(run.dir), (report, []))


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
