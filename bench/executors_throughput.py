"""Rollout and evaluation throughput, local processes vs Ray on this machine, and the driver's cost
per result (where it becomes the bottleneck).

Sides, each on the same work in the same run:

1. ``inline``: the local executor with one worker (in this process; today's default);
2. ``local-2``: the local executor with two worker processes;
3. ``ray-2``: the Ray executor on a private two-CPU Ray instance on this machine (one task per unit).

Work: (a) rollouts — ``run_rollouts`` of random-legal TicTacToe episodes, every episode's steps and
summary written to a run store by the driver; (b) evaluations — the engine's ``CachedEvaluator``
over a synthetic suite whose tasks burn a fixed CPU time each (``--task-ms``), every result
appended (fsynced) to the run's evaluation cache by the driver; and the same with no work per task
(``--task-ms 0``: pure overhead); (c) one whole-game AutoHarness synthesis job, its worker time and
the driver's time to keep its result. Ratios are against ``inline`` measured in the same run.

Driver cost per result: the driver's own time per unit of work — writing the result to the store,
and unpickling it — timed directly, and the Ray round trip per task (a no-op task). With ``w``
workers each taking ``t`` per unit, the driver keeps up while ``w · d < t`` for its cost ``d`` per
result: past ``w* = t / d`` workers it is the bottleneck. That worker count is an extrapolation
from the measured ``t`` and ``d``, not a measurement on a cluster of that size.

    python -m bench.executors_throughput [--episodes 48] [--tasks 96] [--task-ms 20]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from bench._results import machine, write_json, write_markdown
from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.batch import game_job, keep_game
from ratchet.autoharness.pipeline import open_or_create
from ratchet.contracts import Candidate, Task, TaskResult
from ratchet.envs.agents import AgentSpec
from ratchet.envs.runner import RolloutConfig, _Job, _job_keys, _play, run_rollouts  # _play: the runner's unit of work
from ratchet.evolve.cache import EVALS, CachedEvaluator
from ratchet.evolve.suites.synthetic import NoisyOptions, NoisySuite
from ratchet.executors import ExecutorConfig, LocalExecutor
from ratchet.store import RunStore
from ratchet.store.transfer import replace_run_files, run_job

NAME = "executors_throughput"


class BusyOptions(NoisyOptions):
    work_ms: float = Field(default=20.0, ge=0)
    """CPU milliseconds each task evaluation burns (a stand-in for a grader's work)."""


class BusySuite(NoisySuite):
    """The noisy suite, burning ``work_ms`` of CPU per task (busy, not asleep: it needs a core)."""

    name = "busy-noisy"

    def __init__(self, options: BusyOptions, ctx=None) -> None:
        super().__init__(options, ctx)
        self.options: BusyOptions = options

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        end = time.process_time() + self.options.work_ms / 1000 * len(tasks)
        while time.process_time() < end:
            pass
        return super().evaluate(candidate, tasks, seed)


def _executor(side: str):
    if side == "inline":
        return LocalExecutor(1)
    if side == "local-2":
        return LocalExecutor(2)
    from ratchet.executors.ray import RayExecutor  # deferred: ray is optional and slow to import

    return RayExecutor(ExecutorConfig(kind="ray", local_cpus=2))


def rollouts(executor, episodes: int, root: Path) -> dict:
    run = RunStore(root).create_run("bench", {})
    start = time.perf_counter()
    report = run_rollouts("TicTacToe-v0", AgentSpec("random-legal", game="TicTacToe-v0"), list(range(episodes)),
                          RolloutConfig(opponent="random-legal"), run=run, executor=executor)
    wall = time.perf_counter() - start
    return {"episodes": episodes, "steps": report.steps, "wall_s": round(wall, 3),
            "episodes_per_s": round(episodes / wall, 2), "steps_per_s": round(report.steps / wall, 1),
            "stored_episodes": len(run.episodes())}


def evaluations(executor, tasks: int, work_ms: float, root: Path) -> dict:
    run = RunStore(root).create_run("bench", {})
    suite = BusySuite(BusyOptions(tasks=tasks, work_ms=work_ms))
    evaluator = CachedEvaluator(suite, run, executor=executor)
    candidate = Candidate("bench", "harness", {"harness.json": json.dumps({"default": 0.5})})
    start = time.perf_counter()
    results = evaluator.evaluate(candidate, suite.tasks(), 0)
    wall = time.perf_counter() - start
    return {"tasks": tasks, "work_ms": work_ms, "wall_s": round(wall, 3), "tasks_per_s": round(len(results) / wall, 1),
            "stored": len(run.read_jsonl(EVALS))}


def driver_costs(root: Path, repeats: int) -> dict:
    """The driver's own time per result: store writes and unpickling, timed directly."""
    run = RunStore(root).create_run("bench", {})
    suite = BusySuite(BusyOptions(tasks=1, work_ms=0))
    [result] = suite.evaluate(Candidate("c", "harness", {"harness.json": "{}"}), suite.tasks(), 0)
    record = {"candidate": "c", "fingerprint": "f", "task_id": result.task_id, "seed": 0, "score": result.score,
              "trace": result.trace, "failures": [], "metrics": result.metrics, "recorded_at": time.time()}
    start = time.perf_counter()
    for _ in range(repeats):
        run.append_jsonl(EVALS, record)
    eval_write = (time.perf_counter() - start) / repeats
    blob = pickle.dumps(result)
    start = time.perf_counter()
    for _ in range(repeats):
        pickle.loads(blob)
    eval_unpickle = (time.perf_counter() - start) / repeats
    # One whole episode as the rollout runner's driver writes it: its steps, then its summary.
    cfg = RolloutConfig(opponent="random-legal")
    agent = AgentSpec("random-legal", game="TicTacToe-v0")
    opponent = AgentSpec("random-legal", game="TicTacToe-v0")
    keys = _job_keys("TicTacToe-v0", cfg, agent, opponent)
    job = _Job(env_id="TicTacToe-v0", seed=99, index=0, agent_seat=0, agent_factory=agent, opponent_factory=opponent,
               self_play=False, config=cfg, keys=keys)
    _play(job)  # the first episode builds the env: not part of the per-episode cost
    episodes = []
    start = time.perf_counter()
    for i in range(20):
        episodes.append(_play(_Job(env_id="TicTacToe-v0", seed=i, index=i, agent_seat=0, agent_factory=agent,
                                   opponent_factory=opponent, self_play=False, config=cfg, keys=keys)))
    episode_work = (time.perf_counter() - start) / 20
    start = time.perf_counter()
    for r in episodes:
        with run.step_writer(r.summary.episode_id) as writer:  # as run_rollouts writes it
            writer.write_many(r.steps)
        run.add_episode(r.summary)
    episode_write = (time.perf_counter() - start) / len(episodes)
    start = time.perf_counter()
    for r in episodes:  # the same, one fsynced line per step (the runner before it batched them)
        with run.step_writer(r.summary.episode_id + "-per-step") as writer:
            for step in r.steps:
                writer.write(step)
        run.add_episode(r.summary)
    episode_write_per_step = (time.perf_counter() - start) / len(episodes)
    blobs = [pickle.dumps(r) for r in episodes]
    start = time.perf_counter()
    for b in blobs:
        pickle.loads(b)
    episode_unpickle = (time.perf_counter() - start) / len(blobs)
    return {"eval_write_ms": eval_write * 1e3, "eval_unpickle_ms": eval_unpickle * 1e3, "eval_bytes": len(blob),
            "episode_write_ms": episode_write * 1e3, "episode_write_per_step_fsync_ms": episode_write_per_step * 1e3, "episode_unpickle_ms": episode_unpickle * 1e3,
            "episode_bytes": statistics.fmean(len(b) for b in blobs), "episode_work_ms": episode_work * 1e3,
            "steps_per_episode": statistics.fmean(len(r.steps) for r in episodes)}


def game_costs(root: Path) -> dict:
    """One whole-game synthesis job (scripted refiner, small): the worker's time for the game, and
    the driver's time to keep its result (write the run directory, re-index it, replay the library)."""
    store = RunStore(root / "runs")
    cfg = AutoHarnessConfig(model="scripted:", method="faithful", iterations=3, eval_steps=20,
                            search_seeds=[0, 1], heldout_seeds=[7], rng_seed=3, library_dir=str(root / "lib"))
    cfg.budget.max_calls = 3
    cfg = cfg.model_copy(update={"env": "TicTacToe-v0"})
    run, cfg = open_or_create(store, cfg, None)
    job = game_job(cfg, run, None, None, {})
    start = time.perf_counter()
    result = run_job(job)
    work = time.perf_counter() - start
    blob = pickle.dumps(result)
    start = time.perf_counter()
    kept = pickle.loads(blob)
    replace_run_files(store, kept.run_id, kept.files)
    keep_game(kept, cfg.library_dir)
    keep = time.perf_counter() - start
    return {"game_work_ms": work * 1e3, "game_keep_ms": keep * 1e3, "game_bytes": len(blob),
            "game_files": len(result.files)}


def ray_round_trip(executor, n: int) -> float:
    """ms of driver wall time per no-op task (submit, schedule, run, fetch) with tasks in flight."""
    list(executor.map(abs, range(min(n, 20))))  # warm the workers
    start = time.perf_counter()
    list(executor.map(abs, range(n)))
    return (time.perf_counter() - start) / n * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.executors_throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=48)
    parser.add_argument("--tasks", type=int, default=96)
    parser.add_argument("--task-ms", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONPATH", os.pathsep.join(sys.path))  # Ray workers import this module
    root = Path(tempfile.mkdtemp(prefix="bench-executors-"))
    sides: dict[str, dict] = {}
    for side in ("inline", "local-2", "ray-2"):
        t0 = time.perf_counter()
        executor = _executor(side)
        startup = time.perf_counter() - t0
        try:
            list(executor.map(abs, [1, 2, 3, 4]))  # start the workers before timing
            sides[side] = {
                "startup_s": round(startup, 2),
                "rollouts": rollouts(executor, args.episodes, root / side / "rollouts"),
                "evaluations": evaluations(executor, args.tasks, args.task_ms, root / side / "evals"),
                "evaluations_no_work": evaluations(executor, args.tasks, 0.0, root / side / "evals0"),
            }
            if side == "ray-2":
                sides[side]["noop_task_ms"] = round(ray_round_trip(executor, 400), 3)
        finally:
            executor.close()
        print(side, json.dumps(sides[side]), flush=True)
    costs = {**driver_costs(root / "driver", args.repeats), **game_costs(root / "game")}
    base = sides["inline"]
    ratios = {side: {"rollouts": round(s["rollouts"]["episodes_per_s"] / base["rollouts"]["episodes_per_s"], 2),
                     "evaluations": round(s["evaluations"]["tasks_per_s"] / base["evaluations"]["tasks_per_s"], 2),
                     "evaluations_no_work": round(s["evaluations_no_work"]["tasks_per_s"]
                                                  / base["evaluations_no_work"]["tasks_per_s"], 2)}
              for side, s in sides.items()}
    eval_d = costs["eval_write_ms"] + costs["eval_unpickle_ms"]
    episode_d = costs["episode_write_ms"] + costs["episode_unpickle_ms"]
    noop = sides["ray-2"]["noop_task_ms"]
    crossover = {
        "evaluation": {"task_ms": args.task_ms, "driver_ms": round(eval_d, 3),
                       "workers_store_bound": round(args.task_ms / eval_d, 1),
                       "driver_ms_with_ray": round(eval_d + noop, 3),
                       "workers_ray_bound": round(args.task_ms / (eval_d + noop), 1)},
        "episode": {"task_ms": round(costs["episode_work_ms"], 2), "driver_ms": round(episode_d, 3),
                    "workers_store_bound": round(costs["episode_work_ms"] / episode_d, 1),
                    "driver_ms_with_ray": round(episode_d + noop, 3),
                    "workers_ray_bound": round(costs["episode_work_ms"] / (episode_d + noop), 1)},
        "game": {"task_ms": round(costs["game_work_ms"], 1), "driver_ms": round(costs["game_keep_ms"], 2),
                 "workers_store_bound": round(costs["game_work_ms"] / costs["game_keep_ms"], 1),
                 "driver_ms_with_ray": round(costs["game_keep_ms"] + noop, 2),
                 "workers_ray_bound": round(costs["game_work_ms"] / (costs["game_keep_ms"] + noop), 1)},
    }
    out = {"machine": machine(platform=platform.platform()),
           "args": vars(args), "sides": sides, "ratio_vs_inline": ratios,
           "driver_cost": {k: round(v, 4) for k, v in costs.items()}, "crossover": crossover}
    write_json(NAME, out)
    write_markdown(NAME, markdown(out))
    print(markdown(out))
    return 0


def markdown(out: dict) -> str:
    a = out["args"]
    lines = [f"# Executors: local processes vs Ray on this machine ({out['machine']['cpus']} CPUs)", "",
             f"{a['episodes']} random-legal TicTacToe episodes (every step written by the driver); {a['tasks']} task "
             f"evaluations burning {a['task_ms']:g} ms CPU each, and {a['tasks']} with no work (pure overhead). "
             "Ratios against `inline` (one worker, in this process) in the same run.", "",
             "| side | start-up s | episodes/s | × | evaluations/s | × | no-work evaluations/s | × |",
             "|---|---|---|---|---|---|---|---|"]
    for side, s in out["sides"].items():
        r = out["ratio_vs_inline"][side]
        lines.append(f"| {side} | {s['startup_s']} | {s['rollouts']['episodes_per_s']} | {r['rollouts']} | "
                     f"{s['evaluations']['tasks_per_s']} | {r['evaluations']} | {s['evaluations_no_work']['tasks_per_s']} | "
                     f"{r['evaluations_no_work']} |")
    d = out["driver_cost"]
    c = out["crossover"]
    lines += ["", "## The driver's cost per result (measured)", "",
              f"- evaluation result: store write (fsynced JSONL append) {d['eval_write_ms']:.3f} ms, unpickle "
              f"{d['eval_unpickle_ms']:.4f} ms ({d['eval_bytes']} bytes)",
              f"- episode ({d['steps_per_episode']:.1f} steps): store writes {d['episode_write_ms']:.3f} ms, unpickle "
              f"{d['episode_unpickle_ms']:.4f} ms ({d['episode_bytes']:.0f} bytes); playing it takes {d['episode_work_ms']:.2f} ms "
              f"(with one fsync per step line, as the runner wrote episodes before this change: {d['episode_write_per_step_fsync_ms']:.3f} ms)",
              f"- whole-game synthesis job (scripted refiner, 3 calls): {d['game_work_ms']:.0f} ms on the worker; keeping its "
              f"result (write {d['game_files']} files, re-index, replay the library) {d['game_keep_ms']:.1f} ms on the driver "
              f"({d['game_bytes']} bytes pickled)",
              f"- Ray round trip per no-op task with tasks in flight: {out['sides']['ray-2']['noop_task_ms']} ms of driver wall time",
              "", "## Where the driver becomes the bottleneck (extrapolated from the numbers above)", "",
              "| unit | work per unit ms | driver ms per result (store) | workers before it binds | driver ms incl. Ray round trip | workers before it binds |",
              "|---|---|---|---|---|---|"]
    for unit, x in c.items():
        lines.append(f"| {unit} | {x['task_ms']} | {x['driver_ms']} | {x['workers_store_bound']} | {x['driver_ms_with_ray']} | "
                     f"{x['workers_ray_bound']} |")
    lines += ["", "w* = work per unit / driver cost per result: past that many workers the single writer is busy all the "
              "time. This is an extrapolation from one machine's measured costs, not a measurement on a cluster.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
