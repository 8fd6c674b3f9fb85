"""TextArena games behind the :class:`ratchet.contracts.Environment` contract.

What this adapter adds to a raw (unwrapped, ``-raw``) TextArena env:

* **Illegal moves from the source.** The env's own ``state.set_invalid_move`` is wrapped on this
  instance's state (never globally) after each reset; a step reports ``legal=False`` with the env's
  reason, and ``ended_by_illegal`` when that call took the game-ending branch.
* **Lost, not illegal.** Games that call a losing move "invalid" (see :mod:`ratchet.envs.notes`) mark
  the step ``losing_not_illegal``.
* **Bounded observations** assembled from the env's typed messages (rules prompt, latest board, the
  player's last few messages) instead of TextArena's ever-growing history; move hints stripped.
* **A private random stream.** TextArena seeds and draws from the global ``random`` module. While
  game code runs, the module's functions (``random.seed``, ``random.choice``…) are pointed at this
  env's own ``random.Random`` and pointed back after, so neither the caller nor other envs see the
  game's draws, and an episode depends only on its seed.
* Step caps, auto-reset, and a copy-and-try ``probe`` to test a move without playing it.
"""

from __future__ import annotations

import copy
import os
import random
import traceback
from typing import Any

from ratchet.contracts import Observation, RatchetError, StepResult
from ratchet.envs.config import EnvConfig
from ratchet.envs.hints import hint_spans, items_in, strip_hints, strip_spans
from ratchet.envs.notes import family_of, is_losing_not_illegal


def go_offline() -> None:
    """Make sure no game can hang on a download: NLTK downloads fail fast, hub clients stay offline.

    Called before TextArena is imported in any process that runs games. It patches
    ``nltk.download`` (only in this process) to return False, which is what NLTK itself returns when
    a download fails; the game then raises its own LookupError, which availability checks report.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("NLTK_DOWNLOADER_OFFLINE", "1")
    try:
        import nltk
    except Exception:  # nltk is a TextArena dependency, but a game may not need it
        return

    def _no_download(*args: Any, **kwargs: Any) -> bool:
        return False

    nltk.download = _no_download  # type: ignore[assignment]


#: The functions of the ``random`` module that draw from its hidden global instance.
_RANDOM_API = tuple(
    name for name in dir(random) if getattr(getattr(random, name), "__self__", None) is getattr(random, "_inst", None)
)
_GLOBAL_RANDOM = {name: getattr(random, name) for name in _RANDOM_API}
_RANDOM_NAMESPACE = random.__dict__


def _bindings(rng: random.Random) -> dict[str, Any]:
    return {name: getattr(rng, name) for name in _RANDOM_API}


class _random_module_bound_to:  # lower case: used like the function it replaced
    """Point ``random.random``, ``random.choice``, ``random.seed``… at a private instance.

    Cheaper than saving and restoring the global state (two dict updates instead of copying 625
    words twice per call), and a plain class rather than a generator context manager because it
    runs twice per step (one object per env, reused). Code that captured a function before
    (``from random import choice``) is not redirected; TextArena 0.7.4 has none. Not thread-safe:
    one env call at a time per process.
    """

    __slots__ = ("bindings",)

    def __init__(self, bindings: dict[str, Any]) -> None:
        self.bindings = bindings

    def __enter__(self) -> None:
        _RANDOM_NAMESPACE.update(self.bindings)

    def __exit__(self, *exc: object) -> None:
        _RANDOM_NAMESPACE.update(_GLOBAL_RANDOM)


#: Games that signal an invalid move by killing the mover instead of calling set_invalid_move:
#: family -> key of the per-player entities in game_state (each has .alive and .death_reason).
DEATH_ON_INVALID = {"Snake": "snakes", "Surround": "players"}


def _format_action(action: str) -> str:
    """TextArena's default ActionFormattingWrapper: bracket an action that has no brackets."""
    action = action.strip()
    if "[" not in action and "]" not in action:
        return f"[{action}]"
    return action


#: Games whose TextArena 0.7.4 object cannot be reset twice: Stratego's second reset loops forever
#: placing pieces, SpiteAndMalice's fails on state left by the first episode. They get a new game
#: object on every reset after the first (the runner reuses one env per worker).
FRESH_GAME_ON_RESET = frozenset({"Stratego", "SpiteAndMalice"})


class TextArenaEnv:
    """One TextArena game, in this process. Implements ``contracts.Environment``."""

    def __init__(self, env_id: str, num_players: int, config: EnvConfig | None = None) -> None:
        go_offline()
        import textarena as ta
        from textarena.envs.registration import ENV_REGISTRY

        self.env_id = env_id
        self.num_players = num_players
        self.config = config or EnvConfig()
        raw_id = f"{env_id}-raw" if f"{env_id}-raw" in ENV_REGISTRY else env_id
        if raw_id not in ENV_REGISTRY:
            raise RatchetError(f"unknown TextArena env {env_id!r}", hint="see `ratchet envs list --all`")
        self._ta = ta
        self._raw_id = raw_id
        self._resets = 0
        family = family_of(env_id)
        self._death_key = DEATH_ON_INVALID.get(family)
        self._fresh_game_on_reset = family in FRESH_GAME_ON_RESET
        self._rng = random.Random(0)
        self._rng_bound = _bindings(self._rng)
        self._bound = _random_module_bound_to(self._rng_bound)
        self._scans: dict[str, list[Any]] = {}
        self._env = self._make_raw()
        self._invalid: list[tuple[str, bool]] = []
        self._seed = 0
        self._steps = 0
        self._done = True
        self._prompt: dict[int, str] = {}
        self._window: dict[int, list[tuple[str, bool]]] = {}
        self._board: dict[int, str] = {}
        self._history: dict[int, list[str]] = {}
        self._legal_hint: list[str] = []
        self._rules: dict[int, str] = {}
        self._prompt_shown: dict[int, str] = {}
        self._last_obs: Observation | None = None

    # ---------------------------------------------------------------- random isolation

    def _make_raw(self) -> Any:
        with self._own_random():
            env = self._ta.make(self._raw_id)
        # A game registered the ordinary way (default wrappers, no ``-raw`` twin) comes wrapped;
        # this adapter reads the raw game's typed messages itself.
        while isinstance(env, self._ta.Wrapper):
            env = env.env
        return env

    def _own_random(self) -> Any:
        """Run game code against this env's private ``random.Random`` (see module docstring)."""
        return self._bound

    # ---------------------------------------------------------------- contract

    def reset(self, seed: int) -> Observation:
        self._seed = seed
        self._steps = 0
        self._prompt, self._window, self._board, self._history = {}, {}, {}, {}
        self._prompt_shown: dict[int, str] = {}
        self._rng.seed(seed)  # games that draw before seeding still get a per-seed stream
        with self._own_random():
            if self._resets and self._fresh_game_on_reset:
                self._env = self._make_raw()
            self._resets += 1
            self._env.reset(num_players=self.num_players, seed=seed)
            drained = self._env.get_observation()
        state = self._env.state
        self._hook(state)
        state.error_allowance = self.config.error_allowance
        # Every seat's rules prompt, read (not drained) from the queues, for game_description().
        self._rules = {
            pid: str(m[1])
            for pid, queue in (getattr(state, "observations", None) or {}).items()
            for m in queue[:1]
            if len(m) > 2 and m[2] == self._ta.ObservationType.PROMPT
        }
        self._done = False
        return self._observe(drained)

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RatchetError(f"{self.env_id}: step() after the episode ended", hint="call reset(seed) first")
        state = self._env.state
        player = state.current_player_id
        self._invalid = []
        info: dict[str, Any] = {"player_id": player}
        mover = self._mortal(player)
        was_alive = bool(mover is not None and mover.alive)
        env_error: str | None = None
        try:
            with self._own_random():
                done, _ = self._env.step(_format_action(action))
                if not done:  # drain the next player's messages under the same private stream
                    drained = self._env.get_observation()
        except Exception as exc:  # a crash inside the game's own code on this input
            done = True
            env_error = f"{type(exc).__name__}: {exc}"
            info["env_error"] = traceback.format_exc(limit=4)
        self._steps += 1
        if was_alive and not mover.alive and getattr(mover, "death_reason", "") == "invalid move":
            # The game's own invalid-move branch (it eliminates instead of warning).
            self._invalid.append((f"Player {player} made an invalid move and was eliminated "
                                  "(the action named no direction such as [up]).", True))
        legal = not self._invalid and env_error is None
        reason: str | None = None
        ended_by_illegal = False
        if self._invalid:
            raw_reason, final = self._invalid[-1]
            info["illegal_reason_raw"] = raw_reason
            reason = strip_hints(raw_reason).strip() or raw_reason if self.config.strip_move_hints else raw_reason
            ended_by_illegal = bool(done and final)
        elif env_error is not None:
            reason = f"environment error: {env_error}"
        losing = (not legal) and is_losing_not_illegal(self.env_id, info.get("illegal_reason_raw"))

        rewards: dict[int, float] | None = None
        observation: Observation | None = None
        if done:
            rewards = self._final_rewards()
            info["game_info"] = _plain(getattr(state, "game_info", {}))
        elif self._steps >= self.config.max_steps:
            done = True
            info["truncated"] = True
            rewards = {pid: 0.0 for pid in range(self.num_players)}
        else:
            observation = self._observe(drained)
        if done:
            self._done = True
            if self.config.auto_reset:
                observation = self.reset(self._seed + 1)
                info["auto_reset_seed"] = self._seed
        return StepResult(
            observation=observation,
            done=done,
            legal=legal,
            illegal_reason=reason,
            ended_by_illegal=ended_by_illegal,
            losing_not_illegal=losing,
            rewards=rewards,
            info=info,
        )

    def close(self) -> None:
        self._done = True

    # ---------------------------------------------------------------- extras used by agents/runner

    def observe(self) -> Observation:
        """The current player's latest observation (without draining anything new)."""
        if self._last_obs is None:
            raise RatchetError(f"{self.env_id}: observe() before reset()", hint="call reset(seed) first")
        return self._last_obs

    def game_description(self) -> str:
        """The rules prompt player 0 gets (move hints stripped when configured).

        Needs a reset game: if this env was never reset, it is reset with seed 0 first."""
        if not self._rules and self._last_obs is None:
            self.reset(0)
        text = self._rules.get(0) or next(iter(self._rules.values()), "") or self._prompt.get(0, "")
        return strip_hints(text, static=True) if self.config.strip_move_hints else text

    def legal_moves_hint(self) -> list[str]:
        """Moves the game itself listed for the player to move (before stripping); [] if none."""
        return list(self._legal_hint)

    def board_state(self) -> Any:
        """The game's own board now (``state.game_state["board"]``) as plain data, read only; None
        when the game keeps no board there or keeps objects (Chess's ``chess.Board``) that have no
        agreed plain form. Ground truth a board parser can be checked against."""
        game_state = getattr(self._env.state, "game_state", None)
        return plain_board(game_state.get("board")) if isinstance(game_state, dict) else None

    def legal_moves(self, seed: int = 0) -> list[str] | None:
        """Legal moves for the player to move, computed from the game's own state and rule code
        (:mod:`ratchet.envs.legal`); None where this game has no such rule. [] once it ended."""
        if self._done:
            return []
        from ratchet.envs.legal import legal_moves

        return legal_moves(self.env_id, self._env, seed, self.probe)

    def probe(self, action: str) -> bool:
        """Would ``action`` be accepted now? Tried on a deep copy; this env is left untouched."""
        if self._done:
            return False
        state = self._env.state
        hooked = state.__dict__.pop("set_invalid_move", None)
        try:
            twin = copy.deepcopy(self._env)
        finally:
            if hooked is not None:
                state.set_invalid_move = hooked
        flagged: list[bool] = []
        original = twin.state.set_invalid_move

        def spy(*args: Any, **kwargs: Any) -> Any:
            flagged.append(True)
            return original(*args, **kwargs)

        twin.state.set_invalid_move = spy
        twin_rng = random.Random()
        twin_rng.setstate(self._rng.getstate())  # the same draws the real step would see
        try:
            with _random_module_bound_to(_bindings(twin_rng)):
                twin.step(_format_action(action))
        except Exception:
            return False
        return not flagged

    # ---------------------------------------------------------------- internals

    def _mortal(self, player: int) -> Any:
        key = self._death_key
        if key is None:
            return None
        return (getattr(self._env.state, "game_state", None) or {}).get(key, {}).get(player)

    def _hook(self, state: Any) -> None:
        original = state.set_invalid_move

        def set_invalid_move(*args: Any, **kwargs: Any) -> Any:
            if len(args) >= 2 and not isinstance(args[0], str) and isinstance(args[1], str):
                # Cryptarithm (0.7.4) passes (reward, reason) positionally in the wrong order;
                # pass them by name so its reward stays a number.
                args, kwargs = (), {**kwargs, "reason": args[1], "reward": args[0]}
            reason = kwargs.get("reason", args[0] if args else None)
            allowance = getattr(state, "error_allowance", 1) or 0
            final = not (allowance > getattr(state, "error_count", 0))
            self._invalid.append((str(reason) if reason is not None else "invalid move", final))
            return original(*args, **kwargs)

        state.set_invalid_move = set_invalid_move

    def _final_rewards(self) -> dict[int, float]:
        with self._own_random():
            closed = self._env.close()
        rewards = closed[0] if isinstance(closed, tuple) else closed
        if not isinstance(rewards, dict):
            rewards = getattr(self._env.state, "rewards", None) or {}
        return {int(k): float(v) for k, v in rewards.items()}

    def _scan(self, message: str) -> list[Any]:
        """``[hint spans, listed options or None until asked]`` of a message, remembered: two-player
        games deliver each board to both seats, and a rejected move brings the same board back."""
        entry = self._scans.get(message)
        if entry is None:
            if len(self._scans) >= 256:
                self._scans.clear()
            entry = self._scans[message] = [hint_spans(message), None]
        return entry

    def _observe(self, drained: tuple[int, list[Any]]) -> Observation:
        """Assemble the observation from the messages just drained for the player to move."""
        ta = self._ta
        cfg = self.config
        player, messages = drained
        texts = [str(m[1]) for m in messages]
        # Only the newest printed list describes the current position (a drain can also hold the
        # list printed after the previous move): scan from the end for the last hinted message.
        hints: list[str] = []
        for text in reversed(texts):
            entry = self._scan(text)
            if entry[0]:
                if entry[1] is None:
                    entry[1] = items_in(text, entry[0])
                hints = entry[1]
                break
        self._legal_hint = list(hints)  # a copy: the remembered list stays as it is

        board_kind, prompt_kind = ta.ObservationType.GAME_BOARD, ta.ObservationType.PROMPT
        bounded = cfg.bounded_observation
        # A board supersedes older ones; in a bounded observation the boards before the drain's
        # last one would be dropped at once, so they are not formatted at all.
        last_board = -1
        if bounded:
            for i in range(len(messages) - 1, -1, -1):
                if messages[i][2] == board_kind:
                    last_board = i
                    break
        roles = getattr(self._env.state, "role_mapping", {}) or {}
        window = self._window.setdefault(player, [])
        history = self._history.setdefault(player, [])
        strip = cfg.strip_move_hints
        for i, ((sender, _, kind), message) in enumerate(zip(messages, texts)):
            if kind == prompt_kind and player not in self._prompt:
                self._prompt[player] = message
                continue
            is_board = kind == board_kind
            if is_board and i < last_board:
                continue
            prefix = "[GAME] " if sender == ta.GAME_ID else f"[{roles.get(sender, f'Player {sender}')}] "
            spans = self._scan(message)[0] if strip else None
            line = _strip_line(prefix, message, spans) if spans else prefix + message
            if is_board:
                self._board[player] = line
                window[:] = [entry for entry in window if not entry[1]]
            window.append((line, is_board))
            if not bounded:
                history.append(line)
        keep = cfg.max_feedback_messages if player in self._board else cfg.max_feedback_messages_without_board
        del window[: max(0, len(window) - keep)]

        parts: list[str] = []
        prompt = self._prompt.get(player, "")
        if cfg.include_prompt and prompt:
            if player not in self._prompt_shown:
                # The same prompt every episode: its scan is remembered like any message's.
                self._prompt_shown[player] = strip_spans(prompt, self._scan(prompt)[0], static=True) if strip else prompt
            parts.append(self._prompt_shown[player])
        if bounded:
            board = self._board.get(player)
            if board is not None and not any(is_board for _, is_board in window):
                parts.append(board)
            parts.extend(line for line, _ in window)
            text = "\n\n".join(parts)
        else:
            parts.extend(history)
            text = "\n".join(parts)
        self._last_obs = Observation(player_id=int(player), text=text)
        return self._last_obs


def _strip_line(prefix: str, message: str, spans: list[tuple[int, int, int]]) -> str:
    """``strip_hints(prefix + message)`` from the spans already found in ``message``: the same
    hints, shifted by the prefix (which sits on the message's first line)."""
    n = len(prefix)
    shifted = [(start + n if start else 0, label + n, end + n) for start, label, end in spans]
    return strip_spans(prefix + message, shifted)


def plain_board(value: Any, depth: int = 0) -> Any:
    """A JSON-able copy of a board (lists of str/int/float/bool/None, tuples as lists), or None
    when the value holds anything else (objects have no agreed text form to parse into)."""
    if depth > 4:
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        items = [plain_board(v, depth + 1) for v in value]
        if any(i is None and v is not None for i, v in zip(items, value)):
            return None
        return items
    if hasattr(value, "tolist"):  # numpy arrays
        return plain_board(value.tolist(), depth)
    return None


def _plain(value: Any) -> Any:
    """A JSON-able copy of TextArena's game_info (it may hold enums or custom objects)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
