"""Settings of one environment instance (shared by the TextArena adapter, task suites and plugins)."""

from __future__ import annotations

from ratchet.config import Settings


class EnvConfig(Settings):
    """How an environment is built and what its observations look like."""

    strip_move_hints: bool = True
    """Remove "Valid moves: …" / "Available moves: …" lists from observations (the paper's setting
    for harness evaluation). Static action-format lines in the rules prompt are kept."""

    max_steps: int = 1000
    """Episode cap: after this many steps the episode ends as truncated (reward 0 for everyone)."""

    bounded_observation: bool = True
    """Observation = rules prompt + latest board + messages since the player's last turn, instead of
    TextArena's ever-growing history (which makes long games quadratically slow)."""

    include_prompt: bool = True
    """Start every observation with the game's rules prompt (the same text as game_description())."""

    max_feedback_messages: int = 12
    """Bounded observations keep at most this many of the latest messages."""

    max_feedback_messages_without_board: int = 100
    """The same bound for a game that has shown no board: its messages are its state (Guess the
    Number's earlier guesses, which the game rejects again), so 12 would hide what is legal."""

    error_allowance: int = 1
    """Invalid moves a player may make in a row before the game ends (TextArena's default: 1 warning)."""

    auto_reset: bool = False
    """When an episode ends, start the next one at once (seed + 1); the step still reports done=True
    and carries the new episode's first observation."""

    remote: str = "auto"
    """Where the game runs: "auto" (in-process, or a worker on a Python >= 3.12 interpreter for games
    that need it), "always" (always a worker process), "never" (in-process only)."""

    step_timeout_s: float = 120.0
    """A worker-process environment that does not answer within this many seconds is killed."""
