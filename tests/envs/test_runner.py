"""The rollout runner: parallel episodes, seats, opponents, metrics, and records in the run store."""

from functools import partial

from ratchet.envs.agents import AgentSpec, CodePolicyAgent
from ratchet.envs.runner import RolloutConfig, bootstrap_mean_ci, run_rollouts, wilson
from ratchet.store import RunStore


def test_wilson_and_bootstrap() -> None:
    lo, hi = wilson(10, 10)
    assert 0.69 < lo < 0.73 and hi == 1.0
    lo, hi = wilson(0, 0)
    assert (lo, hi) == (0.0, 1.0)
    assert bootstrap_mean_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    lo, hi = bootstrap_mean_ci([0.0, 1.0] * 10)
    assert lo < 0.5 < hi


def test_random_legal_agent_in_two_workers_writes_the_store(tmp_path) -> None:
    store = RunStore(tmp_path)
    run = store.create_run("play", {"env": "TicTacToe-v0"})
    seeds = list(range(6))
    ticks = []
    report = run_rollouts(
        "TicTacToe-v0", AgentSpec("random-legal"), seeds, RolloutConfig(workers=2), run=run,
        progress=lambda done, total: ticks.append((done, total)),
    )
    assert report.workers == 2 and len(report.episodes) == 6 and ticks[-1] == (6, 6)
    assert report.legal_rate == 1.0 and not report.illegal_reasons
    assert [e.extra["agent_seat"] for e in report.episodes] == [0, 1, 0, 1, 0, 1]
    assert [e.seed for e in report.episodes] == seeds
    episodes = run.episodes()
    assert len(episodes) == 6
    steps = run.steps(report.episodes[0].episode_id)
    assert len(steps) == report.episodes[0].steps
    first = steps[0]
    assert first["observation"] and first["action"] and first["legal"] is True and first["latency_s"] >= 0
    assert {s["extra"]["seat"] for s in steps} == {"agent", "opponent"}
    assert steps[-1]["reward"] is not None


def test_random_text_agent_illegal_reasons_histogram() -> None:
    report = run_rollouts("TicTacToe-v0", AgentSpec("random"), list(range(8)), RolloutConfig(workers=1))
    assert report.legal_rate < 0.7
    assert sum(report.illegal_reasons.values()) == report.agent_steps - round(report.legal_rate * report.agent_steps)
    assert all(reason for reason in report.illegal_reasons)
    assert report.mean_reward < 0  # random text loses by repeated invalid moves
    assert any(e.ended_by_illegal for e in report.episodes)


def _always_up(observation_text: str) -> str:
    return "[up]"


def test_losing_moves_are_not_counted_illegal() -> None:
    report = run_rollouts(
        "FrozenLake-v0", partial(CodePolicyAgent, _always_up), [0, 1],
        RolloutConfig(workers=1),
    )
    assert report.legal_rate == 1.0 and report.losing_invalid >= 2


def test_self_play_and_code_opponent() -> None:
    selfplay = run_rollouts(
        "TicTacToe-v0", AgentSpec("random-legal"), [0, 1], RolloutConfig(workers=1, opponent="self")
    )
    assert selfplay.agent_steps == selfplay.steps  # both seats are the agent
    coded = run_rollouts(
        "TicTacToe-v0", AgentSpec("random-legal"), [0, 1], RolloutConfig(workers=1),
        opponent_factory=AgentSpec("random"),
    )
    assert coded.win_rate >= 0.5  # a random-text opponent forfeits by invalid moves


def test_stop_on_illegal_and_step_cap() -> None:
    report = run_rollouts(
        "TicTacToe-v0", AgentSpec("random"), [0, 1, 2], RolloutConfig(workers=1, stop_on_illegal=True)
    )
    assert all(e.illegal_steps <= 1 for e in report.episodes)
    capped = run_rollouts(
        "PigDice-v0", AgentSpec("random-legal"), [0], RolloutConfig(workers=1, env={"max_steps": 5})
    )
    assert capped.episodes[0].steps == 5 and capped.episodes[0].extra["truncated"]


def test_chess_through_the_python312_worker(py312: str) -> None:
    report = run_rollouts("Chess-v0", AgentSpec("random-legal"), [0, 1], RolloutConfig(workers=2, env={"max_steps": 12}))
    assert report.legal_rate == 1.0 and report.steps == 24
