"""Legal moves from the games' own rules: the random-legal player never plays an illegal move.

Every game family with a rule in :mod:`ratchet.envs.legal` is played for a few seeded episodes by
the random-legal player on both seats; each move must be accepted, every move must come from the
rule, and at sampled positions every listed move must pass the game's own step on a copy.
"""

from __future__ import annotations

import itertools

import pytest

from ratchet.contracts import Observation
from ratchet.envs import EnvConfig, make, suite_ids
from ratchet.envs.agents import RandomLegalAgent
from ratchet.envs.legal import RULES, kind, legal_moves, support
from ratchet.envs.notes import family_of

#: One id per family with a rule (plus variants that change the board or the rules), in this process.
LOCAL = [
    "SantoriniBaseFixed-v0", "Alquerque-v0", "2048-v0-mega-easy", "Bandit-v0-hard", "Battleship-v0-large", "Blackjack-v0",
    "Breakthrough-v0-small", "Breakthrough-v0-large", "Briscola-v0", "Chopsticks-v0", "ColonelBlotto-v0-large",
    "ConnectFour-v0-large", "Cryptarithm-v0", "GameOfPureStrategy-v0", "GermanWhist-v0", "Golf-v0-medium",
    "GuessTheNumber-v0-hardcore", "HighSociety-v0", "IteratedMatchingPennies-v0", "IteratedRockPaperScissors-v0",
    "IteratedTwoThirdsAverage-v0", "LiarsDice-v0-small", "LightsOut-v0", "LinesOfAction-v0", "Mastermind-v0-extreme",
    "MemoryGame-v0", "Minesweeper-v0-small", "NewRecruit-v0", "Nim-v0-large", "Othello-v0-hard", "Othello-v0-tiny",
    "PegJump-v0", "Poker-v0-small", "QuantumTicTacToe-v0", "RushHour-v0", "Secretary-v0", "Snake-v0-standard",
    "Sudoku-v0-easy", "Surround-v0", "Tak-v0-medium", "TowerOfHanoi-v0-hard", "UltimateTicTacToe-v0",
]
#: Games whose Python >= 3.12 syntax puts them in the worker process.
REMOTE = ["Chess-v0-blind", "Checkers-v0"]
#: Where a probe is not a legality test: mines are "invalid" (they lose), and Snake / Surround kill
#: on an unknown word instead of calling set_invalid_move.
PROBE_DIFFERS = {"Minesweeper", "Snake", "Surround"}


def play(env_id: str, seeds: tuple[int, ...] = (0, 1), max_steps: int = 30, check_every: int = 6) -> int:
    """Random-legal self-play; asserts every move legal and from the rules. Returns steps played."""
    env = make(env_id, EnvConfig(max_steps=max_steps))
    steps = 0
    try:
        for seed in seeds:
            agent = RandomLegalAgent(seed)
            agent.bind(env)
            agent.reset(seed)
            obs = env.reset(seed)
            for step in range(max_steps):
                if step % check_every == 0 and family_of(env_id) not in PROBE_DIFFERS:
                    listed = env.legal_moves(seed)
                    assert listed, (env_id, seed, step, "no legal move listed mid-game")
                    bad = [m for m in listed[:25] if not env.probe(m)]
                    assert not bad, (env_id, seed, step, bad)
                action = agent.act(obs)
                assert agent.last_info["source"] == "rules", (env_id, agent.last_info)
                result = env.step(action)
                steps += 1
                assert result.legal or result.losing_not_illegal, (env_id, seed, step, action, result.illegal_reason)
                if result.done:
                    break
                obs = result.observation
    finally:
        env.close()
    return steps


@pytest.mark.parametrize("env_id", LOCAL)
def test_random_legal_plays_only_legal_moves(env_id: str) -> None:
    assert play(env_id) >= 2


@pytest.mark.parametrize("env_id", REMOTE)
def test_random_legal_plays_only_legal_moves_in_the_312_worker(env_id: str, py312: str) -> None:
    assert play(env_id) >= 2


def test_every_rule_family_is_played_above() -> None:
    played = {family_of(i) for i in LOCAL + REMOTE}
    assert set(RULES) <= played, sorted(set(RULES) - played)


def test_santorini_lists_the_moves_of_the_player_to_move() -> None:
    # The game's prompt lists player 0's opening moves to both seats; the rule follows the seat.
    env = make("SantoriniBaseFixed-v0")
    env.reset(0)
    first = env.legal_moves()
    assert first and all(m.startswith("[N") for m in first)
    assert env.step(first[0]).legal
    second = env.legal_moves()
    assert second and all(m.startswith("[W") for m in second)
    assert all(env.probe(m) for m in second[:30])


def _complete(env_id: str, space: list[str], seed: int = 3, moves: int = 6) -> None:
    """The rule's list equals every action of ``space`` the game accepts, along a short game."""
    env = make(env_id)
    agent = RandomLegalAgent(seed)
    agent.bind(env)
    obs = env.reset(seed)
    for _ in range(moves):
        accepted = {a for a in space if env.probe(a)}
        assert set(env.legal_moves()) == accepted, env_id
        result = env.step(agent.act(obs))
        if result.done:
            break
        obs = result.observation


def test_exact_rules_list_every_accepted_move() -> None:
    squares = [f"{f}{r}" for f in "abcdefgh" for r in range(1, 9)]
    _complete("LinesOfAction-v0", [f"[{a}{b}]" for a, b in itertools.permutations(squares, 2)], moves=3)
    _complete("Breakthrough-v0-small", [f"[{a}{b}]" for a, b in itertools.permutations(
        [f"{f}{r}" for f in "abcdef" for r in range(1, 7)], 2)])
    _complete("Nim-v0", [f"[{p} {q}]" for p in range(4) for q in range(9)])
    _complete("ConnectFour-v0", [f"[col {c}]" for c in range(9)])
    _complete("QuantumTicTacToe-v0", [f"[{a},{b}]" for a, b in itertools.combinations(range(9), 2)])
    _complete("Alquerque-v0", [f"[{a} {b}]" for a, b in itertools.permutations(
        [f"{f}{r}" for f in "abcde" for r in range(1, 6)], 2)])


def test_computing_moves_leaves_the_game_and_its_random_stream_alone() -> None:
    def observations(ask: bool) -> list[str]:
        env = make("LiarsDice-v0")  # re-rolls dice with the game's random stream after each call
        agent = RandomLegalAgent(5)
        agent.bind(env)
        obs = env.reset(5)
        seen = [obs.text]
        for _ in range(20):
            action = agent.act(obs)
            if ask:
                for s in range(3):
                    env.legal_moves(s)
                    env.probe(action)
            result = env.step(action)
            if result.done:
                break
            obs = result.observation
            seen.append(obs.text)
        return seen

    assert observations(False) == observations(True)


def test_support_flags_every_paper_game_and_says_when_moves_are_guessed() -> None:
    ids = suite_ids("autoharness-145")
    flags = {i: support(i) for i in ids}
    assert set(flags.values()) <= {"rules", "listed"}, [i for i, f in flags.items() if f == "none"]
    assert flags["SantoriniBaseFixed-v0"] == "rules" and flags["TicTacToe-v0"] == "listed"
    assert kind("ColonelBlotto-v0") == "subset" and kind("Golf-v0") == "filtered" and kind("Chess-v0") == "exact"
    assert support("ThreeCardMonte-v0") == "none" and legal_moves("ThreeCardMonte-v0", object()) is None


def test_random_legal_says_when_it_guesses() -> None:
    env = make("ThreeCardMonte-v0")  # not a paper game: no rule, and it prints no move list
    agent = RandomLegalAgent(0)
    agent.bind(env)
    agent.act(env.reset(0))
    assert agent.last_info["source"] == "guess"
    unbound = RandomLegalAgent(0)
    unbound.act(Observation(0, "pick [a] or [b]"))
    assert unbound.last_info["source"] == "guess"
