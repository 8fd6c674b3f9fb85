"""Where offline learning finds trajectories in the run store.

- Engine runs (``ratchet evolve``, AutoHarness on the engine): ``evolve/results/<candidate>/<split>.json``
  holds each candidate's per-task results (task id, seed, score, trace, failures).
- Rollout runs (``ratchet play`` and the runner): episodes with their steps (observation, action).

Both become :class:`~ratchet.context.learner.Trajectory` in a stable order (sorted paths, then file
order), so the same run teaches the same playbook.
"""

from __future__ import annotations

from ratchet.context.learner import Trajectory
from ratchet.contracts import RatchetError
from ratchet.store import files
from ratchet.store.run import Run


def from_engine_results(run: Run, *, split: str | None = None) -> list[Trajectory]:
    root = run.path("evolve/results")
    out: list[Trajectory] = []
    if not root.is_dir():
        return out
    for path in sorted(root.glob("*/*.json")):
        if split is not None and path.stem != split:
            continue
        records = files.read_json(path, [])
        for r in records if isinstance(records, list) else []:
            failures = "\n".join(f"[{f.get('kind')}] {f.get('message')}" for f in r.get("failures") or [])
            trace = "\n".join(x for x in (r.get("trace") or "", failures) if x)
            tid = f"{path.parent.name}/{path.stem}/{r['task_id']}@{r.get('seed', 0)}"
            out.append(Trajectory(tid, f"task {r['task_id']}", trace, float(r.get("score", 0.0)), shown=frozenset()))
    return out


def from_episodes(run: Run) -> list[Trajectory]:
    out: list[Trajectory] = []
    for episode in run.episodes():
        steps = run.steps(episode["episode_id"])
        trace = "\n".join(f"observation: {s.get('observation', '')}\naction: {s.get('action', '')}" for s in steps)
        rewards = episode.get("rewards") or {}
        # Player 0 is the agent in a one-player game and the learner's seat by convention otherwise.
        score = float(rewards.get(0, next(iter(rewards.values()), 0.0))) if rewards else 0.0
        first = steps[0].get("observation", "") if steps else ""
        out.append(Trajectory(episode["episode_id"], f"{episode.get('env_id', '')}: {first[:500]}", trace, score,
                              shown=frozenset()))
    return out


def trajectories(run: Run, *, split: str | None = None) -> list[Trajectory]:
    """Every trajectory the run keeps; an error naming the run when it keeps none."""
    found = from_engine_results(run, split=split) + from_episodes(run)
    if not found:
        raise RatchetError(f"run {run.id} keeps no trajectories to learn from (no evolve/results, no episodes)",
                           hint="learn from an engine run (ratchet evolve) or a rollout run (ratchet play)")
    return found
