"""Card games: legal plays from the hands in ``state.game_state`` (TextArena 0.7.4 field names)."""

from __future__ import annotations

import random
from typing import Any

from ratchet.envs.legal import rule


def _hand(env: Any) -> list[dict[str, Any]]:
    return env.state.game_state["players"][env.state.current_player_id]["hand"]


@rule("Briscola")
def briscola(env: Any, rng: random.Random) -> list[str]:
    # Any card of the hand, by 1-based position; Briscola has no duty to follow suit.
    return [f"[play {i + 1}]" for i in range(len(_hand(env)))]


@rule("GermanWhist")
def german_whist(env: Any, rng: random.Random) -> list[str]:
    hand = _hand(env)
    return [f"[play {i + 1}]" for i, card in enumerate(hand) if env._is_valid_play(env.state.current_player_id, card)]


@rule("Golf", kind="filtered")
def golf(env: Any, rng: random.Random) -> list[str]:
    # Which command fits depends on the turn phase, the discard pile and the knock state; the game's
    # own step (on a copy) decides among this complete list.
    cells = [(r, c) for r in range(1, env.num_rows + 1) for c in range(1, env.num_columns + 1)]
    return (["[draw]", "[take]", "[discard]", "[knock]"] + [f"[swap {r} {c}]" for r, c in cells]
            + [f"[peek {r} {c}]" for r, c in cells])


@rule("Poker", kind="filtered", note="bets and raises of a few sizes (half, one and two pots, all-in), not every amount")
def poker(env: Any, rng: random.Random) -> list[str]:
    gs = env.state.game_state
    chips = int(gs["player_chips"][env.state.current_player_id])
    pot = max(int(gs["pot"]), 1)
    sizes = sorted({s for s in (1, pot // 2, pot, 2 * pot, chips) if 0 < s <= max(chips, 1)})
    return ["[check]", "[call]", "[fold]"] + [f"[bet {s}]" for s in sizes] + [f"[raise {s}]" for s in sizes]
