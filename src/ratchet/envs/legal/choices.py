"""Bids, allocations, proposals and simultaneous choices (TextArena 0.7.4 field names)."""

from __future__ import annotations

import random
from typing import Any

from ratchet.envs.legal import rule


def _player(env: Any) -> int:
    return int(env.state.current_player_id)


@rule("Nim")
def nim(env: Any, rng: random.Random) -> list[str]:
    piles = env.state.game_state["piles"]
    return [f"[{i} {q}]" for i, size in enumerate(piles) for q in range(1, size + 1)]


@rule("Chopsticks", kind="subset", note="splits into hands of more than four fingers are accepted but not listed")
def chopsticks(env: Any, rng: random.Random) -> list[str]:
    hands = env.state.game_state["hands"]
    mine, theirs = hands[_player(env)], hands[1 - _player(env)]
    moves = [f"[attack {m} {o}]" for m in (0, 1) for o in (0, 1) if mine[m] and theirs[o]]
    total = sum(mine)
    moves += [f"[split {left} {total - left}]" for left in range(total + 1)
              if [left, total - left] != list(mine) and max(left, total - left) <= 4]
    return moves


@rule("ColonelBlotto", kind="subset", note="a uniform random sample of the allocations")
def colonel_blotto(env: Any, rng: random.Random) -> list[str]:
    fields, units = env.field_names, env.num_total_units
    out = []
    for _ in range(32):  # stars and bars: a uniform draw among all allocations of `units`
        bars = sorted(rng.sample(range(units + len(fields) - 1), len(fields) - 1))
        edges = [-1, *bars, units + len(fields) - 1]
        counts = [edges[i + 1] - edges[i] - 1 for i in range(len(fields))]
        out.append("[" + " ".join(f"{f}{n}" for f, n in zip(fields, counts)) + "]")
    return out


@rule("NewRecruit", kind="subset", note="accept / reject when a proposal stands, and a random sample of proposals")
def new_recruit(env: Any, rng: random.Random) -> list[str]:
    moves = ["[Accept]", "[Reject]"] if env.state.game_state["current_proposal"] else []
    moves += ["[Propose] " + "".join(rng.choice("ABCDE") for _ in range(8)) for _ in range(16)]
    return moves


@rule("GameOfPureStrategy")
def pure_strategy(env: Any, rng: random.Random) -> list[str]:
    return [f"[{env._val_to_face(v)}]" for v in env.state.game_state["player_hands"][_player(env)]]


@rule("HighSociety")
def high_society(env: Any, rng: random.Random) -> list[str]:
    return [f"[{v}]" for v in env.state.game_state["player_money"][_player(env)]]


@rule("IteratedMatchingPennies")
def matching_pennies(env: Any, rng: random.Random) -> list[str]:
    return ["[heads]", "[tails]"]


@rule("IteratedRockPaperScissors")
def rock_paper_scissors(env: Any, rng: random.Random) -> list[str]:
    return ["[rock]", "[paper]", "[scissors]"]


@rule("IteratedTwoThirdsAverage", kind="subset", note="whole numbers only")
def two_thirds_average(env: Any, rng: random.Random) -> list[str]:
    low, high = int(-(-env.min_guess // 1)), int(env.max_guess // 1)
    return [f"[{n}]" for n in range(low, high + 1)]


@rule("LiarsDice", kind="subset", note="bids up to the number of dice in play (higher ones are accepted but not listed)")
def liars_dice(env: Any, rng: random.Random) -> list[str]:
    gs = env.state.game_state
    current = gs["current_bid"]
    in_play = sum(gs["remaining_dice"].values())
    moves = ["[Call]"] if gs["last_bidder_id"] is not None and current["quantity"] > 0 else []
    for quantity in range(max(current["quantity"], 1), max(in_play, current["quantity"] + 1) + 1):
        for face in range(max(current["face_value"], 1), 7):
            if env._is_valid_bid(quantity, face, current)[0]:
                moves.append(f"[Bid: {quantity}, {face}]")
    return moves


@rule("MemoryGame")
def memory_game(env: Any, rng: random.Random) -> list[str]:
    n = env.grid_size
    matched = env.state.game_state["matched_positions"]
    cells = [(r, c) for r in range(n) for c in range(n) if (r, c) not in matched]
    return [f"[{a[0]} {a[1]} {b[0]} {b[1]}]" for i, a in enumerate(cells) for b in cells[i + 1:]]
