"""Agents that play text environments: the baseline LLM player and scripted/code players.

Every agent answers ``act(observation, feedback=None) -> action text``; ``feedback`` is the
environment's reason when its previous action was rejected (the runner passes it when retrying is
on). ``reset(seed)`` starts a new episode. ``bind(env)`` (optional) gives an agent read access to
the environment, which only the random-legal opponent uses (to test candidate moves on a copy).
After each ``act`` an agent may expose ``last_info`` (tokens, raw text, verifier rejections).

There is one contract, :class:`Agent`. Playing many environments in one call is an optional
capability of an agent, as ``bind`` and ``last_info`` are: an agent that also has ``act_many`` and
``rejected`` (:class:`BatchedAgent`, a check of that capability, not a second kind of player) is
played by the runner's lockstep mode (:func:`ratchet.envs.lockstep.play_lockstep`) one call per step
of every environment; any other agent is played there through :class:`OneAtATime`, as the runner
plays it.
"""

from __future__ import annotations

import importlib
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ratchet.contracts import Failure, Message, Model, Observation, RatchetError

#: The paper's playing prompt (two steps: think, then the move inside <move></move>). The concrete
#: example matters for small models: without it qwen2.5-coder-0.5b stopped using the tags (legal rate
#: 0.0 on TicTacToe, 20 steps); with it, 0.286 (it then over-plays the example cell "[4]").
PLAYING_PROMPT = """You are playing the game {game}.

{observation}

Step 1: Think. Look at the current state of the game, what the rules allow, and which move is best.
Step 2: Move. Give exactly one move inside <move></move> tags, written exactly as the game expects,
for example <move>[4]</move>."""

RETRY_PROMPT = """Your move {action} was rejected: {reason}
Think again (Step 1), then give one legal move inside <move></move> tags (Step 2)."""

SYSTEM_PROMPT = "You are an expert game player. You always follow the game's rules and action format."

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_MOVE_TAG = re.compile(r"<move>(.*?)</move>", re.DOTALL | re.IGNORECASE)
_OPEN_MOVE = re.compile(r"<move>(.*)$", re.DOTALL | re.IGNORECASE)
_BRACKETED = re.compile(r"\[[^\[\]\n]{1,60}\]")
_DIGITS = re.compile(r"\d+")
_LONE_LETTER = re.compile(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])")


@runtime_checkable
class Agent(Protocol):
    """A player: observation text in, action text out."""

    name: str

    def act(self, observation: Observation, feedback: str | None = None) -> str: ...

    def reset(self, seed: int) -> None: ...


@dataclass(frozen=True)
class Attempt:
    """An agent's move in one environment of the lockstep loop: ``action`` to step, or a
    ``failure`` (what went wrong, said by the agent for whoever learns from it), in which case no
    step is taken."""

    action: str | None
    failure: Failure | None = None
    raw: Any = None
    """What the agent produced before it became action text (its own business; see ``rejected``)."""


@runtime_checkable
class BatchedAgent(Agent, Protocol):
    """The batched capability of an :class:`Agent` (optional): N observations in, N attempts out,
    in one call (for code run in a sandbox, one call per step of all environments instead of one
    per environment). Only the lockstep loop asks for it, by checking for it; a batched agent is
    still an agent (``act``, ``reset`` and ``name`` work), so the runner plays it too."""

    def act_many(self, observations: Sequence[Observation], seed: int) -> list[Attempt]: ...

    def rejected(self, attempt: Attempt, reason: str | None) -> Failure:
        """The failure of an attempt the environment rejected, with the env's ``reason``."""
        ...


class OneAtATime:
    """How the lockstep loop plays an agent without the batched capability: one ``act`` per
    environment, ``reset(seed)`` with a game's seed and ``bind(env)`` (where the agent has it)
    before the game's first move, as the runner does before an episode. The loop gives it one
    environment at a time (its state, a conversation or a random stream, belongs to one game), so
    its play is the runner's, game by game."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.name = agent.name
        self._game: tuple[int, int] | None = None

    def begin(self, env: Any, seed: int) -> None:
        """Before a move in ``env``'s game of ``seed``: a game not seen last is a new one."""
        if self._game != (id(env), seed):
            self._game = (id(env), seed)
            self.agent.reset(seed)
            if hasattr(self.agent, "bind"):
                self.agent.bind(env)

    def act_many(self, observations: Sequence[Observation], seed: int) -> list[Attempt]:
        return [Attempt(self.agent.act(o)) for o in observations]

    def rejected(self, attempt: Attempt, reason: str | None) -> Failure:
        return Failure("rejected_by_env", reason or "invalid move", detail={"action": attempt.action})


def parse_move(text: str) -> str | None:
    """The move in a model's answer: the last ``<move>…</move>``, else an unclosed ``<move>…``, else
    the last ``[bracketed]`` action, else the last non-empty line. None for an empty answer."""
    text = _THINK.sub("", text or "").strip()
    if not text:
        return None
    tags = [t.strip() for t in _MOVE_TAG.findall(text) if t.strip()]
    if tags:
        return tags[-1]
    opened = _OPEN_MOVE.search(text)
    if opened and opened.group(1).strip():
        return opened.group(1).strip().splitlines()[0].strip()
    brackets = _BRACKETED.findall(text)
    if brackets:
        return brackets[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


Verifier = Callable[[str, str], "tuple[bool, str]"]


class LLMAgent:
    """The baseline player: the paper's playing prompt, lenient parsing, optional retries.

    ``verifier(board, action) -> (ok, reason)`` is consulted before an action is returned; a
    rejected action re-prompts the model with the reason, up to ``verifier_retries`` times (the
    AutoHarness action-verifier mode plugs its sandboxed ``is_legal_action`` in here). ``feedback``
    from the runner (the env's reason after an illegal move) is shown in a retry prompt that
    continues the previous exchange.
    """

    def __init__(
        self,
        model: Model | str,
        *,
        game: str = "a text game",
        temperature: float = 0.0,
        max_tokens: int = 384,
        verifier: Verifier | None = None,
        verifier_retries: int = 3,
        seed: int | None = None,
    ) -> None:
        self._model_spec = model if isinstance(model, str) else None
        self._model: Model | None = None if isinstance(model, str) else model
        self.name = f"llm:{model if isinstance(model, str) else getattr(model, 'name', 'model')}"
        self.game = game
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.verifier = verifier
        self.verifier_retries = verifier_retries
        self._seed = seed
        self._last_messages: list[Message] = []
        self.last_info: dict[str, Any] = {}

    @property
    def model(self) -> Model:
        if self._model is None:
            from ratchet.models import load_model

            self._model = load_model(self._model_spec or "")
        return self._model

    def reset(self, seed: int) -> None:
        self._seed = seed
        self._last_messages = []

    def _ask(self, messages: list[Message]) -> tuple[str, str]:
        completion = self.model.complete(
            messages, temperature=self.temperature, max_tokens=self.max_tokens, seed=self._seed
        )
        info = self.last_info
        info["prompt_tokens"] = info.get("prompt_tokens", 0) + completion.usage.prompt_tokens
        info["completion_tokens"] = info.get("completion_tokens", 0) + completion.usage.completion_tokens
        info["model_calls"] = info.get("model_calls", 0) + 1
        info["model_latency_s"] = info.get("model_latency_s", 0.0) + completion.latency_s
        info["raw"] = completion.text
        move = parse_move(completion.text)
        if move is None:
            info["parse_failed"] = info.get("parse_failed", 0) + 1
        return completion.text, move or completion.text.strip()

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        self.last_info = {}
        if feedback and self._last_messages:
            previous = self._last_messages
            last_action = previous[-1]["content"] if previous[-1]["role"] == "assistant" else ""
            messages = [
                *previous,
                {"role": "user", "content": RETRY_PROMPT.format(action=parse_move(last_action) or last_action, reason=feedback)},
            ]
        else:
            messages = [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": PLAYING_PROMPT.format(game=self.game, observation=observation.text)},
            ]
        text, action = self._ask(messages)
        messages = [*messages, {"role": "assistant", "content": text}]
        if self.verifier is not None:
            rejections: list[dict[str, str]] = []
            for _ in range(self.verifier_retries):
                ok, reason = self.verifier(observation.text, action)
                if ok:
                    break
                rejections.append({"action": action, "reason": reason})
                messages.append({"role": "user", "content": RETRY_PROMPT.format(action=action, reason=reason)})
                text, action = self._ask(messages)
                messages.append({"role": "assistant", "content": text})
            self.last_info["verifier_rejections"] = rejections
        self._last_messages = messages
        return action


class RandomTextAgent:
    """A scripted player that sends random text: mostly tokens seen in the observation, sometimes
    numbers, words or plainly invalid text. Used to smoke-test every game's illegal-move signal."""

    name = "random-text"
    JUNK = ("[zzz-not-a-move]", "hello", "[?]", "[-1]", "move", "[999 999]")

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self.last_info: dict[str, Any] = {}

    def reset(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        roll = self._rng.random()
        tokens = _BRACKETED.findall(observation.text)
        if roll < 0.5 and tokens:
            return self._rng.choice(tokens)
        if roll < 0.75:
            return f"[{self._rng.randint(0, 9)}]" if self._rng.random() < 0.5 else f"[{self._rng.randint(0, 9)} {self._rng.randint(0, 9)}]"
        return self._rng.choice(self.JUNK)


class RandomLegalAgent:
    """Plays a uniformly random *legal* move where the legal moves are known, and says where not.

    Sources, first that applies (``last_info["source"]`` names it after each ``act``):

    * ``rules``: the env's ``legal_moves()``, computed from the game's own state and rule code
      (:mod:`ratchet.envs.legal`); a uniform choice among them, no probing.
    * ``listed``: the moves the game printed (read before hints are stripped), each tried on a copy
      of the game (``env.probe``) in random order until one is accepted.
    * ``guess``: no known legal moves. Bracketed tokens of the observation, shape-keeping variants of
      them (digits and single letters redrawn), small numbers and coordinate pairs, probed; if none
      is accepted, a random candidate is sent. Such moves may well be illegal.
    """

    name = "random-legal"

    def __init__(self, seed: int = 0, max_probes: int = 60) -> None:
        self._rng = random.Random(seed)
        self.max_probes = max_probes
        self._env: Any = None
        self.last_info: dict[str, Any] = {}

    def bind(self, env: Any) -> None:
        self._env = env

    def reset(self, seed: int) -> None:
        self._rng = random.Random(seed + 7919)

    def rule_moves(self) -> list[str] | None:
        """The env's rule-computed legal moves (None where it has none)."""
        legal = getattr(self._env, "legal_moves", None)
        return legal(self._rng.randrange(1 << 31)) if legal is not None else None

    def candidates(self, observation: Observation) -> list[str]:
        """Moves to probe when no rule applies: the game's printed list, else guesses."""
        listed = list(self._env.legal_moves_hint()) if self._env is not None and hasattr(self._env, "legal_moves_hint") else []
        if listed:
            self._rng.shuffle(listed)
            return listed
        seen = list(dict.fromkeys(_BRACKETED.findall(observation.text)))
        # Variants of the game's own examples keep their shape: "[A 5]" -> "[C 2]", "[3 4 9]" -> "[7 1 2]".
        variants = [self._mutate(token) for token in seen for _ in range(6)]
        extra = [f"[{i}]" for i in range(10)] + [f"[{r} {c}]" for r in range(9) for c in range(9)]
        self._rng.shuffle(seen)
        pool = variants + extra
        self._rng.shuffle(pool)
        return list(dict.fromkeys(seen + pool))

    def _mutate(self, token: str) -> str:
        rng = self._rng
        token = _DIGITS.sub(lambda m: str(rng.randint(0, 9 if len(m.group()) == 1 else 20)), token)
        return _LONE_LETTER.sub(
            lambda m: chr(ord("A" if m.group().isupper() else "a") + rng.randint(0, 9)), token
        )

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        self.last_info = {"probes": 0}
        ruled = self.rule_moves()
        if ruled:
            self.last_info["source"] = "rules"
            return self._rng.choice(ruled)
        if ruled is not None:
            self.last_info["no_rule_move"] = True  # the rule found nothing: fall back, flagged
        options = self.candidates(observation)
        listed = self._env is not None and hasattr(self._env, "legal_moves_hint") and bool(self._env.legal_moves_hint())
        self.last_info["source"] = "listed" if listed else "guess"
        probe = getattr(self._env, "probe", None)
        if probe is not None:
            for action in options[: self.max_probes]:
                self.last_info["probes"] += 1
                if probe(action):
                    return action
        return options[0] if options else "[0]"


class CodePolicyAgent:
    """A player whose policy is Python code: ``policy(observation_text) -> action``.

    ``policy`` is a callable or an import path ``"package.module:function"`` (kept as a string so the
    agent pickles into worker processes). Untrusted generated code should be run through the
    sandbox by the caller's own callable; this class calls what it is given.
    """

    def __init__(self, policy: Callable[[str], str] | str, name: str | None = None) -> None:
        self._spec = policy if isinstance(policy, str) else None
        self._policy: Callable[[str], str] | None = None if isinstance(policy, str) else policy
        self.name = name or f"code:{policy if isinstance(policy, str) else getattr(policy, '__name__', 'policy')}"
        self.last_info: dict[str, Any] = {}

    @property
    def policy(self) -> Callable[[str], str]:
        if self._policy is None:
            module, _, func = (self._spec or "").partition(":")
            try:
                self._policy = getattr(importlib.import_module(module), func)
            except (ImportError, AttributeError) as exc:
                raise RatchetError(f"cannot load policy {self._spec!r}: {exc}", hint="use package.module:function") from exc
        return self._policy

    def reset(self, seed: int) -> None:
        pass

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        return str(self.policy(observation.text))


@dataclass(frozen=True)
class AgentSpec:
    """A picklable agent factory built from a spec string (what ``--agent`` / ``--opponent`` take).

    ``random`` (random text), ``random-legal``, ``code:package.module:function``, or any model spec
    (``local:NAME``, ``openai:MODEL``, ``http://host:port/v1#MODEL``) for the baseline LLM player.
    """

    spec: str
    game: str = "a text game"
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def is_llm(self) -> bool:
        return self.spec not in ("random", "random-text", "random-legal") and not self.spec.startswith("code:")

    @property
    def is_local_llm(self) -> bool:
        return self.spec.startswith("local:")

    def __call__(self) -> Agent:
        if self.spec in ("random", "random-text"):
            return RandomTextAgent(self.seed)
        if self.spec == "random-legal":
            return RandomLegalAgent(self.seed)
        if self.spec.startswith("code:"):
            return CodePolicyAgent(self.spec[len("code:"):])
        return LLMAgent(self.spec, game=self.game, **self.options)


def timed_act(agent: Agent, observation: Observation, feedback: str | None = None) -> tuple[str, float]:
    start = time.perf_counter()
    action = agent.act(observation, feedback)
    return action, time.perf_counter() - start
