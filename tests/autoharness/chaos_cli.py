"""``ratchet autoharness`` itself (the CLI entry point, the real TextArena game, the sandbox), with
the refiner replaced by a deterministic scripted endpoint, so a test can SIGKILL it anywhere.

usage: python chaos_cli.py LEDGER [ratchet autoharness options...]

The endpoint answers each request from its text alone (the next harness version after the last
``# vN`` it sees), so an interrupted run and an uninterrupted one get the same replies. Every
reply it returns is first appended to LEDGER (one fsynced line with the request's hash), across
processes: the ledger is what the endpoint was paid for.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fakes import GOOD  # noqa: E402

import ratchet.models  # noqa: E402
from ratchet.cli import main  # noqa: E402
from ratchet.models import ScriptedModel  # noqa: E402
from ratchet.store.files import append_jsonl  # noqa: E402


def version(n: int) -> str:
    """Harness version n: accepts everything and proposes cells in a fixed order from cell n % 9,
    so different versions reach different legal rates; version 6 is correct."""
    if n >= 6:
        return GOOD + "# v6\n"
    return (f"# v{n}\nimport random\n\ndef propose_action(board):\n    return '[' + str(({n} + random.randint(0, {n})) % 9) + ']'\n\n"
            "def is_legal_action(board, action):\n    return True\n")


def endpoint(ledger: Path) -> ScriptedModel:
    def respond(messages) -> str:
        found = re.findall(r"# v(\d+)", messages[-1]["content"])
        text = "```python\n" + version(int(found[-1]) + 1 if found else 1) + "```"
        key = hashlib.sha256(json.dumps(list(messages), sort_keys=True, default=str).encode()).hexdigest()
        append_jsonl(ledger, {"key": key, "at": time.time()})  # fsynced, and a torn line never swallows the next
        return text

    return ScriptedModel(respond, name="scripted")


if __name__ == "__main__":
    ledger = Path(sys.argv[1])
    ratchet.models.load_model = lambda spec, threads=None: endpoint(ledger)  # the CLI imports it when it runs
    sys.argv = ["ratchet", "autoharness", *sys.argv[2:]]
    main()
