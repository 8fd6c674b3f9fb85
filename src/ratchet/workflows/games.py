"""The workflow-search headline's second domain: one-player TextArena games played move by move.

A task is one (game, game seed) episode of :class:`ratchet.evolve.suites.textarena.TextArenaSuite`;
the workflow runs once per move (:mod:`ratchet.workflows.moveops`, specs from
:mod:`ratchet.workflows.movespec`). A row records the episode's reward clipped to [0, 1] (the
suite's ``score: reward``), whether it was solved (reward 1), its moves and illegal moves, and its
model calls and tokens **per episode** (all of its moves together). ``k`` of best-of-k is the
evolved arm's calls **per move** (its calls over its moves), rounded up, and best-of-k is the
original's move request sampled ``k`` times with the majority move answered
(:func:`ratchet.workflows.movespec.vote_spec`).

Statistics: mean reward with a 95% percentile-bootstrap interval (2,000 resamples, fixed seed),
solve rate with Wilson's interval; paired on the same episodes, the sign-flip test on the reward
differences (exact up to 2^14 pairs) and the exact McNemar test on solved.
"""

from __future__ import annotations

import math
from statistics import fmean
from typing import TYPE_CHECKING, Any

from ratchet.config import Settings
from ratchet.contracts import Candidate, RatchetError, Task, TaskResult
from ratchet.evolve.context import EngineContext
from ratchet.evolve.suites.config import TextArenaOptions, WorkflowOptions
from ratchet.evolve.suites.textarena import TextArenaSuite
from ratchet.stats import bootstrap_mean_ci, mcnemar_exact, sign_flip_p, wilson
from ratchet.workflows.domains import shared_pairs
from ratchet.workflows.movespec import MOVE_LIBRARIES, compile_move_spec, vote_spec
from ratchet.workflows.proposers import plan_of

if TYPE_CHECKING:
    from ratchet.workflows.headline import HeadlineConfig


def episode(task_id: str) -> tuple[str, int]:
    """``("GuessTheNumber-v0", 100)`` of ``"GuessTheNumber-v0#100"`` (the suite's task ids)."""
    game, sep, seed = task_id.rpartition("#")
    if not sep or not game or not seed.lstrip("-").isdigit():
        raise RatchetError(f"{task_id!r} is not a game episode id", hint="write GAME#SEED, e.g. GuessTheNumber-v0#100")
    return game, int(seed)


def sampled_move_workflow() -> WorkflowOptions:
    """The search's and the sampled arms' settings per move: sampled, at most 4 calls, no test runs,
    a reply budget that leaves room for a think or review call, and the move libraries."""
    return WorkflowOptions(max_model_calls=4, max_test_runs=0, max_steps=12, max_tokens=192, temperature=0.7,
                           libraries=list(MOVE_LIBRARIES))


def vote_size(files: dict[str, str]) -> int | None:
    """``k`` when the workflow is sample ``k`` -> vote (or one sample alone: best-of-1), else None."""
    plan = plan_of(files.get("workflow.py", ""))
    if plan is None or not plan or plan[0].get("op") != "sample":
        return None
    ops = [step.get("op") for step in plan]
    k = int(plan[0].get("k", 1))
    if ops == ["sample", "vote"] or (ops == ["sample"] and k == 1):
        return k
    return None


def game_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean reward with its bootstrap 95% interval, solve rate with Wilson's, and mean calls, tokens
    and moves per episode, with calls per move."""
    n = len(rows)
    rewards = [float(r["reward"]) for r in rows]
    solved = sum(1 for r in rows if r["solved"])
    low, high = bootstrap_mean_ci(rewards)
    s_low, s_high = wilson(solved, n)
    mean = (lambda key: fmean(float(r[key]) for r in rows)) if n else (lambda key: 0.0)
    moves = sum(float(r["moves"]) for r in rows)
    return {"n": n, "mean_reward": fmean(rewards) if n else 0.0, "reward_low": low, "reward_high": high,
            "reward_ci": "bootstrap percentile 95%", "solved": solved, "solve_rate": solved / n if n else 0.0,
            "wilson_low": s_low, "wilson_high": s_high, "calls_per_episode": mean("model_calls"),
            "calls_per_move": sum(float(r["model_calls"]) for r in rows) / moves if moves else 0.0,
            "tokens_per_episode": mean("tokens"), "moves_per_episode": mean("moves"),
            "illegal_per_episode": mean("illegal")}


def game_paired(rows: list[dict[str, Any]], first: str, second: str) -> dict[str, Any] | None:
    """``first`` against ``second`` on the episodes both played: mean reward difference, its sign-flip
    p-values (one-sided each way, and two-sided as twice the smaller, capped at 1), and who alone
    solved how many with the exact McNemar p. None when they share no episode."""
    rewards, shared = shared_pairs(rows, first, second, "reward")
    if not shared:
        return None
    solved, _ = shared_pairs(rows, first, second, "solved")
    diffs = [float(rewards[(first, t, s)]) - float(rewards[(second, t, s)]) for t, s in shared]
    above, below = sign_flip_p(diffs), sign_flip_p([-d for d in diffs])
    wins = sum(1 for t, s in shared if solved[(first, t, s)] and not solved[(second, t, s)])
    losses = sum(1 for t, s in shared if solved[(second, t, s)] and not solved[(first, t, s)])
    return {"first": first, "second": second, "pairs": len(shared), "mean_reward_diff": fmean(diffs),
            "first_higher": sum(d > 0 for d in diffs), "second_higher": sum(d < 0 for d in diffs),
            "sign_flip_p_first_better": above, "sign_flip_p_second_better": below,
            "sign_flip_p_two_sided": min(1.0, 2 * min(above, below)),
            "only_first": wins, "only_second": losses, "mcnemar_p": mcnemar_exact(wins, losses)}


class GamesDomain:
    """One-player game episodes scored by their reward (see the module)."""

    name = "games"

    def default_workflow(self) -> WorkflowOptions:
        return sampled_move_workflow()

    def games(self, ids: list[str]) -> list[str]:
        return list(dict.fromkeys(episode(i)[0] for i in ids))

    def search_suite(self, config: HeadlineConfig, ids: list[str]) -> dict[str, Any]:
        seeds = [episode(i)[1] for i in ids]  # the suite spans every seed between; the splits pick the ids
        return {"name": "textarena", "options": {
            "games": self.games(ids), "first_seed": min(seeds), "episodes": max(seeds) - min(seeds) + 1,
            "score": "reward", "workflow": config.workflow.model_dump()}}

    def proposer_options(self, name: str) -> dict[str, Any]:
        if name.endswith((":OperatorProposer", ":EditChoiceProposer")):
            return {"menu": "ratchet.workflows.movespec:MOVE_MENU"}
        if name.endswith(":AflowProposer"):
            return {"prompt": "aflow_moves.md"}
        return {}

    def arm_options(self, config: HeadlineConfig, own: dict[str, Any] | None) -> TextArenaOptions:
        # the arms play the test ids themselves (test_tasks); games and score are what the suite needs
        where = {"games": self.games(config.test_ids), "score": "reward"}
        if own is not None:
            return TextArenaOptions.model_validate({**own, **where})
        return TextArenaOptions(**where, workflow=config.workflow)

    def arm_suite(self, options: Settings, ctx: EngineContext) -> TextArenaSuite:
        return TextArenaSuite(options, ctx)

    def test_tasks(self, suite: Any, config: HeadlineConfig) -> list[Task]:
        return [Task(i, {"game": episode(i)[0], "seed": episode(i)[1]}) for i in config.test_ids]

    def row(self, result: TaskResult) -> dict[str, Any]:
        m = result.metrics
        return {"reward": result.score, "raw_reward": m.get("reward", 0.0), "solved": m.get("reward", 0.0) >= 1.0,
                **{k: m.get(k, 0.0) for k in ("model_calls", "tokens", "moves", "illegal")},
                "failures": sorted({f.kind for f in result.failures})}

    def describe(self, row: dict[str, Any]) -> str:
        return f"reward {row['reward']:.2f}{', solved' if row['solved'] else ''} in {row['moves']:g} moves"

    def solved(self, row: dict[str, Any]) -> bool:
        return bool(row["solved"])

    def calls_k(self, rows: list[dict[str, Any]]) -> int:
        moves = sum(float(r["moves"]) for r in rows)
        per_move = sum(float(r["model_calls"]) for r in rows) / moves if moves else 1.0
        return max(1, math.ceil(per_move - 1e-9))

    def baseline_files(self, k: int, original: Candidate) -> dict[str, str]:
        """Vote-of-k over the original's move request: its first ``sample`` step's reply budget kept."""
        plan = plan_of(original.files.get("workflow.py", "")) or []
        tokens = next((s.get("max_tokens") for s in plan if s.get("op") == "sample"), None)
        return compile_move_spec(vote_spec(k, tokens))

    def best_of_k_size(self, files: dict[str, str]) -> int | None:
        return vote_size(files)

    def arm_summary(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        return game_summary(rows)

    def paired(self, rows: list[dict[str, Any]], first: str, second: str) -> dict[str, Any] | None:
        return game_paired(rows, first, second)
