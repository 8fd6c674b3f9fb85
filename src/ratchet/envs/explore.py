"""Labelled transitions from exploring a game: ground truth about legality from the env itself.

Before any LLM call (in harness search), random games are walked and, at each visited state,
actions are tried in a replay of that state: (board text the player sees, action, legal?, the env's
reason). Actions tried are the full legal list where the game prints one before hint-stripping;
where it prints none, every action of the game's action grammar (:mod:`ratchet.envs.grammar`,
read from its rules and error messages) when there are few enough — then the legal ones found are
that state's full list — else a sample of them; plus actions from the game's vocabulary (bracketed
tokens seen, and variants of them) that are illegal there.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ratchet.contracts import Environment
from ratchet.envs.aliases import outcome
from ratchet.envs.grammar import infer_grammar
from ratchet.envs.hints import HINT_LABEL, hint_items

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
    """The full legal list at this state: printed by the game before hint stripping, or found by
    trying every action of the game's grammar (empty if neither)."""
    outcome: str = ""
    """A digest of the next observation, the actions in it dropped (``aliases.outcome``; "" if not known)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Transition:
        return cls(**{**data, "prefix": tuple(data["prefix"]), "listed": tuple(data.get("listed", ()))})


def replay(env: Environment, seed: int, prefix: Sequence[str]) -> Any:
    """The observation after ``prefix`` from ``seed``, or None when the game ends on the way."""
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
    exhaustive: int = 128,
    use_grammar: bool = True,
) -> list[Transition]:
    """Walk random games from each seed and label actions at visited states by replaying them.

    ``env_factory`` gives the env whose (hint-stripped) text the harness sees; ``hint_env_factory``
    (optional) the same game with hints kept: passing it asks for the game's legal lists. The list
    is read from the env's own ``legal_moves_hint()`` (what the game printed for the player to move,
    kept before stripping) when it has one, so no second game is replayed; otherwise the hint env
    is replayed in lockstep and the list read from its text. At a state with no printed list, every
    action of the game's grammar is tried when it allows at most ``exhaustive``, and the legal ones
    found become that state's list (``use_grammar=False``: the vocabulary alone, as before the grammar).
    """
    rng = rng or random.Random(0)
    env = env_factory()
    listed_by_env = hint_env_factory is not None and callable(getattr(env, "legal_moves_hint", None))
    hint_env = hint_env_factory() if hint_env_factory and not listed_by_env else None
    vocabulary: dict[str, None] = {}
    texts: list[str] = []
    grammar = infer_grammar(texts)
    out: list[Transition] = []
    deadline = time.monotonic() + max_seconds
    try:
        for seed in seeds:
            prefix: list[str] = []
            count = 0
            while count < per_seed and time.monotonic() < deadline:
                obs = replay(env, seed, prefix)
                if obs is None:
                    break
                if not texts:
                    texts.append(obs.text)  # the rules: the first observation's text
                    grammar = infer_grammar(texts)
                if listed_by_env:
                    legal_list = list(env.legal_moves_hint())
                else:
                    hint_obs = replay(hint_env, seed, prefix) if hint_env else None
                    legal_list = _hint_items(hint_obs.text) if hint_obs else []
                for token in _BRACKETED.findall(obs.text) + legal_list:
                    if not _NOT_ACTION.match(token) and token not in vocabulary:
                        vocabulary[token] = None
                        for variant in variants(token):
                            vocabulary.setdefault(variant, None)
                tried = list(dict.fromkeys(legal_list))
                rng.shuffle(tried)
                tried = tried[:max_legal_per_state]
                space = [] if legal_list or not use_grammar else grammar.enumerate(exhaustive + 1)
                complete = 0 < len(space) <= exhaustive
                if complete:
                    tried = space  # every action there is: the legal ones found are the full list
                others = [a for a in dict.fromkeys([*vocabulary, *space]) if a not in tried]
                rng.shuffle(others)
                # Without a printed legal list, try more: the legal moves must be found by trying.
                tried += others[: max_illegal_per_state if legal_list or complete else 10]
                here: list[Transition] = []
                for action in tried:
                    if replay(env, seed, prefix) is None:
                        break
                    result = env.step(action)
                    ok = result.legal or result.losing_not_illegal
                    after = outcome(result.observation.text if result.observation else None, result.done, [action, *legal_list])
                    here.append(Transition(seed, tuple(prefix), obs.text, action, ok, None if ok else result.illegal_reason,
                                           obs.player_id, tuple(legal_list), after))
                    if not ok and result.illegal_reason and result.illegal_reason not in texts:
                        texts.append(result.illegal_reason)  # error messages often show the format
                        grammar = infer_grammar(texts)
                legal_here = [t.action for t in here if t.legal]
                if complete:
                    # Kept: every legal one and 10 illegal ones, so a large grammar (100 actions) does not
                    # spend a seed's whole quota on its first state, which every seed shares.
                    wrong = [t for t in here if not t.legal]
                    keep = {id(t) for t in rng.sample(wrong, min(10, len(wrong)))}
                    here = [replace(t, listed=tuple(a for a in space if a in legal_here)) for t in here if t.legal or id(t) in keep]
                out += here
                count += len(here)
                if not legal_here:
                    break  # no known legal move: this walk cannot continue
                prefix.append(rng.choice(legal_here))
    finally:
        for e in (env, hint_env):
            if e is not None:
                e.close()
    return out


def listed_states(transitions: Sequence[Transition], limit: int | None = 30) -> list[tuple[str, list[str]]]:
    """Distinct states whose full legal list the game printed: (board, legal actions); at most
    ``limit`` spread over game lengths, every one with None."""
    seen: dict[tuple[int, tuple[str, ...]], tuple[str, list[str]]] = {}
    for t in transitions:
        if t.listed and (t.seed, t.prefix) not in seen:
            seen[(t.seed, t.prefix)] = (t.board, list(t.listed))
    states = list(seen.values())
    # Spread over game lengths: the early states of every seed look alike.
    states.sort(key=lambda s: len(s[1]))
    if limit is None:
        return states
    step = max(1, len(states) // limit)
    return states[::step][:limit]


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
