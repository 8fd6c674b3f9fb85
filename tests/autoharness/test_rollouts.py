"""Code-only rollouts of a harness, the held-out play of the code alone and the harvest of labelled
transitions, on a TicTacToe stand-in with in-process harness code."""

from __future__ import annotations

from fakes import CRASHING, GOOD, LOOSE, FakeTicTacToe

from ratchet.envs.harness.player import CODE_ERROR, ENV_REJECTED, HarnessPlayer
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.envs.harness.transitions import score_is_legal
from ratchet.envs.explore import harvest
from ratchet.envs.measure import lockstep


def rollout(code: str, seeds: list[int], steps: int):
    """The harness alone in lockstep, each env stopped at its first failure (the search's play)."""
    return lockstep(FakeTicTacToe, HarnessPlayer(InProcessHarness({"harness.py": code})), seeds, steps).total


def test_rollout_measures_legal_rate_and_records_failures():
    good = rollout(GOOD, [0, 1], 40)
    assert good.steps == 80 and good.legal_rate == 1.0 and not good.failures and good.games > 5

    loose = rollout(LOOSE, [0, 1, 2], 40)
    assert loose.failures and all(f.kind == ENV_REJECTED for f in loose.failures)
    assert len(loose.failures) == 3  # each env stops at its first illegal move
    first = loose.failures[0]
    assert "already occupied" in first.message and first.detail["verdict"] is True and "Current Board" in first.detail["board"]
    assert 0 < loose.legal_rate < 1

    crash = rollout(CRASHING, [0], 10)
    assert crash.legal_rate == 0.0 and crash.failures[0].kind == CODE_ERROR
    assert "IndexError" in crash.failures[0].message and "harness.py" in crash.failures[0].message


class SlowReset(FakeTicTacToe):
    """A game whose reset is slow (Sokoban's depth-first room generation), on a fake clock."""

    clock = [0.0]

    def reset(self, seed=None):
        SlowReset.clock[0] += 10.0
        return super().reset(seed)


def test_held_out_play_stops_at_its_deadline_and_says_so(monkeypatch):
    import time

    from ratchet.envs.harness import protocol

    monkeypatch.setattr(time, "monotonic", lambda: SlowReset.clock[0])
    SlowReset.clock[0] = 0.0
    # LOOSE fails often, and each failure resets its game (10 s a reset): 35 s allow a few steps only.
    held = protocol.code_heldout(LOOSE, SlowReset, InProcessHarness, [0, 1], steps=200, max_seconds=35.0)
    assert 0 < held["steps"] < 400 and held["cut_after_s"] >= 35.0
    whole = protocol.code_heldout(GOOD, FakeTicTacToe, InProcessHarness, [0, 1], steps=50, max_seconds=35.0)
    assert whole["steps"] == 100 and "cut_after_s" not in whole  # its resets leave the clock where it is


def test_harvested_transitions_are_labelled_by_the_environment():
    transitions = harvest(lambda: FakeTicTacToe(), lambda: FakeTicTacToe(hints=True), [0, 1], per_seed=40)
    assert any(t.legal for t in transitions) and any(not t.legal for t in transitions)
    for t in transitions:
        env = FakeTicTacToe()
        env.reset(t.seed)
        for a in t.prefix:
            env.step(a)
        assert env.step(t.action).legal == t.legal
    good = score_is_legal(InProcessHarness({"harness.py": GOOD}), transitions)
    assert good.accuracy == 1.0
    loose = score_is_legal(InProcessHarness({"harness.py": LOOSE}), transitions)
    assert loose.false_accepts and not loose.false_rejects and loose.accuracy < 1.0
