"""Environments in a worker process, possibly on another interpreter.

Five of the paper's games (Chess, Checkers, ReverseTicTacToe, IteratedStagHunt, UltimateTexasHoldem)
use f-string syntax that only Python >= 3.12 parses, while the main environment is 3.11 (the CPU
trainer's torch build exists only for 3.11). Such a game runs in a worker on a >= 3.12 interpreter
that speaks JSON lines over its stdin/stdout; :class:`RemoteEnvironment` is the same
``Environment`` as :class:`~ratchet.envs.textarena_env.TextArenaEnv` seen through that pipe.

Interpreter probe, first hit wins: ``$RATCHET_ENVS_PYTHON``; ``<repo>/.venv-envs/bin/python``
(made by scripts/setup.sh); ``python3.13`` / ``python3.12`` on PATH that can import textarena.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from ratchet.contracts import Observation, RatchetError, StepResult
from ratchet.envs.config import EnvConfig

SRC_DIR = Path(__file__).resolve().parents[2]  # …/src, so a worker imports this very ratchet
REPO_DIR = SRC_DIR.parent


def _works(python: str) -> tuple[bool, str]:
    """Can ``python`` (>= 3.12) import textarena and ratchet? (ok, reason-if-not)."""
    code = "import sys; assert sys.version_info >= (3, 12), sys.version; import textarena, ratchet.envs"
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR)}
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{python}: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return False, f"{python}: {last}"
    return True, ""


@lru_cache(maxsize=1)
def envs_python() -> tuple[str | None, str]:
    """(path of a usable Python >= 3.12, or None; why not, if None)."""
    if sys.version_info >= (3, 12):
        return sys.executable, ""
    tried: list[str] = []
    candidates: list[str] = []
    if os.environ.get("RATCHET_ENVS_PYTHON"):
        candidates.append(os.environ["RATCHET_ENVS_PYTHON"])
    local = REPO_DIR / ".venv-envs" / "bin" / "python"
    if local.exists():
        candidates.append(str(local))
    for name in ("python3.13", "python3.12"):
        found = shutil.which(name)
        if found:
            candidates.append(found)
    for python in candidates:
        ok, why = _works(python)
        if ok:
            return python, ""
        tried.append(why)
    detail = "; ".join(tried) if tried else "none found"
    return None, (
        "needs Python >= 3.12 with textarena (tried RATCHET_ENVS_PYTHON, .venv-envs, python3.13/3.12: "
        f"{detail}); run scripts/setup.sh or set RATCHET_ENVS_PYTHON"
    )


def result_to_dict(result: StepResult) -> dict[str, Any]:
    obs = result.observation
    return {
        "observation": None if obs is None else {"player_id": obs.player_id, "text": obs.text},
        "done": result.done,
        "legal": result.legal,
        "illegal_reason": result.illegal_reason,
        "ended_by_illegal": result.ended_by_illegal,
        "losing_not_illegal": result.losing_not_illegal,
        "rewards": None if result.rewards is None else {str(k): v for k, v in result.rewards.items()},
        "info": result.info,
    }


def result_from_dict(data: dict[str, Any]) -> StepResult:
    obs = data["observation"]
    rewards = data["rewards"]
    return StepResult(
        observation=None if obs is None else Observation(obs["player_id"], obs["text"]),
        done=data["done"],
        legal=data["legal"],
        illegal_reason=data["illegal_reason"],
        ended_by_illegal=data["ended_by_illegal"],
        losing_not_illegal=data["losing_not_illegal"],
        rewards=None if rewards is None else {int(k): float(v) for k, v in rewards.items()},
        info=data["info"],
    )


class RemoteEnvironment:
    """A TextArena game in a worker process (JSON lines over pipes). Implements ``Environment``."""

    def __init__(
        self, env_id: str, num_players: int, config: EnvConfig | None = None, python: str | None = None
    ) -> None:
        self.env_id = env_id
        self.num_players = num_players
        self.config = config or EnvConfig()
        if python is None:
            python, why = envs_python()
            if python is None:
                raise RatchetError(f"{env_id} cannot run here: {why}", hint="bash scripts/setup.sh")
        self._stderr = tempfile.TemporaryFile(mode="w+")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC_DIR), os.environ.get("PYTHONPATH", "")])}
        env.setdefault("OMP_NUM_THREADS", "1")
        self._proc = subprocess.Popen(
            [python, "-m", "ratchet.envs.remote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
            env=env,
        )
        self._last_obs: Observation | None = None
        self._call("make", env_id=env_id, num_players=num_players, config=self.config.model_dump())

    def _call(self, op: str, **args: Any) -> Any:
        if self._proc.poll() is not None:
            raise RatchetError(f"{self.env_id}: environment worker exited ({self._proc.returncode}): {self._tail()}")
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self._proc.stdin.flush()
        ready, _, _ = select.select([self._proc.stdout], [], [], self.config.step_timeout_s)
        if not ready:
            self._kill()
            raise RatchetError(
                f"{self.env_id}: environment worker did not answer {op!r} within {self.config.step_timeout_s}s",
                hint="raise EnvConfig.step_timeout_s for slow resets",
            )
        line = self._proc.stdout.readline()
        if not line:
            self._kill()
            raise RatchetError(f"{self.env_id}: environment worker died during {op!r}: {self._tail()}")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise RatchetError(f"{self.env_id}: {op} failed in the worker: {reply.get('error')}")
        return reply.get("value")

    def _tail(self) -> str:
        if self._stderr.closed:
            return "(closed)"
        self._stderr.seek(0)
        return self._stderr.read()[-800:]

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=5)

    def reset(self, seed: int) -> Observation:
        obs = self._call("reset", seed=seed)
        self._last_obs = Observation(obs["player_id"], obs["text"])
        return self._last_obs

    def step(self, action: str) -> StepResult:
        result = result_from_dict(self._call("step", action=action))
        if result.observation is not None:
            self._last_obs = result.observation
        return result

    def observe(self) -> Observation:
        if self._last_obs is None:
            raise RatchetError(f"{self.env_id}: observe() before reset()", hint="call reset(seed) first")
        return self._last_obs

    def game_description(self) -> str:
        return self._call("description")

    def legal_moves_hint(self) -> list[str]:
        return self._call("legal_moves_hint")

    def legal_moves(self, seed: int = 0) -> list[str] | None:
        return self._call("legal_moves", seed=seed)

    def board_state(self) -> Any:
        return self._call("board_state")

    def probe(self, action: str) -> bool:
        return self._call("probe", action=action)

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._call("close")
                self._proc.wait(timeout=5)
            except (RatchetError, OSError, subprocess.TimeoutExpired, ValueError):
                self._kill()
        self._stderr.close()

    def __del__(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()


def _serve() -> None:
    """Worker loop: one JSON request per line on stdin, one JSON reply per line on stdout."""
    # Games print; keep the protocol channel clean by moving fd 1 aside and pointing it at stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from ratchet.envs.textarena_env import TextArenaEnv

    env: TextArenaEnv | None = None
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        try:
            if op == "make":
                env = TextArenaEnv(
                    request["env_id"], request["num_players"], EnvConfig.model_validate(request["config"])
                )
                value: Any = None
            elif env is None:
                raise RatchetError("no environment made yet")
            elif op == "reset":
                obs = env.reset(int(request["seed"]))
                value = {"player_id": obs.player_id, "text": obs.text}
            elif op == "step":
                value = result_to_dict(env.step(request["action"]))
            elif op == "description":
                value = env.game_description()
            elif op == "legal_moves_hint":
                value = env.legal_moves_hint()
            elif op == "board_state":
                value = env.board_state()
            elif op == "legal_moves":
                value = env.legal_moves(int(request.get("seed", 0)))
            elif op == "probe":
                value = env.probe(request["action"])
            elif op == "close":
                env.close()
                proto.write(json.dumps({"ok": True, "value": None}) + "\n")
                return
            else:
                raise RatchetError(f"unknown op {op!r}")
            proto.write(json.dumps({"ok": True, "value": value}) + "\n")
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it there
            proto.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")


if __name__ == "__main__":
    _serve()
