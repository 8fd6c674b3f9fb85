"""``ratchet evolve`` itself (the CLI entry point, the engine, the store), with the model replaced
by a deterministic scripted endpoint, so a test can SIGKILL it anywhere.

usage: python chaos_cli.py LEDGER [ratchet evolve arguments...]

The endpoint answers each request from its text alone, so an interrupted run and an uninterrupted
one get the same replies. Every reply it returns is first appended to LEDGER (one fsynced line),
across processes: the ledger is what the endpoint was paid for.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # doubles:ModelProposer

import ratchet.cli.evolve as evolve_cli  # noqa: E402
from ratchet.cli import main  # noqa: E402
from ratchet.models import ScriptedModel  # noqa: E402
from ratchet.store.files import append_jsonl  # noqa: E402


def endpoint(ledger: Path) -> ScriptedModel:
    def respond(messages) -> str:
        key = hashlib.sha256(json.dumps(list(messages), sort_keys=True, default=str).encode()).hexdigest()
        append_jsonl(ledger, {"key": key, "at": time.time()})  # fsynced, and a torn line never swallows the next
        return str(round(0.2 + int(key[:6], 16) % 70 / 100, 2))  # a new default pass probability

    return ScriptedModel(respond, name="scripted")


if __name__ == "__main__":
    ledger = Path(sys.argv[1])
    # the run's model only: a run with no proposer_model gets None for it, as from the real _model
    evolve_cli._model = lambda spec, threads=None: endpoint(ledger) if spec else None
    sys.argv = ["ratchet", "evolve", *sys.argv[2:]]
    main()
