"""The search's legality judge as an engine Evaluator: per-env-seed results that add up to the rollout."""

from __future__ import annotations

from dataclasses import replace

from fakes import CRASHING, GOOD, LOOSE, FakeTicTacToe

from ratchet.autoharness.legality import LegalityEvaluator
from ratchet.envs.harness.player import HarnessPlayer
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.contracts import Candidate, Evaluator
from ratchet.envs.measure import lockstep
from ratchet.envs.runner import legal_rate

SEEDS = [0, 1, 2]


def evaluator(**kw) -> LegalityEvaluator:
    return LegalityEvaluator(FakeTicTacToe, InProcessHarness, SEEDS, 30, game="TicTacToe-v0", **kw)


def candidate(code: str) -> Candidate:
    return Candidate.from_files("autoharness.harness", {"harness.py": code})


def test_it_is_an_engine_evaluator_with_one_task_per_env_seed() -> None:
    judge = evaluator()
    assert isinstance(judge, Evaluator)
    assert [t.id for t in judge.tasks()] == ["TicTacToe-v0#0", "TicTacToe-v0#1", "TicTacToe-v0#2"]
    assert judge.fingerprint() == evaluator().fingerprint() != evaluator(step_cap=9).fingerprint()


def test_per_task_results_add_up_to_the_rollout_of_the_same_envs() -> None:
    judge = evaluator()
    for code in (GOOD, LOOSE, CRASHING):
        results = judge.evaluate(candidate(code), judge.tasks(), seed=0)
        whole = lockstep(FakeTicTacToe, HarnessPlayer(InProcessHarness({"harness.py": code})), SEEDS, 30).total
        steps, illegal, games = (sum(r.metrics[k] for r in results) for k in ("steps", "illegal", "games"))
        assert legal_rate(int(steps), int(illegal)) == whole.legal_rate and steps == whole.steps and games == whole.games
        together = judge.lockstep(InProcessHarness({"harness.py": code}), judge.tasks()).total
        assert together.failures == whole.failures  # the search's total: in the order they happened
        assert [replace(f, task_id=None) for r in results for f in r.failures] == [f for p in judge.lockstep(
            InProcessHarness({"harness.py": code}), judge.tasks()).envs for f in p.failures]
        for result, task in zip(results, judge.tasks()):
            assert result.task_id == task.id and result.seed == 0
            assert all(f.task_id == task.id and f.detail["env_seed"] is not None for f in result.failures)
            assert len(result.failures) == (result.score < 1.0)  # each env stops at its first failure


def test_other_seeds_play_other_games() -> None:
    judge = evaluator()
    first, other = (judge.evaluate(candidate(LOOSE), judge.tasks(), seed=s) for s in (0, 1))
    assert [f.detail["env_seed"] for r in first for f in r.failures] != [f.detail["env_seed"] for r in other for f in r.failures]
    assert all(r.seed == 1 for r in other)


def test_a_candidate_with_no_step_scores_zero() -> None:
    judge = LegalityEvaluator(FakeTicTacToe, InProcessHarness, [], 30)
    assert judge.evaluate(candidate(GOOD), [], seed=0) == []
    # no step is no evidence: the rate is undefined (the search scores such a candidate 0)
    assert judge.lockstep(InProcessHarness({"harness.py": GOOD}), []).total.legal_rate is None
