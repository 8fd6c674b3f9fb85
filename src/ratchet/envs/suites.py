"""A stratified sample of the paper's 145 games, for a suite run that fits where the whole one does
not: ``autoharness-40``.

Strata are (family, player count): the family of a game is its base game's
(``data/autoharness-families.txt``: six families by what a move is — puzzle, deduction, chance,
line, board, strategy), its base the id before ``-v0`` (``2048-v0-easy`` is 2048's). Each stratum
gets a share of the sample proportional to its size (largest remainders), at least one game, and at
least the required games it holds (the 15 games of the per-game table). The rest of a stratum's
share is drawn with a seeded RNG, base games not yet in the sample first, then their variants. The
draw is deterministic: ``data/autoharness-40.txt`` is its output (a test checks they agree).

Order, which is the order a suite run plays them in: the ``first`` games (the table games a change
is meant to fix), then the drawn games round-robin over the strata (so a run cut short still covers
every stratum), then the other required games (they have per-game table rows already).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources

from ratchet.contracts import RatchetError

#: The per-game table's games (``bench/autoharness_table.py``'s default list).
TABLE_GAMES = ("TowerOfHanoi-v0", "FrozenLake-v0", "GuessTheNumber-v0", "Mastermind-v0", "LightsOut-v0", "Minesweeper-v0",
               "2048-v0", "Bandit-v0", "Blackjack-v0", "FifteenPuzzle-v0", "TicTacToe-v0", "ConnectFour-v0", "Othello-v0",
               "Chopsticks-v0", "Breakthrough-v0-small")
#: The three table games that fell when their boards got full legal lists (played first).
FIRST = ("TowerOfHanoi-v0", "GuessTheNumber-v0", "LightsOut-v0")
SEED = "autoharness-40"


def base_game(env_id: str) -> str:
    """The game an id is a variant of: ``2048-v0-easy`` → ``2048``."""
    return env_id.split("-v0")[0]


@lru_cache(maxsize=1)
def families() -> dict[str, str]:
    """Family of each base game of the paper's 145."""
    text = resources.files("ratchet.envs").joinpath("data/autoharness-families.txt").read_text()
    return dict(line.split() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def family(env_id: str) -> str:
    try:
        return families()[base_game(env_id)]
    except KeyError:
        raise RatchetError(f"no family for {env_id!r}", hint="add its base game to ratchet/envs/data/autoharness-families.txt") from None


def stratified_sample(games: Sequence[tuple[str, int]], n: int, required: Sequence[str] = (), first: Sequence[str] = (),
                      seed: str = SEED) -> list[str]:
    """``n`` ids of ``games`` ((id, players) pairs), stratified by (family, players); see the module."""
    strata: dict[tuple[str, int], list[str]] = {}
    for env_id, players in games:
        strata.setdefault((family(env_id), players), []).append(env_id)
    missing = [g for g in required if not any(g in ids for ids in strata.values())]
    if missing or n < len(strata) or n > len(games):
        raise RatchetError(f"cannot draw {n} of {len(games)} games over {len(strata)} strata" + (f" (not in the list: {missing})" if missing else ""),
                           hint="ask for at least one game a stratum and no more games than the list has")
    need = {k: max(1, sum(g in ids for g in required)) for k, ids in strata.items()}
    exact = {k: len(ids) * n / len(games) for k, ids in strata.items()}
    share = {k: max(need[k], int(exact[k])) for k in strata}
    while sum(share.values()) < n:  # largest remainders first
        k = max((k for k in strata if share[k] < len(strata[k])), key=lambda k: (exact[k] - share[k], k))
        share[k] += 1
    while sum(share.values()) > n:  # the most over-served stratum that can give one back
        k = max((k for k in strata if share[k] > need[k]), key=lambda k: (share[k] - exact[k], k))
        share[k] -= 1
    rng = random.Random(seed)
    drawn: dict[tuple[str, int], list[str]] = {}
    for k in sorted(strata):
        chosen = [g for g in strata[k] if g in required]
        rest = [g for g in strata[k] if g not in required]
        rng.shuffle(rest)
        rest.sort(key=lambda g: base_game(g) in {base_game(c) for c in chosen})  # new base games first (stable)
        while len(chosen) < share[k]:
            pick = next(g for g in rest if base_game(g) not in {base_game(c) for c in chosen}) if any(
                base_game(g) not in {base_game(c) for c in chosen} for g in rest) else rest[0]
            rest.remove(pick)
            chosen.append(pick)
        drawn[k] = [g for g in chosen if g not in required]
    order = [g for g in first if g in required]
    queues = [list(drawn[k]) for k in sorted(drawn)]
    while any(queues):
        order += [q.pop(0) for q in queues if q]
    return order + [g for g in required if g not in order]


def suite_file(name: str) -> list[str]:
    """The ids of a sampled suite's data file (``data/NAME.txt``: id, players, family)."""
    text = resources.files("ratchet.envs").joinpath(f"data/{name}.txt").read_text()
    return [line.split()[0] for line in text.splitlines() if line.strip() and not line.startswith("#")]


if __name__ == "__main__":  # writes data/autoharness-40.txt's content
    from ratchet.envs.registry import paper_players

    players = paper_players()
    path = resources.files("ratchet.envs").joinpath("data/autoharness-40.txt")
    print("".join(line + "\n" for line in path.read_text().splitlines() if line.startswith("#")), end="")
    for env_id in stratified_sample(list(players.items()), 40, TABLE_GAMES, FIRST):
        print(env_id, players[env_id], family(env_id))
