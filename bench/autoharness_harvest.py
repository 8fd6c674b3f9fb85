"""What exploring a game finds before any model call: labelled legal and illegal transitions, and
the states whose full legal list is known, with the game's printed legal lists and without them.

"printed lists" is the search's setting (a hint-keeping twin of the env gives the lists the game
prints); "grammar only" hides them, as for a game that prints none: the action grammar read from
the rules and error messages (``envs/grammar.py``) is enumerated instead, every action tried where
it allows at most 100. Baseline of the same run: the vocabulary alone (bracketed tokens and their
variants, the harvest before the grammar), from the same seeds.

    python -m bench.autoharness_harvest
    python -m bench.autoharness_harvest --games TicTacToe-v0 Nim-v0

No model is loaded. Writes bench/results/autoharness_harvest.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from bench._results import RESULTS, write_json, write_markdown

NAME = "autoharness_harvest"
#: The per-game table's games (bench/autoharness_table.py), one family each, and Nim (piles, 2 players).
GAMES = ["TicTacToe-v0", "2048-v0", "Chopsticks-v0", "GuessTheNumber-v0", "Bandit-v0", "FrozenLake-v0", "Blackjack-v0",
         "Mastermind-v0", "Breakthrough-v0-small", "ConnectFour-v0", "TowerOfHanoi-v0", "FifteenPuzzle-v0", "LightsOut-v0",
         "Othello-v0", "Minesweeper-v0", "Nim-v0"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.autoharness_harvest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", nargs="*", default=GAMES)
    parser.add_argument("--seeds", type=int, default=10, help="search seeds 0..N-1")
    parser.add_argument("--per-seed", type=int, default=60, help="transitions per seed (the search's default)")
    args = parser.parse_args(argv)

    from ratchet.envs import env_factory_for
    from ratchet.envs.explore import harvest, listed_states
    from ratchet.envs.grammar import infer_grammar

    rows = []
    seeds = list(range(args.seeds))
    for env_id in args.games:
        stripped = env_factory_for(env_id)
        row: dict = {"env": env_id}
        try:
            rules = stripped().reset(0).text
            for label, hints, grammar in (("printed lists", env_factory_for(env_id, hints=True), True),
                                          ("grammar only", None, True), ("vocabulary only", None, False)):
                t0 = time.perf_counter()
                found = harvest(stripped, hints, seeds, args.per_seed, random.Random(0), use_grammar=grammar)
                row[label] = {"legal": sum(t.legal for t in found), "illegal": sum(not t.legal for t in found),
                              "listed_states": len(listed_states(found, limit=10_000)), "s": round(time.perf_counter() - t0, 1)}
            row["grammar"] = infer_grammar(rules).describe()
        except Exception as exc:  # noqa: BLE001 - a game that does not run here is a row saying why
            row["error"] = f"{type(exc).__name__}: {exc}"[:160]
        rows.append(row)
        print(json.dumps(row), flush=True)
        _write(rows, args)
    return 0


def _write(rows: list[dict], args, out: Path = RESULTS) -> None:
    data = {"seeds": args.seeds, "per_seed": args.per_seed, "rows": rows}
    write_json(NAME, data, out=out)
    write_markdown(NAME, markdown(data), out=out)


def markdown(data: dict) -> str:
    """The table for people, from the results' JSON (``seeds``, ``per_seed``, ``rows``)."""
    cell = lambda r, k: (f"{r[k]['legal']} / {r[k]['illegal']} / {r[k]['listed_states']}" if k in r else "–")  # noqa: E731
    lines = [f"# Labelled transitions found by exploring, seeds 0-{data['seeds'] - 1}, {data['per_seed']} per seed, no model",
             "", "Each cell: legal / illegal transitions / states with a full legal list. 'printed lists': the game's own",
             "lists (the search's setting); 'grammar only': no printed list, the action grammar enumerated (every action",
             "tried where it allows at most 100); 'vocabulary only': no list and no grammar (bracketed tokens seen and",
             "their variants: the harvest before the grammar existed).", "",
             "| game | printed lists | grammar only | vocabulary only | grammar read from the rules |", "|---|---|---|---|---|"]
    for r in data["rows"]:
        if "error" in r:
            lines.append(f"| {r['env']} | {r['error']} | | | |")
            continue
        lines.append(f"| {r['env']} | {cell(r, 'printed lists')} | {cell(r, 'grammar only')} | {cell(r, 'vocabulary only')} | "
                     f"`{r['grammar']}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
