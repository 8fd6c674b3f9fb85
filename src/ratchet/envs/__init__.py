"""Environments: TextArena games, task suites and plugins behind ``contracts.Environment``, the
agents that play them, and the rollout runner. See docs/envs.md.

Importing this package is cheap: TextArena is imported when a game is first made.
"""

from ratchet.envs.config import EnvConfig
from ratchet.envs.registry import SUITES, EnvInfo, env_factory_for, list_envs, make, register_env, suite_ids

__all__ = ["SUITES", "EnvConfig", "EnvInfo", "env_factory_for", "list_envs", "make", "register_env", "suite_ids"]
