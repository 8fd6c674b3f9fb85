"""How often the random-legal opponent's moves are legal, on each of the paper's 145 games.

Code only, no LLM. Per game: a few seeded episodes through ``run_rollouts`` with the random-legal
player on both seats, and where its moves come from (:func:`ratchet.envs.legal.support`): computed
from the game's own rules, the list the game prints, or guesses. Writes
``bench/results/envs_random_legal.{json,md}``.

    python -m bench.envs_random_legal [--seeds 3] [--max-steps 30]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bench._results import write_json, write_markdown


def _coverage_one(job: tuple[str, int, int]) -> dict:
    from ratchet.envs import EnvConfig, make
    from ratchet.envs.agents import AgentSpec
    from ratchet.envs.legal import kind, support
    from ratchet.envs.runner import RolloutConfig, run_rollouts

    env_id, seeds, max_steps = job
    env = make(env_id, EnvConfig())
    env.reset(0)
    listed = bool(env.legal_moves_hint())
    env.close()
    row = {"env_id": env_id, "moves_from": support(env_id), "rule_kind": kind(env_id), "lists_moves": listed}
    start = time.perf_counter()
    config = RolloutConfig(workers=1, opponent="self", env={"max_steps": max_steps})
    try:
        report = run_rollouts(env_id, AgentSpec("random-legal"), list(range(seeds)), config)
        steps = report.agent_steps
        illegal = sum(report.illegal_reasons.values())
        reasons = [r for r, _ in report.illegal_reasons.most_common(2)]
    except Exception as exc:  # noqa: BLE001 - a game that cannot be replayed is a row, not a crash
        row.update({"legal_rate": None, "steps": 0, "illegal": None, "error": f"{type(exc).__name__}: {exc}"[:160]})
    else:
        row.update({"legal_rate": report.legal_rate, "steps": steps, "illegal": illegal,
                    "reasons": reasons[:2]})
    row["s"] = time.perf_counter() - start
    return row


_FROM = {"rules": "rules ({kind})", "listed": "printed list", "none": "GUESSED"}


def coverage(out: str, seeds: int = 3, max_steps: int = 30, resume: list[str] | None = None) -> int:
    """How often the random-legal player's move is legal, per game (``seeds`` episodes of at most
    ``max_steps`` steps, both seats played by the player). ``resume``: JSON rows printed by an
    earlier run with the same settings; those games are not played again."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ratchet.envs import suite_ids

    done = {r["env_id"]: r for r in (json.loads(line) for line in resume or [])}
    rows = []
    jobs = [(env_id, seeds, max_steps) for env_id in suite_ids("autoharness-145") if env_id not in done]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")) as pool:
        for row in pool.map(_coverage_one, jobs):
            print(json.dumps(row), flush=True)
            rows.append(row)
    order = {env_id: i for i, env_id in enumerate(suite_ids("autoharness-145"))}
    rows = sorted([*done.values(), *rows], key=lambda r: order[r["env_id"]])
    write_json(out, rows, indent=1)
    exact = [r for r in rows if r["legal_rate"] == 1.0]
    by_source = {k: sum(r["moves_from"] == k for r in rows) for k in ("rules", "listed", "none")}
    lines = [
        "# Random-legal opponent: legal-move rate per game",
        "",
        (f"{seeds} episodes per game (seeds 0-{seeds - 1}), both seats played by the random-legal player, "
        f"at most {max_steps} steps each, one env per game reused across its episodes as the runner does."),
        (f"**{len(exact)}/{len(rows)} games: every move legal.** Moves from: `rules` = computed from the "
        f"game's own state and validators (`ratchet.envs.legal`; {by_source['rules']} games; kind `exact`: all "
        "legal moves, `subset`: only legal moves but not all, `filtered`: a complete superset narrowed by the "
        f"game's own step on a copy), `printed list` = the game prints its legal moves ({by_source['listed']} "
        f"games), `GUESSED` = neither: probed guesses that may be illegal ({by_source['none']} games)."),
        "",
        "| game | moves from | legal rate | agent steps | illegal | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        source = _FROM[r["moves_from"]].format(kind=r["rule_kind"])
        rate = "error" if r.get("error") else "—" if r["legal_rate"] is None else f"{r['legal_rate']:.2f}"
        note = r.get("error") or "; ".join(r.get("reasons") or [])
        lines.append(f"| {r['env_id']} | {source} | {rate} | {r['steps']} | {r['illegal'] if r['illegal'] is not None else '-'} | "
                     f"{note.replace('|', '/')[:120]} |")
    write_markdown(out, "\n".join(lines) + "\n")
    print("\n".join(lines[:5]))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.envs_random_legal", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="episodes per game")
    parser.add_argument("--max-steps", type=int, default=30, help="step cap per episode")
    parser.add_argument("--out", default="envs_random_legal")
    parser.add_argument("--resume", type=Path, help="a log of an interrupted run (its JSON lines are kept)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    resume = [line for line in args.resume.read_text().splitlines() if line.startswith("{")] if args.resume else None
    return coverage(args.out, args.seeds, args.max_steps, resume)


if __name__ == "__main__":
    raise SystemExit(main())
