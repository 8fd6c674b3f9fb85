"""Labelled transitions: ground truth about legality harvested from the environment itself.

Before any LLM call, we walk random games and, at each visited state, try actions in a replay of
that state: (board text the harness sees, action, legal?, the env's reason). Actions tried are the
full legal list where the game prints one before hint-stripping, plus actions from the game's
action vocabulary that are illegal there. Candidates are then scored on these triples as unit
tests: a dense score (fraction judged right) and concrete false-accept / false-reject
counterexamples for the refiner, instead of only "the first illegal move".
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ratchet.autoharness.runtime import HarnessRuntime, feedback_of
from ratchet.contracts import Environment

EnvFactory = Callable[[], Environment]
_BRACKETED = re.compile(r"\[[^\[\]\n]{1,40}\]")
_NOT_ACTION = re.compile(r"\[(GAME|Player|player|[A-Z][a-z]+ \d+\]$)")


def variants(token: str, limit: int = 40) -> list[str]:
    """Plausible actions shaped like ``token``: each number replaced by 0-9, each lone capital
    letter by A-E (``[col 4]`` → ``[col 0]`` … ``[col 9]``; ``[A C]`` → ``[B C]``, ``[A D]``…).

    >>> variants("[col 4]")[:3]
    ['[col 0]', '[col 1]', '[col 2]']
    """
    out: list[str] = []
    for match in re.finditer(r"\d+|\b[A-E]\b", token):
        options = [str(i) for i in range(10)] if match.group().isdigit() else list("ABCDE")
        for option in options:
            candidate = token[: match.start()] + option + token[match.end():]
            if candidate != token and candidate not in out:
                out.append(candidate)
    return out[:limit]


@dataclass(frozen=True)
class Transition:
    """One labelled (board, action) pair, replayable from ``seed`` and the ``prefix`` of actions."""

    seed: int
    prefix: tuple[str, ...]
    board: str
    action: str
    legal: bool
    reason: str | None
    player: int = 0
    listed: tuple[str, ...] = ()
    """The full legal list the game printed at this state before hint stripping (empty if none)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Transition:
        return cls(**{**data, "prefix": tuple(data["prefix"]), "listed": tuple(data.get("listed", ()))})


def _replay(env: Environment, seed: int, prefix: Sequence[str]):
    obs = env.reset(seed)
    for action in prefix:
        result = env.step(action)
        if result.done or result.observation is None:
            return None
        obs = result.observation
    return obs


def _hint_items(text: str) -> list[str]:
    """The options of the LAST hint line of an unstripped observation (earlier lines in the same
    observation can be stale: they were printed before the latest moves). Only for environments
    without ``legal_moves_hint()``."""
    from ratchet.envs.hints import HINT_LABEL, hint_items

    lines = [line for line in text.splitlines() if HINT_LABEL.search(line)]
    return hint_items(lines[-1]) if lines else []


def harvest(
    env_factory: EnvFactory,
    hint_env_factory: EnvFactory | None,
    seeds: Sequence[int],
    per_seed: int = 60,
    rng: random.Random | None = None,
    max_seconds: float = 60.0,
    max_illegal_per_state: int = 3,
    max_legal_per_state: int = 4,
) -> list[Transition]:
    """Walk random games from each seed and label actions at visited states by replaying them.

    ``env_factory`` gives the env whose (hint-stripped) text the harness sees; ``hint_env_factory``
    (optional) the same game with hints kept: passing it asks for the game's legal lists. The list
    is read from the env's own ``legal_moves_hint()`` (what the game printed for the player to move,
    kept before stripping) when it has one, so no second game is replayed; otherwise the hint env
    is replayed in lockstep and the list read from its text.
    """
    rng = rng or random.Random(0)
    env = env_factory()
    listed_by_env = hint_env_factory is not None and callable(getattr(env, "legal_moves_hint", None))
    hint_env = hint_env_factory() if hint_env_factory and not listed_by_env else None
    vocabulary: dict[str, None] = {}
    out: list[Transition] = []
    deadline = time.monotonic() + max_seconds
    try:
        for seed in seeds:
            prefix: list[str] = []
            count = 0
            while count < per_seed and time.monotonic() < deadline:
                obs = _replay(env, seed, prefix)
                if obs is None:
                    break
                if listed_by_env:
                    legal_list = list(env.legal_moves_hint())
                else:
                    hint_obs = _replay(hint_env, seed, prefix) if hint_env else None
                    legal_list = _hint_items(hint_obs.text) if hint_obs else []
                for token in _BRACKETED.findall(obs.text) + legal_list:
                    if not _NOT_ACTION.match(token) and token not in vocabulary:
                        vocabulary[token] = None
                        for variant in variants(token):
                            vocabulary.setdefault(variant, None)
                tried = list(dict.fromkeys(legal_list))
                rng.shuffle(tried)
                tried = tried[:max_legal_per_state]
                others = [a for a in vocabulary if a not in tried]
                rng.shuffle(others)
                # Without a printed legal list, try more: the legal moves must be found by trying.
                tried += others[: max_illegal_per_state if legal_list else 10]
                legal_here: list[str] = []
                for action in tried:
                    if _replay(env, seed, prefix) is None:
                        break
                    result = env.step(action)
                    ok = result.legal or result.losing_not_illegal
                    out.append(Transition(seed, tuple(prefix), obs.text, action, ok, None if ok else result.illegal_reason, obs.player_id,
                                          tuple(legal_list)))
                    count += 1
                    if ok:
                        legal_here.append(action)
                if not legal_here:
                    break  # no known legal move: this walk cannot continue
                prefix.append(rng.choice(legal_here))
    finally:
        for e in (env, hint_env):
            if e is not None:
                e.close()
    return out


@dataclass
class UnitScore:
    """How a candidate's ``is_legal_action`` did on labelled transitions."""

    total: int
    correct: int
    false_accepts: list[dict[str, Any]]
    false_rejects: list[dict[str, Any]]
    errors: list[dict[str, Any]]

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


def score_is_legal(runtime: HarnessRuntime, transitions: Sequence[Transition]) -> UnitScore:
    """Run ``is_legal_action`` on every transition; a code error counts as a wrong answer."""
    results: list[tuple[str, Any]] = []
    # In chunks, so a check that times out costs one chunk, not one timeout per transition.
    for start in range(0, len(transitions), 25):
        chunk = transitions[start : start + 25]
        got = runtime.call_many("is_legal_action", [(t.board, t.action) for t in chunk], seed=start)
        results += got
        stuck = next((v for s, v in got if s == "error" and "timeout" in type(v).__name__.lower()), None)
        if stuck is not None:
            results += [("error", stuck)] * (len(transitions) - len(results))
            break
    score = UnitScore(len(transitions), 0, [], [], [])
    for t, (status, value) in zip(transitions, results):
        case = {"board": t.board, "action": t.action, "legal": t.legal, "env_reason": t.reason}
        if status != "ok":
            score.errors.append({**case, "kind": "code_error", "function": "is_legal_action", "verdict": None, "feedback": feedback_of(value)})
        elif bool(value) == t.legal:
            score.correct += 1
        elif t.legal:
            score.false_rejects.append({**case, "kind": "false_reject", "function": "is_legal_action", "verdict": False,
                                        "feedback": "is_legal_action said False, but the environment accepts this move"})
        else:
            score.false_accepts.append({**case, "kind": "false_accept", "function": "is_legal_action", "verdict": True,
                                        "feedback": f"is_legal_action said True, but the environment rejects it: {t.reason or 'invalid move'}"})
    return score


def balanced_subset(transitions: Sequence[Transition], limit: int, rng: random.Random) -> list[Transition]:
    """At most ``limit`` transitions, half legal and half illegal where possible (deterministic
    for a given rng), so accuracy can't be won by always answering the majority label."""
    legal = [t for t in transitions if t.legal]
    illegal = [t for t in transitions if not t.legal]
    rng.shuffle(legal)
    rng.shuffle(illegal)
    half = limit // 2
    take_i = illegal[: max(half, limit - len(legal))]
    take_l = legal[: limit - len(take_i)]
    return take_l + take_i


def check_legal_actions(runtime: HarnessRuntime, states: Sequence[tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """Compare a scaffolded harness's ``legal_actions(board)`` with the game's own legal list on
    each state; one failure per wrong state, saying what it returned and what is right."""
    from ratchet.autoharness.harnesslib import action_value

    results = runtime.call_many("legal_actions", [(board,) for board, _ in states], seed=0)
    wrong: list[dict[str, Any]] = []
    for (board, listed), (status, value) in zip(states, results):
        base = {"board": board, "action": None, "verdict": None, "function": "legal_actions"}
        if status != "ok":
            wrong.append({**base, "kind": "code_error", "feedback": feedback_of(value)})
            continue
        got = value if isinstance(value, list) else [value]
        if sorted({action_value(str(a)) for a in got}) != sorted({action_value(a) for a in listed}):
            shown = got[:12] if isinstance(value, list) else value
            wrong.append({**base, "kind": "wrong_legal_actions", "expected": list(listed), "got": got[:24] if isinstance(value, list) else value,
                          "feedback": f"legal_actions returned {shown!r} but the legal actions on this board are {listed!r}"})
    return wrong
