"""What several benches set up alike, so that no bench imports another: the HumanEval run the
evolve benches and the peers' bench share (its splits, suite and proposer settings, the model
behind the shared reply cache) and the bench environment the peers run in.

Not a benchmark itself (``python -m bench`` runs only modules whose names do not start with ``_``).
The HumanEval splits are fixed slices of the problem file chosen by index before anything was run
(``bench/evolve_humaneval.py`` says why). The peers (GEPA, OpenEvolve, mini-swe-agent) run in their
own environment, never the package's: built by ``scripts/setup-bench.sh`` (``make bench-env``) at
``.venv-bench`` in the checkout, or wherever ``$RATCHET_BENCH_VENV`` points.
"""

from __future__ import annotations

import argparse
import json
import os
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from bench._results import RESULTS
from ratchet.contracts import Completion, Message

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = ROOT / "examples" / "humaneval-coder"
MODEL = "local:qwen2.5-coder-0.5b"
#: Every evolve bench's proposer replies, whatever the result's name: a request's key holds the
#: model's name, so one file serves every proposer model and a rerun under a new name replays them.
PROPOSER_REPLIES = RESULTS / "evolve.proposer.replies.jsonl"
#: The HumanEval runs' model replies, shared by the evolve bench and the peers' bench.
REPLIES = RESULTS / "evolve_humaneval.replies.jsonl"

SPLITS = {
    "search": [f"HumanEval/{i}" for i in range(100, 104)],
    "heldin": [f"HumanEval/{i}" for i in range(104, 116)],
    "test": [f"HumanEval/{i}" for i in range(134, 164)],
}
#: The reduced run (``--size small``): the first problems of each slice above, for a machine too
#: busy for the full one (each split is a prefix of the full one's, so their replies are shared).
SMALL_SPLITS = {
    "search": [f"HumanEval/{i}" for i in range(100, 102)],
    "heldin": [f"HumanEval/{i}" for i in range(104, 110)],
    "test": [f"HumanEval/{i}" for i in range(134, 142)],
}
#: The workflow search's splits (``bench/workflow_search.py``'s docstring says how they were chosen),
#: shared with the peers' bench, which runs GEPA on them as the prompt-only reference at the search's
#: budget (``python -m bench.evolve_peers --size workflow``).
WORKFLOW_SPLITS = {
    "search": [f"HumanEval/{i}" for i in range(100, 116)],
    "heldin": [f"HumanEval/{i}" for i in range(134, 164)],
    "test": [f"HumanEval/{i}" for i in [*range(20, 100), *range(116, 134)]],
}
#: The suite's settings, shared by every arm (the peers' bench grades with the same options).
SUITE_OPTIONS: dict[str, Any] = {
    "ids": [i for ids in SPLITS.values() for i in ids],
    "grade_timeout_s": 10,
    "workflow": {"max_model_calls": 3, "max_test_runs": 3, "max_tokens": 512, "temperature": 0.0},
}
#: The proposer's settings, shared with the peers where they have a counterpart (reply budget, temperature).
PROPOSER_MAX_TOKENS = 400
PROPOSER_TEMPERATURE = 0.7


class SeedFreeAtGreedy:
    """At temperature 0 the embedded decoder is greedy, so the seed changes nothing: it is dropped
    from the request (and so from the reply cache's key), and equal requests share one reply."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        if float(params.get("temperature", 0.0)) == 0.0:
            params["seed"] = None
        return self.inner.complete(messages, **params)

    async def acomplete(self, messages: list[Message], **params: Any) -> Completion:
        return self.complete(messages, **params)


def shared_model(spec: str = MODEL, threads: int = 2, n_ctx: int = 4096, replies: Path = REPLIES) -> Any:
    """The model behind the shared reply cache (``scripted:`` runs the plumbing without a model)."""
    # llama.cpp loads only here, in the benches that need the model.
    from ratchet.models import load_model
    from ratchet.models.replay import ReplayModel

    overrides = {"n_ctx": n_ctx, "n_threads": threads} if spec.startswith("local:") else {}
    return SeedFreeAtGreedy(ReplayModel(load_model(spec, **overrides), replies, mode="auto"))


def proposer_model(spec: str | None, threads: int = 2, n_ctx: int = 4096) -> Any:
    """The proposers' own model (``proposer_model``) behind the shared proposer reply cache, or
    None with no spec (the proposers then ask the suite's model)."""
    return shared_model(spec, threads, n_ctx=n_ctx, replies=PROPOSER_REPLIES) if spec else None


def suite_options(splits: dict[str, list[str]]) -> dict[str, Any]:
    return {**SUITE_OPTIONS, "ids": [i for ids in splits.values() for i in ids]}


def span(ids: list[str]) -> str:
    return f"{ids[0]}-{ids[-1].split('/')[-1]}"


def proposer_suffix(args: argparse.Namespace) -> str:
    """What names a run whose proposer asks another model apart from the runs with one model."""
    return f"_proposer-{args.proposer_model.rsplit(':', 1)[-1]}" if getattr(args, "proposer_model", None) else ""


def peer_python(variable: str, default: Path, what: str, setup: str) -> Path:
    """A peer environment's interpreter (``$variable`` or ``default``); a clear stop naming the
    set-up command (``{venv}`` in ``setup`` is the environment's path) when it is missing."""
    venv = Path(os.environ.get(variable, default))
    python = venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no {what} at {venv}: build it with {setup.format(venv=venv)}")
    return python


def bench_python() -> Path:
    """The bench environment's interpreter; a clear stop naming the set-up command when it is missing."""
    return peer_python("RATCHET_BENCH_VENV", ROOT / ".venv-bench", "bench environment", "scripts/setup-bench.sh {venv}")


class JsonHandler(BaseHTTPRequestHandler):
    """What the peers' local HTTP endpoints share: JSON replies, and no log line per request (one a
    request would drown the bench's log)."""

    def log_message(self, *args: Any) -> None:
        return

    def reply(self, code: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
