"""One game's synthesis as a unit of work that an executor may run on any machine.

The driver sends a :class:`GameJob` — the game's config, its run directory as it stands in the
store (empty for a new game, a checkpoint for an interrupted one) and the harness library as the
batch found it — and gets a :class:`GameResult` back: the run directory's files and the library
changes the game made. The worker writes only into a scratch directory of its own; the driver
writes the result into the store and the library, so the store has one writer however many
machines run games. A worker that dies takes its scratch directory with it: nothing it did reached
the store, so a retried game is counted (calls, tokens, candidates) once.

Every game sees the library as it stood when the batch dispatched it (not what an earlier game of
the same batch added), so results do not depend on how many workers there are or in which order
games finish.
"""

from __future__ import annotations

import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.library import HarnessLibrary
from ratchet.autoharness.pipeline import accounted, load_refiner, open_or_create, synthesize_game
from ratchet.autoharness.protocol import ProtocolConfig
from ratchet.autoharness.report import failed_games
from ratchet.contracts import Model
from ratchet.executors import UnitLost
from ratchet.store import RunStore
from ratchet.store.files import write_bytes_atomic

#: The batch run's log of attempts lost to dead workers (one line each).
LOST = "executor/lost.jsonl"
#: Files of a run directory that are not part of its content (partial writes of a killed writer).
_SKIP_SUFFIXES = (".tmp",)


def directory_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path (empty when it does not exist)."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(_SKIP_SUFFIXES) and ".tmp." not in p.name}


def write_files(root: Path, contents: dict[str, bytes]) -> None:
    for rel, data in contents.items():
        write_bytes_atomic(root / rel, data)


@dataclass(frozen=True)
class GameJob:
    env_id: str
    config: AutoHarnessConfig
    run_id: str
    run_files: dict[str, bytes]
    protocol: ProtocolConfig | None = None
    threads: int | None = None
    library: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class GameResult:
    env_id: str
    run_id: str
    report: dict[str, Any]
    files: dict[str, bytes]
    library_ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]]


class RecordingLibrary(HarnessLibrary):
    """A scratch copy of the library that remembers the changes made to it, for the driver to replay."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def add(self, env_id: str, mode: str, code: str, score: float, **provenance: Any) -> bool:
        self.ops.append(("add", (env_id, mode, code, score), provenance))
        return super().add(env_id, mode, code, score, **provenance)

    def withdraw(self, env_id: str, mode: str, *, run_id: str) -> bool:
        self.ops.append(("withdraw", (env_id, mode), {"run_id": run_id}))
        return super().withdraw(env_id, mode, run_id=run_id)


_MODELS: dict[tuple[str, int | None], Model] = {}


def _model(spec: str, threads: int | None) -> Model:
    # One load per worker process, reused by every game it runs (an embedded model takes seconds).
    key = (spec, threads)
    if key not in _MODELS:
        _MODELS[key] = load_refiner(spec, threads)
    return _MODELS[key]


def run_game(job: GameJob) -> GameResult:
    """Synthesize (or finish synthesizing) one game in a scratch store; never raises for the game's
    own failures (a broken game must not end a batch of hours): they become a ``not run`` report."""
    with tempfile.TemporaryDirectory(prefix="ratchet-game-") as scratch:
        root = Path(scratch)
        write_files(root / "lib", job.library)
        write_files(root / "runs" / job.run_id, job.run_files)
        run = RunStore(root / "runs").open_run(job.run_id)
        library = RecordingLibrary(root / "lib")
        try:
            llm = _model(job.config.model, job.threads)
            report = synthesize_game(job.config, accounted(llm, run), run, protocol=job.protocol, play_model=llm,
                                     library=library)
        except Exception as exc:  # noqa: BLE001 - reported per game, as the in-process batch does
            report = {"env": job.env_id, "status": "not run", "reason": f"{type(exc).__name__}: {exc}"[:200],
                      "trace": traceback.format_exc()[-2000:]}
            run.set_status("failed", {"error": report["reason"]})
        return GameResult(job.env_id, job.run_id, report, directory_files(run.dir), library.ops)


def lost_result(store: Any, job: GameJob, error: UnitLost) -> GameResult:
    """A game whose worker died on every attempt: its run is marked failed with the reason and kept
    as it stood, and the batch goes on without it."""
    reason = f"lost: its worker died on all {error.attempts} attempts ({error.error})"
    run = store.open_run(job.run_id)
    run.set_status("failed", {"error": reason})
    return GameResult(job.env_id, job.run_id, {"env": job.env_id, "status": "not run", "reason": reason},
                      directory_files(run.dir), [])


def keep_result(store: Any, result: GameResult, library_dir: str | None) -> None:
    """Write a game's result into the store (its run directory replaced wholesale, then re-indexed)
    and replay its library changes. Idempotent: a batch killed halfway through this is repaired by
    doing it again on resume."""
    run = store.open_run(result.run_id)
    for stale in set(directory_files(run.dir)) - set(result.files):
        (run.dir / stale).unlink(missing_ok=True)
    write_files(run.dir, result.files)
    run.reindex()
    library = HarnessLibrary(library_dir)
    for name, args, kwargs in result.library_ops:
        getattr(library, name)(*args, **kwargs)


def run_games(batch: Any, state: dict[str, Any], cfg: AutoHarnessConfig, store: Any, protocol: ProtocolConfig | None,
              executor: Any, *, threads: int | None, on_report: Any) -> dict[str, Any]:
    """The batch's unfinished games as one task each on ``executor``; each result is kept (store,
    library, ``on_report``) as it arrives. Attempts lost to dead workers are logged in the batch's
    ``executor/lost.jsonl`` and counted in its status."""
    library = directory_files(HarnessLibrary(cfg.library_dir).root)
    jobs = []
    for env_id in [g for g in state["games"] if g not in state["reports"]]:
        game_cfg = cfg.model_copy(update={"env": env_id})
        run, game_cfg = open_or_create(store, game_cfg, state["runs"].get(env_id))
        state["runs"][env_id] = run.id
        jobs.append(GameJob(env_id, game_cfg, run.id, directory_files(run.dir), protocol, threads, library))
    batch.checkpoint("batch", state)
    if hasattr(executor, "on_lost"):
        executor.on_lost = lambda info: batch.append_jsonl(LOST, {**info, "env": jobs[info["index"]].env_id})
    for result in executor.map(run_game, jobs, given_up=lambda i, error: lost_result(store, jobs[i], error)):
        keep_result(store, result, cfg.library_dir)
        on_report(result.env_id, result.report)
    lost = batch.read_jsonl(LOST)
    batch.set_status("done", {"games": len(state["reports"]), "lost_attempts": len(lost),
                              "retried": sum(1 for r in lost if r.get("retried")), "failed": failed_games(state["reports"])})
    return state
