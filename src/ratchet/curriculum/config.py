"""Settings of one curriculum (``ratchet autoharness learn``): which games train and which judge, how
many rounds, the searches' settings, the trainer's and the games gate's."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.config import Settings
from ratchet.curriculum.policy import FeedbackConfig
from ratchet.online.trainer_config import TrainerConfig


def default_search() -> AutoHarnessConfig:
    """A small search per game: 4 iterations of 4 samples, at most 12 refiner calls, 30 steps a game."""
    return AutoHarnessConfig.model_validate({"iterations": 4, "eval_steps": 30, "search_seeds": list(range(6)),
                                             "heldout_seeds": [1000, 1001], "budget": {"max_calls": 12}})


def default_trainer() -> TrainerConfig:
    """The trainer as the curriculum needs it: the model's own replies distilled along (``served``),
    long harness requests kept whole, every fed sample in the round's one update, converted for llama.cpp."""
    return TrainerConfig(signal="combine", distill_target="served", max_seq_len=4096, batch_size=64, min_batch=1,
                         max_wait_s=0.0, poll_interval_s=0.2, kl_samples=0, convert_gguf=True)


class CurriculumConfig(Settings):
    """One curriculum across game families: per round, searches on the training games with the
    current weight version, their samples trained on, the new version judged on held-out games."""

    model: str = "local:qwen2.5-coder-0.5b"
    """The base model, ``local:NAME`` (no ``@version``: the curriculum names its own versions)."""
    train_suite: str = ""
    """Training games: comma-separated game ids, suite names (``autoharness-40``) or a suite's family
    (``autoharness-40/puzzle``); no family may also be held out."""
    heldout_suite: str = ""
    """Held-out games, written as ``train_suite``: the games gate's, never trained on."""
    rounds: int = Field(default=2, ge=1)
    """Rounds of search → training → games gate; a resumed curriculum may be given more."""
    train_seeds: int = Field(default=2, ge=1)
    """Searches per training game per round, each with its own search seed (``rng_seed``): round r
    uses seeds r·train_seeds … r·train_seeds + train_seeds − 1, so no round repeats another's."""
    heldout_seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    """Search seeds of the held-out searches, the same for every version (paired by game and seed)."""
    search: AutoHarnessConfig = Field(default_factory=default_search)
    """Every search's settings; ``env``, ``model`` and ``rng_seed`` are set per search, and the rules
    fitted without a model (``ideas.induce``) and the library seed are switched off: the model's own
    code is what is measured and trained on. ``hide_failure_types`` is the curriculum's to set (a
    training search hides the types the last round left to the weights; a held-out search none),
    so naming it here is refused."""
    trainer: TrainerConfig = Field(default_factory=default_trainer)
    """The training loop's settings (``model`` is set from ``model``)."""
    gate_alpha: float = Field(default=0.05, gt=0, lt=1)
    """Level of the games gate's one-sided paired test (sign flips over (game, seed) pairs); with
    too few pairs for any outcome to reach it, the point estimates decide."""
    train_timeout_s: float = Field(default=3600.0, gt=0)
    """Most seconds a round's training may take to publish a version; past it the round stops with
    the reason (the queue keeps its samples; a resumed curriculum trains them again)."""
    feedback: FeedbackConfig = Field(default_factory=FeedbackConfig)
    """Which loop each failure type of a round's training searches goes to (``feedback.policy``:
    ``both``, the default, feeds every failed sample; see :mod:`ratchet.curriculum.policy`)."""
    threads: int | None = None
    """llama.cpp threads of the searches' model (None: the backend's default)."""

    @field_validator("search", "trainer", mode="before")
    @classmethod
    def _over_defaults(cls, value: object, info: ValidationInfo) -> object:
        # A partial `search:` or `trainer:` (YAML, --set) changes the curriculum's defaults, not the
        # plain AutoHarnessConfig / TrainerConfig ones (whose trainer distills a teacher's reply).
        if isinstance(value, dict):
            base = (default_search() if info.field_name == "search" else default_trainer()).model_dump()
            return _merged(base, value)
        return value

    @field_validator("search")
    @classmethod
    def _hiding_is_the_policy_s(cls, value: AutoHarnessConfig) -> AutoHarnessConfig:
        if value.hide_failure_types:
            raise ValueError("search.hide_failure_types is set per round by the feedback policy (the types it "
                             "left to the weights); use feedback.policy / feedback.by_type instead")
        return value

    @field_validator("model")
    @classmethod
    def _no_version(cls, value: str) -> str:
        if not value.startswith("local:") or "@" in value.split(":", 1)[1]:
            raise ValueError(f"{value!r}: the curriculum trains a local model's weights; name it local:NAME "
                             "without @version (it names its versions itself)")
        return value

    @field_validator("heldout_seeds")
    @classmethod
    def _some_seeds(cls, value: list[int]) -> list[int]:
        if not value or len(set(value)) != len(value):
            raise ValueError("give one or more distinct held-out search seeds")
        return value

    def base_name(self) -> str:
        """The catalog name or GGUF path after ``local:``."""
        return self.model.split(":", 1)[1]


def _merged(base: dict, given: dict) -> dict:
    """``given`` over ``base``, nested mappings merged key by key."""
    out = dict(base)
    for k, v in given.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
