"""Steps/s through the rollout runner vs raw TextArena stepping, and parallel speed-up.

Same games, same seeds, same moves on every side: legal move sequences are first recorded per seed
with the random-legal player, then replayed (1) by a bare loop over raw TextArena envs (``-raw``
ids: no wrappers, the cheapest possible stepping), (2) by a bare loop over TextArena's default ids
(the history-keeping LLM observation wrapper most users step), (3) through ``run_rollouts`` (the
adapter: invalid-move hook, private random stream, bounded observations, hint stripping; the
runner: agent call, step records, metrics) in one worker, in this process, and (4) the same with
every game behind the worker-process proxy (the Python >= 3.12 arrangement). The runner's replay
agent is a code policy returning the recorded move, so all sides do the same game work.
Overhead = runner time / raw time - 1 (target <= 10%). Then the parallel speed-up of 2 workers
vs 1 on more episodes. Sides alternate in rounds so load from other processes hits all alike;
the best round of each side is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
MAX_STEPS = 120
GAMES = ("TicTacToe-v0", "ConnectFour-v0", "Othello-v0", "PigDice-v0", "FifteenPuzzle-v0", "Minesweeper-v0")


class ReplayAgent:
    """Plays a recorded move sequence for the seed it was reset with (both seats, in order)."""

    name = "replay"

    def __init__(self, moves: dict[int, list[str]]) -> None:
        self.moves = moves
        self._queue: list[str] = []
        self.last_info: dict = {}

    def reset(self, seed: int) -> None:
        self._queue = list(self.moves[seed])

    def act(self, observation, feedback=None) -> str:
        return self._queue.pop(0) if self._queue else "[zzz]"


class ReplayFactory:
    def __init__(self, moves: dict[int, list[str]]) -> None:
        self.moves = moves

    def __call__(self) -> ReplayAgent:
        return ReplayAgent(self.moves)


def record(env_id: str, count: int, max_steps: int) -> dict[int, list[str]]:
    """``count`` seeds with a complete legal move sequence each: the game ends, or the sequence is
    exactly ``max_steps`` long (the runner's cap then ends it at the same step). Seeds where the
    random-legal player found no legal move are skipped."""
    from ratchet.envs import EnvConfig, make
    from ratchet.envs.agents import RandomLegalAgent

    env = make(env_id, EnvConfig(max_steps=max_steps))
    out: dict[int, list[str]] = {}
    seed = 0
    while len(out) < count and seed < 10 * count:
        agent = RandomLegalAgent(seed)
        agent.bind(env)
        obs = env.reset(seed)
        moves: list[str] = []
        complete = False
        while True:
            action = agent.act(obs)
            result = env.step(action)
            if not result.legal and not result.losing_not_illegal:
                break  # not a clean sequence: skip this seed
            moves.append(action)
            if result.done:
                complete = True
                break
            obs = result.observation
        if complete:
            out[seed] = moves
        seed += 1
    env.close()
    return out


def raw_loop(env_id: str, moves: dict[int, list[str]], suffix: str) -> tuple[int, float]:
    import textarena as ta

    from ratchet.envs.registry import paper_players

    players = paper_players()[env_id]
    env = ta.make(env_id + suffix)
    steps = 0
    start = time.perf_counter()
    for seed, seq in moves.items():
        env.reset(num_players=players, seed=seed)
        for action in seq:
            env.get_observation()
            done, _ = env.step(action if "[" in action else f"[{action}]")
            steps += 1
            if done:
                break
        env.close()
    return steps, time.perf_counter() - start


def runner_loop(env_id: str, moves: dict[int, list[str]], workers: int, remote: str = "never",
                executor=None) -> tuple[int, float]:
    from ratchet.envs.runner import RolloutConfig, run_rollouts

    config = RolloutConfig(workers=workers, opponent="self", alternate_seats=False,
                           env={"max_steps": MAX_STEPS, "remote": remote})
    start = time.perf_counter()
    report = run_rollouts(env_id, ReplayFactory(moves), list(moves), config, executor=executor)
    return report.steps, time.perf_counter() - start


def _coverage_one(env_id: str) -> dict:
    from ratchet.envs import EnvConfig, make
    from ratchet.envs.agents import AgentSpec
    from ratchet.envs.runner import RolloutConfig, run_rollouts

    env = make(env_id, EnvConfig())
    env.reset(0)
    listed = bool(env.legal_moves_hint())
    env.close()
    start = time.perf_counter()
    report = run_rollouts(env_id, AgentSpec("random-legal"), [0],
                          RolloutConfig(workers=1, opponent="self", env={"max_steps": 16}))
    return {"env_id": env_id, "lists_moves": listed, "legal_rate": report.legal_rate,
            "steps": report.agent_steps, "s": time.perf_counter() - start}


def coverage(out: str) -> int:
    """How often the random-legal player's move is legal, per game (1 episode, <= 16 steps)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ratchet.envs import suite_ids

    rows = []
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")) as pool:
        for row in pool.map(_coverage_one, suite_ids("autoharness-145")):
            print(json.dumps(row), flush=True)
            rows.append(row)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{out}.json").write_text(json.dumps(rows, indent=1))
    exact = [r for r in rows if r["legal_rate"] == 1.0]
    lines = [
        "# Random-legal opponent: legal-move rate per game",
        "",
        "One episode per game (seed 0), both seats played by the random-legal player, at most 16 steps.",
        f"{len(exact)}/{len(rows)} games: every move legal. `lists moves`: the game prints its legal moves "
        "(the player samples that list); otherwise it probes bracketed tokens of the observation, shape-keeping variants of them, [0]-[9] "
        "and [r c] pairs on a copy of the game.",
        "",
        "| game | lists moves | legal rate | agent steps |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r['env_id']} | {'yes' if r['lists_moves'] else 'no'} | {r['legal_rate']:.2f} | {r['steps']} |" for r in rows]
    (RESULTS / f"{out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:4]))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.envs_throughput", description=__doc__)
    parser.add_argument("--seeds", type=int, default=6, help="episodes per game for the overhead part")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=120)
    parser.add_argument("--parallel-episodes", type=int, default=64)
    parser.add_argument("--out", default="envs_throughput")
    parser.add_argument("--coverage", action="store_true",
                        help="instead: legal rate of the random-legal player on all 145 games (envs_random_legal.*)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.coverage:
        return coverage("envs_random_legal")

    global MAX_STEPS
    MAX_STEPS = args.max_steps
    rows = []
    for env_id in GAMES:
        moves = record(env_id, args.seeds, args.max_steps)
        seeds = list(moves)
        best: dict[str, tuple[int, float]] = {}
        for _ in range(args.rounds):
            for side, fn in (
                ("raw", lambda e=env_id, m=moves: raw_loop(e, m, "-raw")),
                ("default_wrappers", lambda e=env_id, m=moves: raw_loop(e, m, "")),
                ("runner", lambda e=env_id, m=moves: runner_loop(e, m, 1)),
                ("runner_worker_proxy", lambda e=env_id, m=moves: runner_loop(e, m, 1, remote="always")),
            ):
                steps, secs = fn()
                if side not in best or secs < best[side][1]:
                    best[side] = (steps, secs)
        raw_steps, raw_s = best["raw"]
        row = {"env_id": env_id, "episodes": len(seeds), "steps": raw_steps}
        for side, (steps, secs) in best.items():
            row[f"{side}_steps_per_s"] = steps / secs
            row[f"{side}_s"] = secs
            assert steps == raw_steps, (env_id, side, steps, raw_steps)  # the same games on every side
        row["runner_overhead"] = best["runner"][1] / raw_s - 1
        row["runner_vs_default_wrappers"] = best["runner"][1] / best["default_wrappers"][1] - 1
        row["proxy_overhead"] = best["runner_worker_proxy"][1] / raw_s - 1
        row["runner_extra_us_per_step"] = (best["runner"][1] - raw_s) / raw_steps * 1e6
        rows.append(row)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)

    total_raw = sum(r["raw_s"] for r in rows)
    total_runner = sum(r["runner_s"] for r in rows)

    # Parallel speed-up: the same episodes with 1 and 2 workers (process start included).
    par_game = "Othello-v0"
    par_moves = record(par_game, args.parallel_episodes, args.max_steps)
    par_seeds = list(par_moves)
    from ratchet.executors import LocalExecutor

    parallel = {}
    for workers in (1, 2):
        times = [runner_loop(par_game, par_moves, workers)[1] for _ in range(args.rounds)]
        parallel[workers] = min(times)
    warm = {}
    for workers in (1, 2):
        with LocalExecutor(workers) as pool:
            runner_loop(par_game, par_moves, workers, executor=pool)  # start the workers
            warm[workers] = min(runner_loop(par_game, par_moves, workers, executor=pool)[1] for _ in range(args.rounds))
    result = {
        "machine": {"python": platform.python_version(), "cores": os.cpu_count(),
                    "load_avg_1m_at_end": os.getloadavg()[0]},
        "games": rows,
        "total_raw_s": total_raw,
        "total_runner_s": total_runner,
        "runner_overhead_total": total_runner / total_raw - 1,
        "parallel": {"env_id": par_game, "episodes": len(par_seeds),
                     "one_worker_s": parallel[1], "two_workers_s": parallel[2],
                     "speedup": parallel[1] / parallel[2],
                     "warm_one_worker_s": warm[1], "warm_two_workers_s": warm[2],
                     "warm_speedup": warm[1] / warm[2]},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2))
    lines = [
        "# Environment stepping throughput",
        "",
        f"Python {result['machine']['python']}, {result['machine']['cores']} cores, load average "
        f"{result['machine']['load_avg_1m_at_end']:.1f} at the end (a shared machine). Best of "
        f"{args.rounds} alternating rounds; {args.seeds} episodes per game, identical recorded legal moves "
        "on every side. Overhead = time / raw time - 1.",
        "",
        "| game | steps | raw steps/s | default-wrapper steps/s | runner steps/s | runner overhead vs raw | extra µs/step | runner vs default wrappers | worker-proxy steps/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['env_id']} | {r['steps']} | {r['raw_steps_per_s']:.0f} | {r['default_wrappers_steps_per_s']:.0f} | "
            f"{r['runner_steps_per_s']:.0f} | {r['runner_overhead']:+.1%} | {r['runner_extra_us_per_step']:.0f} | "
            f"{r['runner_vs_default_wrappers']:+.1%} | "
            f"{r['runner_worker_proxy_steps_per_s']:.0f} |"
        )
    p = result["parallel"]
    lines += [
        "",
        f"**All games: runner overhead vs raw {result['runner_overhead_total']:+.1%}** "
        f"(runner {total_runner:.2f} s vs raw {total_raw:.2f} s).",
        "",
        f"Parallel: {p['episodes']} episodes of {p['env_id']}: 1 worker {p['one_worker_s']:.2f} s, "
        f"2 workers {p['two_workers_s']:.2f} s, **speed-up {p['speedup']:.2f}x** (worker start-up included); "
        f"with warm workers (an executor kept across calls): 1 worker {p['warm_one_worker_s']:.2f} s, "
        f"2 workers {p['warm_two_workers_s']:.2f} s, **speed-up {p['warm_speedup']:.2f}x**.",
    ]
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
