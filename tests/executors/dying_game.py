"""An env plugin for the cluster tests: ``WorkerDies-v0``, a game whose making kills the process
that makes it, so that every attempt of its synthesis loses its worker. Loaded by the workers
through ``RATCHET_ENV_PLUGINS=dying_game`` (the driver never makes the game)."""

from __future__ import annotations

import os
import signal

from ratchet.envs.registry import register_env


def _die(config):
    os.kill(os.getpid(), signal.SIGKILL)


register_env("WorkerDies-v0", _die, 1, "kills the process that makes it")
