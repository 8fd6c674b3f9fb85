"""What the search can reach with correct code: a hand-written right answer per game (the
``legal_moves`` a scaffolded request asks for, or a whole harness where the game gets no scaffold),
sent by the scripted model as the refiner's reply in a real run on the engine on the offline game.
(Results written before the engine was the one search ran the dedicated search, since removed.)

A game where even this stays below h = 1.0 cannot be solved by any model: the ceiling is in the
method (exploring, board reading, scoring), not in the refiner. No model is loaded.

    python -m bench.autoharness_ceiling
    python -m bench.autoharness_ceiling --games TowerOfHanoi-v0 Chopsticks-v0

Writes bench/results/autoharness_ceiling.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench._results import RESULTS, write_json, write_markdown

#: Right answers the offline tests send through the search too, kept once beside the tests' other data
#: (tests do not import bench/); read as text, the reply the scripted model gives.
SHARED = Path(__file__).resolve().parent.parent / "tests" / "autoharness" / "data"

#: The right answer per game, written from its rules text (not from the search's output).
ANSWERS = {
    # A grid game whose listed states show both players moving gets the mover's mark as ``player`` (views.py).
    "TicTacToe-v0": '''def legal_moves(cells, player=None):
    return [c for c in cells if c.isdigit()]
''',
    "ConnectFour-v0": '''def legal_moves(cells, player=None):
    return [c for c in range(7) if cells[7 + c] == "."]
''',
    "Othello-v0": (SHARED / "othello_legal_moves.py").read_text(),
    "LightsOut-v0": '''def legal_moves(cells):
    return [(r, c) for r in range(5) for c in range(5)]
''',
    "FrozenLake-v0": '''def legal_moves(cells):
    return ["up", "down", "left", "right", "w", "a", "s", "d"]
''',
    "FifteenPuzzle-v0": '''def legal_moves(cells):
    r, c = divmod(cells.index("__"), 4)
    return [m for m, ok in (("up", r < 3), ("down", r > 0), ("left", c < 3), ("right", c > 0)) if ok]
''',
    "Minesweeper-v0": '''def legal_moves(cells):
    rows = [cells[8 + 9 * r + 1 : 8 + 9 * r + 9] for r in range(8)]  # a header row, then a row label per row
    return [(r, c) for r in range(8) for c in range(8) if rows[r][c] == "."]
''',
    "TowerOfHanoi-v0": (SHARED / "hanoi_legal_moves.py").read_text(),
    "Chopsticks-v0": '''import re

def legal_moves(board):
    me = int(re.findall(r"You are Player (\\d)", board)[0])
    hands = {int(p): (int(a), int(b)) for p, a, b in re.findall(r"Player (\\d): \\[(\\d+), (\\d+)\\]", board)[-2:]}
    mine, theirs = hands[me], hands[1 - me]
    out = ["attack %d %d" % (m, o) for m in range(2) for o in range(2) if mine[m] > 0 and theirs[o] > 0]
    total = sum(mine)
    return out + ["split %d %d" % (l, total - l) for l in range(total + 1) if (l, total - l) != mine and l < 5 and total - l < 5]
''',
    "GuessTheNumber-v0": '''import re

def legal_moves(board):
    used = set(re.findall(r"\\[Player\\] \\[(\\d+)\\]", board))
    return [str(n) for n in range(1, 21) if str(n) not in used]
''',
    # No printed list and 1296 square pairs, too many to try whole: no scaffold, a whole harness.
    "Breakthrough-v0-small": '''import random
import re

def moves(board):
    me, other, step = ("W", "B", 1) if "playing White" in board else ("B", "W", -1)
    ranks = {int(n): row.split() for n, row in re.findall(r"^ *(\\d+) \\| (.*)$", board.split("[GAME]")[-1], re.M)}
    out = []
    for r, row in ranks.items():
        for c, piece in enumerate(row):
            if piece != me or r + step not in ranks:
                continue
            for dc in (-1, 0, 1):
                if 0 <= c + dc < len(row) and ranks[r + step][c + dc] == ("." if dc == 0 else other):
                    out.append("[%s%d%s%d]" % ("abcdefgh"[c], r, "abcdefgh"[c + dc], r + step))
    return out

def propose_action(board):
    return random.choice(moves(board))

def is_legal_action(board, action):
    return action.strip() in moves(board)
''',
    "Mastermind-v0": '''import random
import re
from harnesslib import action_ints

def is_legal_action(board, action):
    digits = action_ints(action)
    guessed = {tuple(int(d) for d in g.split()) for g in re.findall(r"\\[Player\\] \\[([\\d ]+)\\]", board)}
    return len(digits) == 4 and len(set(digits)) == 4 and all(1 <= d <= 6 for d in digits) and tuple(digits) not in guessed

def propose_action(board):
    while True:
        action = "[" + " ".join(str(d) for d in random.sample(range(1, 7), 4)) + "]"
        if is_legal_action(board, action):
            return action
''',
}


NOTES = """`autoharness_ceiling_before.md` is the same bench on the code before the board-reading fixes (commit e8c6208,
same answers, a separate run): Tower of Hanoi and Chopsticks were at h = 0.0 even with the right answer (exploring
found 3 and 0 legal moves: the boards' lists `A: [3, 2, 1]` were read as the action format and `[attack M O]`'s
M and O as letters, so no state got a full list and no scaffold was offered); Guess the Number stopped at
0.986 and Mastermind at 0.999 because the observation kept only the last 12 messages, hiding guesses the game
rejects as repeated. Lights Out's boards were read as "" (the header is "Current grid state (…):"); a constant
answer does not notice, code that reads the board did.

"board seen as" is what the scaffolded `legal_moves` is called with (`views.py`): `cells`, `text` (the
observation), or `cells+mover` (the cells and the mover's mark, for a grid game whose listed states show both
players moving). Othello needs the mover (which discs it flanks with); before it got one, no `legal_moves(cells)`
could be right for both colours. A mover with no move passes there (the game takes any action); the scaffold for
`cells+mover` proposes a placeholder action and accepts every action then, without which the right answer
stopped at 0.999 (one pass in 959 steps). Tic Tac Toe gets the mover too and ignores it; Connect Four's listed
states all come from one player (X), so it keeps `cells`.

Chopsticks' 0.99 on transitions is this answer's own error (the game accepts `[split 6 0]` on a total of 4),
not the method's. Breakthrough prints no list and its `[a2a3]` moves are 1296 square pairs, too many for the
grammar to try whole, so exploring finds few legal moves (6) and no state gets a full list: no scaffold, a whole
harness (which sees the observation, mover included). Its right answer stops at 0.999 because one random game
reaches a position where White has no move at all (every piece blocked), which no harness can play legally.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.autoharness_ceiling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", nargs="*", default=list(ANSWERS))
    parser.add_argument("--name", default="autoharness_ceiling")
    args = parser.parse_args(argv)

    from ratchet.autoharness.config import AutoHarnessConfig
    from ratchet.autoharness.engine import game_description, run_on_engine
    from ratchet.envs.harness.runtime import InProcessHarness
    from ratchet.evolve.archive import Archive
    from ratchet.models import ScriptedModel
    from ratchet.store import RunStore

    store = RunStore(tempfile.mkdtemp(prefix="ratchet-ceiling-"))
    rows = []
    for env_id in args.games:
        started = time.perf_counter()
        # the fitted rules off: they would solve some games before the answer is asked for; three
        # iterations, as the engine draws a proposer by weight each step and the refiner must be drawn
        cfg = AutoHarnessConfig(env=env_id, method="ratchet", model="scripted:", iterations=3,
                                library_dir=str(Path(store.root) / "lib" / env_id),
                                ideas={"samples_per_step": 1, "library_seed": False, "induce": False})
        cfg.budget.max_calls = 1  # the answer alone, and the no-model proposers' changes of it
        run = store.create_run("autoharness", cfg.model_dump(), f"ceiling-{env_id}")
        summary = run_on_engine(cfg, ScriptedModel(["```python\n" + ANSWERS[env_id] + "```"], cycle=True), run,
                                description=game_description(env_id), extra={"harness_runtime": InProcessHarness})
        archive = Archive(run)
        answered = [c for c in archive.candidates() if c.meta.get("proposer") == "harness_refiner"]
        best = (summary.get("report") or {}).get("best") or {}
        rows.append({"env": env_id, "path": "engine", "best_h": archive.score(best["id"], "heldin") if best else None,
                     "first_h": archive.score(answered[0].id, "heldin") if answered else None,
                     "best_by": archive.get(best["id"]).meta.get("proposer", "starting harness") if best else None,
                     "model_calls": summary.get("model_calls", 0), "s": round(time.perf_counter() - started, 1)})
        print(json.dumps(rows[-1]), flush=True)
        _write(args.name, rows)
    return 0


def _write(name: str, rows: list[dict], out: Path = RESULTS) -> None:
    write_json(name, {"rows": rows}, out=out)
    write_markdown(name, markdown(rows), out=out)


def markdown(rows: list[dict]) -> str:
    """The table for people, from the results' rows, then the notes on the games."""
    f = lambda v: "–" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = ["# AutoHarness ceiling: a right answer per game through a real run on the engine (scripted model, offline games)", "",
             "Held-in h of the answer itself built into the request's template (first h), and of the run's best harness (best h:",
             "the answer, or a no-model proposer's harness — fitted rules, autofix, a screened mutant — where one scored higher).", "",
             "| game | first h | best h | best written by | model calls | s |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['env']} | {f(r['first_h'])} | {f(r['best_h'])} | {r['best_by']} | {r['model_calls']} | {r['s']} |")
    return "\n".join(lines) + "\n\n" + NOTES


if __name__ == "__main__":
    sys.exit(main())
