"""Settings of ``ratchet serve``: the server, session tagging, the judge and the loops."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ratchet.config import Settings
from ratchet.context.online import ServeContext
from ratchet.online.trainer_config import TrainerConfig

LearnMode = Literal["off", "binary", "opd", "combine"]


class JudgeConfig(Settings):
    """Who scores each finished turn from its next state, and how."""

    kind: Literal["auto", "classifier", "rule", "model", "stacked"] = "auto"
    """``auto``: ``stacked`` when its label model (``judge.model``, else the 1.5B its weights were
    fitted with) is pulled and matches its pinned SHA-256, else ``classifier``; never downloads. The
    server chooses once at start and says which in its start-up line, ``ratchet serve status`` and
    the dashboard (with the pull command when it fell back). ``classifier``: a logistic regression
    over a sentence embedding and lexical cues of the person's message (needs ``ratchet models
    pull all-minilm-l6-v2``; ~10 ms a turn on one core); hears polite, indirect, sarcastic and
    non-English feedback (``bench/results/online_judge.md``). ``rule``: keyword rules (thanks /
    correction / redo / tool error), free and instant, deaf to most everyday phrasings. ``model``:
    a process reward model prompted with the turn and its next state. ``stacked``: the classifier
    weighed with a local model's reading of the message as praise / correction / neither (one
    prompt evaluation of ``judge.model``, by default the 1.5B it was fitted with: ``ratchet models
    pull qwen2.5-coder-1.5b``; refused at start without it). It heard more corrections with fewer
    sign errors than the classifier on two sets written apart (correction recall 0.91 / 0.90
    against 0.85 / 0.82, sign errors 3.6% / 3.7% against 5.1% / 5.4%), for about 1.1 GB more
    memory in the judging process and 1-4 s a judged message on one core (``judge.threads``: 1),
    depending on the load beside it."""

    min_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    """kind=classifier or stacked (or the one auto chose): the class probability a +1 or -1 verdict
    needs (stacked: unset means the value its weights were fitted with); below it the turn gets 0
    (left out of training), because reading praise as a correction or the reverse teaches the
    opposite of what the person asked, while leaving a turn out only loses one sample."""

    model: str | None = None
    """Model spec of the judge when kind=model (``local:qwen2.5-coder-0.5b``, ``openai:…``,
    ``http://host:port/v1#name``). None means the served model's own spec. kind=stacked or auto: the
    label model, ``local:NAME`` of an embedded model (None: the one its weights were fitted with)."""

    votes: int = Field(default=3, ge=1, le=15)
    """Number of independent judge samples per turn; the majority wins and a tie gives 0."""

    temperature: float = Field(default=0.6, ge=0.0, le=2.0)
    """Sampling temperature of each judge vote (the votes must be able to differ)."""

    max_tokens: int = Field(default=256, ge=8)
    """Token limit of one judge answer (the reasoning plus the boxed verdict and the hint)."""

    hint_style: Literal["instruction", "followup"] = "instruction"
    """The rule judge's hint for a corrected turn: ``instruction``, the sentences of the correction
    that state what is wanted, without its complaint and retry request ("No, that's not how I
    asked." / "Please answer again."), which made the hinted teacher apologise; ``followup``, the
    whole correction as the user's follow-up. A correction that is all complaint is used whole."""

    batch: int = Field(default=8, ge=1)
    """How many turns the judging loop takes from the queue at a time."""

    poll_s: float = Field(default=0.5, gt=0)
    """How long the judging loop sleeps when nothing is waiting to be judged."""

    threads: int = Field(default=1, ge=1)
    """CPU threads of the judging process (BLAS/OpenMP and an embedded judge model)."""


class LoopsConfig(Settings):
    """How the server supervises its judging and training processes (``executor=process``)."""

    watch_s: float = Field(default=0.5, gt=0)
    """How often the server checks that its loop processes are alive."""

    max_restarts: int = Field(default=5, ge=0)
    """Restarts of one loop within ``restart_window_s`` before it is left down (status: failed);
    serving goes on without it. 0 never restarts. With ``executor=ray`` Ray restarts each loop's
    actor up to this many times in all (Ray counts no window and waits no backoff)."""

    restart_window_s: float = Field(default=600.0, gt=0)
    """The window ``max_restarts`` counts in: a loop that dies once a day is restarted every time."""

    restart_backoff_s: float = Field(default=1.0, ge=0)
    """Wait before restarting a dead loop; doubles with every restart already in the window."""

    restart_backoff_max_s: float = Field(default=60.0, ge=0)
    """Longest wait before a restart."""

    stop_timeout_s: float = Field(default=30.0, gt=0)
    """How long shutdown waits for the loops to finish their unit of work before terminating them
    (then killing them 5 s later): a trainer in the middle of a step gives up that step."""


class SessionConfig(Settings):
    """How turns are grouped into sessions and paired with their next state."""

    infer: bool = True
    """Infer the session from the conversation prefix when a request carries no session id.
    When false such requests are served and recorded as side turns of session ``unknown``."""

    max_sessions: int = Field(default=10_000, ge=1)
    """Open sessions remembered in memory for pairing and inference (least recently used go first)."""

    default_turn_type: Literal["main", "side"] = "main"
    """Turn type of a request that does not say (``X-Turn-Type``)."""


class OnlineConfig(Settings):
    """``ratchet serve``: an OpenAI-compatible server whose model learns from its conversations."""

    model: str = "local:qwen2.5-coder-0.5b"
    """The served model: ``local:NAME`` (embedded llama.cpp with LoRA hot swap) or
    ``http://host:port/v1#name`` (an OpenAI-compatible backend such as vLLM, proxied)."""

    learn: LearnMode = "combine"
    """Learning signal: ``off`` (serve and collect only), ``binary`` (Binary RL from the judge's
    +1/-1), ``opd`` (on-policy distillation with hindsight hints) or ``combine`` (both)."""

    host: str = "127.0.0.1"
    """Interface to listen on. Local-only by default; any other address requires an API key."""

    port: int = Field(default=8000, ge=0, le=65535)
    """TCP port of the server (0 picks a free one)."""

    api_key: str | None = None
    """Bearer key clients must send. Defaults to $RATCHET_SERVER_KEY; None with a loopback host
    means no authentication."""

    served_name: str | None = None
    """Model id shown by /v1/models and echoed in responses; None uses the model spec."""

    run: str | None = None
    """Run name in the run store; None makes ``serve-<timestamp>``."""

    runs_root: Path | None = None
    """Root of the run store; None uses $RATCHET_RUNS or ./runs."""

    n_ctx: int = Field(default=4096, ge=256)
    """Context window of the embedded serving model (prompt + response tokens)."""

    serving_threads: int = Field(default=1, ge=1)
    """CPU threads of the embedded serving model; keep serving + training threads <= cores."""

    max_tokens: int = Field(default=512, ge=1)
    """Response token limit when a request does not set max_tokens."""

    max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    """Largest request body accepted; a larger one gets a 413 before it is read to the end or
    parsed (2 MiB holds a conversation far longer than the embedded model's context)."""

    backend_concurrency: int = Field(default=1, ge=1)
    """Requests generated at once. 1 for the embedded model (one sequence at a time, requests
    queue); raise it for an HTTP backend that batches (vLLM)."""

    version_poll_s: float = Field(default=1.0, gt=0)
    """How often serving checks the version store for a newly promoted adapter to hot-swap."""

    status_every_s: float = Field(default=10.0, gt=0)
    """How often serving writes live metrics (status.json, metrics.jsonl) to the run store."""

    shutdown_grace_s: float = Field(default=10.0, ge=0)
    """On SIGTERM or Ctrl-C, how long requests in flight may go on to finish; then their
    generation is cancelled (the client gets an error) and the server stops its loops and exits."""

    executor: Literal["process", "ray"] = "process"
    """How the judging and training loops run: local processes, or Ray actors (``ray`` extra)."""

    address: str | None = None
    """executor=ray: the cluster the loops' actors run on — ``auto`` (one started with ``ray start``
    on this machine), ``ray://HOST:10001`` or ``HOST:6379``; None starts a private Ray instance
    here. The actors need no disk shared with this machine: they reach the queue and the versions
    through this process."""

    trainer_loop: str = "ratchet.online.trainer_loop:run_trainer_loop"
    """``module:function`` of the training loop, called as fn(config, queue_path, versions_dir,
    stop_event) in its own process. With ``executor=ray`` the two are the serving machine's queue
    and version store relayed (``online/relayed.py``), not paths: open them with
    ``queue.open_queue`` and ``versions.open_versions``, which take either."""

    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    """The judging loop."""

    loops: LoopsConfig = Field(default_factory=LoopsConfig)
    """Supervision of the judging and training processes: restarts, backoff, shutdown deadline."""

    sessions: SessionConfig = Field(default_factory=SessionConfig)
    """Session tagging, inference and next-state pairing."""

    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    """The training loop (LoRA on CPU). ``ratchet serve`` sets its model and signal from ``model``
    and ``learn`` so the trained weights are the served ones."""

    context: ServeContext = Field(default_factory=ServeContext)
    """A playbook learned from judged turns and put into served prompts (opt-in: ``context.online``;
    see docs/context.md)."""

    @field_validator("learn", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        # YAML reads a bare `off` as False.
        return "off" if value is False else value

    def resolved_trainer(self) -> TrainerConfig:
        """The trainer settings with the served model and the learning signal filled in."""
        update: dict[str, object] = {"signal": {"binary": "rl"}.get(self.learn, self.learn)}
        if self.model.startswith("local:"):
            update["model"] = self.model.split(":", 1)[1]
        if self.learn == "off":
            update.pop("signal")
        return self.trainer.model_copy(update=update)
