"""Can a game run here? Make and reset each id in a subprocess, offline, with a time limit.

Run as ``python -m ratchet.envs.probe ID...``: prints one JSON line per id:
``{"id", "ok", "num_players", "reason"}``. The network is cut in this process (any socket connect
fails at once), so a game that wants to download something is reported, never waited on. Results
are cached by :mod:`ratchet.envs.registry` per (TextArena version, interpreter).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
from typing import Any

PER_ID_TIMEOUT_S = 40
PLAYER_COUNTS = (1, 2, 4, 3, 5, 6)


class _Timeout(Exception):
    pass


def _no_network(*args: Any, **kwargs: Any) -> None:
    raise OSError("network access is disabled while probing environments")


def explain(exc: BaseException) -> str:
    """A short, exact reason a person can act on."""
    text = f"{type(exc).__name__}: {exc}".strip()
    low = text.lower()
    if isinstance(exc, SyntaxError) and sys.version_info < (3, 12):
        return f"needs Python >= 3.12 (SyntaxError on {sys.version.split()[0]})"
    needed = re.search(r"nltk\.download\('([^']+)'\)", text)
    if needed or "nltk" in low:
        name = needed.group(1) if needed else "?"
        return f"needs NLTK data '{name}' (not downloaded; no network use here): python -m nltk.downloader {name}"
    if "api_key" in low or "openrouter" in low or "api key" in low:
        return f"needs an API key ({text.splitlines()[0][:160]})"
    return " ".join(text.split())[:240]


def probe(env_id: str, num_players: int | None) -> dict[str, Any]:
    from ratchet.envs.config import EnvConfig
    from ratchet.envs.textarena_env import TextArenaEnv

    counts = (num_players,) if num_players else PLAYER_COUNTS
    last: BaseException | None = None
    for n in counts:
        try:
            env = TextArenaEnv(env_id, n, EnvConfig(max_steps=5))
            env.reset(0)
            return {"id": env_id, "ok": True, "num_players": n, "reason": None}
        except _Timeout:
            return {"id": env_id, "ok": False, "num_players": num_players, "reason": "reset timed out"}
        except BaseException as exc:  # noqa: BLE001 - every failure is a reason to report
            last = exc
            if isinstance(exc, (SyntaxError, ImportError)):
                break
    return {"id": env_id, "ok": False, "num_players": num_players, "reason": explain(last) if last else "?"}


def main(argv: list[str]) -> None:
    socket.socket.connect = _no_network  # type: ignore[method-assign]
    socket.create_connection = _no_network  # type: ignore[assignment]
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # games print; keep stdout for our JSON lines
    sys.stdout = sys.stderr

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout()

    signal.signal(signal.SIGALRM, on_alarm)
    try:  # games a plugin registers with TextArena exist only once it is imported
        from ratchet.envs.registry import load_plugins

        load_plugins()
    except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the built-in games
        sys.stderr.write(f"env plugins not loaded: {exc}\n")
    for item in argv:
        env_id, _, players = item.partition(":")
        signal.alarm(PER_ID_TIMEOUT_S)
        try:
            record = probe(env_id, int(players) if players else None)
        except _Timeout:
            record = {"id": env_id, "ok": False, "num_players": None, "reason": "reset timed out"}
        finally:
            signal.alarm(0)
        out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
