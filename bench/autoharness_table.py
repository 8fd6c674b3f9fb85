"""AutoHarness per-game table: the evaluation protocol on a list of games, with and without the
synthesized harness, same model, held-out seeds.

    python -m bench.autoharness_table --protocol-last --protocol-set legal_seeds=2 legal_steps=5 \
        reward_games=1 matches=2 step_cap=10                                      # the committed table
    python -m bench.autoharness_table --games TicTacToe-v0 --protocol full        # the paper's sizes

Writes bench/results/autoharness_table.json and .md after every game (a killed run keeps what it
finished; ``--resume`` skips games already in the JSON, ``--redo GAME...`` runs those again and replaces
their rows). Each game gets its own run in the store.

    python -m bench.autoharness_table --resume --redo TowerOfHanoi-v0 --threads 1 \
        --store runs/autoharness-table-1.5b --library runs/autoharness-table-1.5b/library \
        --protocol-set legal_seeds=2 legal_steps=5 reward_games=1 matches=2 step_cap=10   # one game, in its own chunk
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from bench._results import RESULTS, write_json, write_markdown

TITLE = "AutoHarness per-game table"

ONE_PLAYER = ["TowerOfHanoi-v0", "FrozenLake-v0", "GuessTheNumber-v0", "Mastermind-v0", "LightsOut-v0", "Minesweeper-v0",
              "2048-v0", "Bandit-v0", "Blackjack-v0", "FifteenPuzzle-v0", "PegJump-v0", "RushHour-v0"]
TWO_PLAYER = ["TicTacToe-v0", "ConnectFour-v0", "Othello-v0", "Chopsticks-v0", "Breakthrough-v0-small", "Alquerque-v0"]

GATE_NOTE = ("held-out check = the adoption gate: 'adopted' if the legal rate and the reward after are each no lower than "
             "before, else 'rejected' (the harness is then kept out of the library and not exported)")
QUICK = ["legal_seeds=1", "legal_steps=6", "reward_games=1", "matches=2", "step_cap=12", "play_max_tokens=64", "retries=1"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.autoharness_table", description=__doc__)
    parser.add_argument("--model", default="local:qwen2.5-coder-1.5b")
    parser.add_argument("--games", nargs="*", default=ONE_PLAYER[:10] + TWO_PLAYER[:5])
    parser.add_argument("--method", default="ratchet")
    parser.add_argument("--mode", default="verifier")
    parser.add_argument("--max-calls", type=int, default=24, help="refiner calls per game")
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--search-seconds", type=float, default=420.0, help="wall-time budget of one game's search")
    parser.add_argument("--protocol", choices=["full", "quick"], default="quick")
    parser.add_argument("--protocol-set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="protocol settings over the chosen sizes, e.g. legal_seeds=2 legal_steps=5")
    parser.add_argument("--protocol-games", nargs="*", default=None,
                        help="games that get the LLM protocol (before/after); default all. The harness-alone check runs for every game")
    parser.add_argument("--protocol-last", action="store_true",
                        help="search (and check the code alone) on every game first, then run the slower LLM protocol game by "
                             "game in what time is left; a game the second pass does not reach keeps '–' in its before/after columns")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--name", default="autoharness_table")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--redo", nargs="*", default=[], metavar="GAME",
                        help="with --resume: games run again (their rows replaced, and marked with the code they ran on)")
    parser.add_argument("--rewrite", action="store_true",
                        help="only write NAME.md again from the rows stored in NAME.json (after the table's columns change)")
    parser.add_argument("--store", default=None, help="run store root (default: the user's store)")
    parser.add_argument("--library", default=None, help="harness library dir (default: a fresh one, so games seed only from this table's earlier games)")
    args = parser.parse_args(argv)

    from ratchet.autoharness.config import AutoHarnessConfig
    from ratchet.autoharness.engine import synthesize_on_engine
    from ratchet.autoharness.pipeline import accounted, open_or_create
    from ratchet.models import load_model
    from ratchet.envs.harness.protocol import ProtocolConfig
    from ratchet.autoharness.report import markdown_table
    from ratchet.config import load_config
    from ratchet.store import RunStore

    out_json = RESULTS / f"{args.name}.json"
    if args.rewrite:
        stored = json.loads(out_json.read_text())
        notes = stored["notes"] + ([GATE_NOTE] if GATE_NOTE not in stored["notes"] else [])
        write_markdown(args.name, markdown_table(stored["games"], TITLE, notes))
        return 0
    protocol = load_config(ProtocolConfig, None, ([] if args.protocol == "full" else QUICK) + args.protocol_set)
    model = load_model(args.model, threads=args.threads)
    store = RunStore(args.store)
    library = args.library or tempfile.mkdtemp(prefix="ratchet-harness-library-")
    done: dict[str, dict] = {}
    if args.resume and out_json.exists():
        done = {r["env"]: r for r in json.loads(out_json.read_text())["games"] if r.get("status") != "not run" and r["env"] not in args.redo}
    settings = {
        "model": args.model, "method": args.method, "mode": args.mode, "max_calls": args.max_calls,
        "iterations": args.iterations, "search_seconds": args.search_seconds, "protocol": protocol.model_dump(),
    }
    notes = [
        f"model {args.model} (refiner and player), method {args.method}, mode {args.mode}",
        f"search budget per game: {args.max_calls} refiner calls, {args.iterations} iterations, {args.search_seconds:.0f} s; "
        "search on seeds 0-9, evaluation on held-out seeds 1000+",
        f"protocol ({args.protocol}): legal rate over {protocol.legal_seeds} seeds x {protocol.legal_steps} LLM steps "
        f"(paper: 10 x 1000); 1P reward over {protocol.reward_games} games, 2P win rate over {protocol.matches} matches vs a "
        f"random-legal opponent, seats alternated (paper: 20 / 40); games cut at {protocol.step_cap} steps; "
        f"play answers capped at {protocol.play_max_tokens} tokens",
        "before = the same model with no harness; after = model + synthesized verifier (re-prompt, then fall back to the harness's propose_action)",
        "harness alone = the synthesized code with no LLM on 5 held-out seeds x 200 steps (legal rate), and its is_legal_action "
        "on transitions harvested from those seeds (accuracy)",
        GATE_NOTE,
    ]
    if args.protocol_games is not None:
        notes.append("LLM protocol (before/after columns) run only for: " + ", ".join(args.protocol_games) + "; '–' elsewhere")
    if args.protocol_last:
        notes.append("LLM protocol (before/after) run after every game's search, game by game in table order, in the time "
                     "left; '–' where the run ended first")
    if args.redo and out_json.exists():  # the first run's notes describe its rows; reruns add their own line
        notes = [n for n in json.loads(out_json.read_text())["notes"] if not n.startswith("rows run again")]
    commit = _commit()  # at the start: a commit made while the run goes on is not the code it runs
    rows: list[dict] = []
    for env_id in args.games:
        if env_id in done:
            rows.append(done[env_id])
            continue
        started = time.perf_counter()
        cfg = AutoHarnessConfig(env=env_id, mode=args.mode, method=args.method, model=args.model, iterations=args.iterations,
                                eval_steps=40, library_dir=library)
        cfg.budget.max_calls = args.max_calls
        cfg.budget.max_wall_s = args.search_seconds
        try:
            run, cfg = open_or_create(store, cfg, None, f"bench-{env_id}")
            print(f"[{time.strftime('%H:%M:%S')}] {env_id}: run {run.id}", flush=True)
            with_llm = (args.protocol_games is None or env_id in args.protocol_games) and not args.protocol_last
            report = synthesize_on_engine(cfg, model, run, protocol=protocol if with_llm else None,
                                          play_model=accounted(model, run, "autoharness.heldout"),
                                          on_phase=lambda p: print(f"  phase {p}", flush=True))
        except Exception as exc:  # record and continue: one broken game must not end the table
            report = {"env": env_id, "status": "not run", "reason": f"{type(exc).__name__}: {exc}"[:160]}
        report["bench_wall_s"] = round(time.perf_counter() - started, 1)
        if env_id in args.redo:
            report["rerun"] = f"{time.strftime('%Y-%m-%d', time.gmtime())} at {commit}"
        rows.append(report)
        _write(args.name, results(settings, notes, rows, args.games), markdown_table)
        print(f"  done in {report['bench_wall_s']} s: {json.dumps(report.get('search'))}", flush=True)
    _write(args.name, results(settings, notes, rows, args.games), markdown_table)
    if args.protocol_last:
        _protocol_pass(args, store, model, protocol, rows,
                       lambda: _write(args.name, results(settings, notes, rows, args.games), markdown_table))
    return 0


def _protocol_pass(args, store, model, protocol, rows: list[dict], save) -> None:
    """Second pass of ``--protocol-last``: the LLM protocol on each searched game, saving after each."""
    from ratchet.autoharness.config import AutoHarnessConfig
    from ratchet.autoharness.heldout import judge, keep_in_library
    from ratchet.envs.harness.protocol import play_protocol, protocol_sides
    from ratchet.autoharness.library import HarnessLibrary
    from ratchet.autoharness.pipeline import best_code
    from ratchet.envs.harness.runtime import sandbox_runtime_factory

    for row in rows:
        wanted = args.protocol_games is None or row["env"] in args.protocol_games
        if not wanted or row.get("status") == "not run" or row.get("before") or not row.get("run_id"):
            continue
        started = time.perf_counter()
        try:
            run = store.open_run(row["run_id"])
            cfg = AutoHarnessConfig.model_validate((run.read_json("run.json") or {})["config"])
            code, provenance = best_code(run)
            print(f"[{time.strftime('%H:%M:%S')}] protocol {row['env']}", flush=True)
            evaluation = play_protocol(run, code, model, cfg.env, cfg.mode, cfg.heldout_seeds, protocol,
                                       sandbox_runtime_factory(cfg.call_timeout_s), on_phase=lambda p: print(f"  phase {p}", flush=True))
            row.update(protocol_sides(evaluation))
            row["players"] = row.get("players") or evaluation.get("players")
            # The verdict on the sides just measured; a harness kept unchecked and now rejected leaves the library.
            row["adoption"] = verdict = judge(row.get("before"), row.get("after"), cfg.adoption)
            run.write_json("report.json", row)
            keep_in_library(HarnessLibrary(cfg.library_dir), verdict, cfg.env, cfg.mode, code, (row.get("search") or {}).get("best_h") or 0.0,
                            gate=cfg.adoption.gate, run_id=run.id, candidate_id=provenance["candidate_id"],
                            model=row.get("model"), method=cfg.method)
        except Exception as exc:  # one broken game must not end the pass
            row["protocol_error"] = f"{type(exc).__name__}: {exc}"[:160]
        row["protocol_wall_s"] = round(time.perf_counter() - started, 1)
        save()


def _commit() -> str:
    """The commit the code ran on (a rerun row says which code made it)."""
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent)
    return found.stdout.strip() or "unknown"


def results(settings: dict, notes: list[str], rows: list[dict], games: list[str]) -> dict:
    """What NAME.json holds: the settings, the notes (and a line naming the rows run again, where
    any were) and the rows, then a 'not run' row for each of ``games`` that no row covers yet."""
    finished = {r["env"] for r in rows}
    reruns = [f"{r['env']} ({r['rerun']})" for r in rows if r.get("rerun")]
    if reruns:  # the other rows are from the first run, on older code
        notes = [*notes, "rows run again on newer code: " + ", ".join(reruns) + " (the same search budget; the LLM protocol "
                 "only where before/after are filled); every other row is from the first run"]
    pending = [{"env": g, "status": "not run", "reason": "not reached in the time available"} for g in games if g not in finished]
    return {"settings": settings, "notes": notes, "games": rows + pending}


def _write(name: str, data: dict, table, out: Path = RESULTS) -> None:
    write_json(name, data, out=out)
    write_markdown(name, table(data["games"], TITLE, data["notes"]), out=out)


if __name__ == "__main__":
    raise SystemExit(main())
