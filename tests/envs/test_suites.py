"""The stratified 40-game sample of the paper's 145: the committed file is the draw, every stratum
(family, player count) is in it, and the per-game table's games are."""

from __future__ import annotations

from collections import Counter

from ratchet.envs import suite_ids
from ratchet.envs.registry import paper_players
from ratchet.envs.suites import FIRST, TABLE_GAMES, base_game, families, family, stratified_sample


def test_every_base_game_of_the_145_has_a_family():
    assert {base_game(g) for g in paper_players()} == set(families())


def test_the_committed_suite_is_the_deterministic_draw():
    players = paper_players()
    drawn = stratified_sample(list(players.items()), 40, TABLE_GAMES, FIRST)
    assert suite_ids("autoharness-40") == drawn == stratified_sample(list(players.items()), 40, TABLE_GAMES, FIRST)
    assert len(set(drawn)) == 40 and set(TABLE_GAMES) <= set(drawn) and drawn[:3] == list(FIRST)


def test_every_stratum_is_sampled_in_proportion():
    players = paper_players()
    sample = suite_ids("autoharness-40")
    strata = Counter((family(g), p) for g, p in players.items())
    got = Counter((family(g), players[g]) for g in sample)
    assert set(got) == set(strata) and {p for _, p in got} == {1, 2}
    for k, size in strata.items():  # within a game of its share, or its required games
        assert got[k] >= 1 and abs(got[k] - size * 40 / 145) <= max(1.5, sum(g in TABLE_GAMES for g in sample if (family(g), players[g]) == k))
