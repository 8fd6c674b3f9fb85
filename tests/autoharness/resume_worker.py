"""Runs one search into a run store (a separate process, so a test can SIGKILL it mid-way).

usage: python resume_worker.py STORE_ROOT RUN_ID_FILE [RESUME_RUN_ID] [DELAY_S]
Prints the final result as JSON on its last line.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fakes import GOOD, RULES, FakeTicTacToe, fenced  # noqa: E402

from ratchet.autoharness.config import AutoHarnessConfig  # noqa: E402
from ratchet.autoharness.runtime import InProcessHarness  # noqa: E402
from ratchet.autoharness.search import Synthesis  # noqa: E402
from ratchet.models import ScriptedModel  # noqa: E402
from ratchet.store import RunStore  # noqa: E402


def version(n: int) -> str:
    """Harness version n: accepts everything and proposes cells in a fixed order from cell n % 9,
    so different versions reach different legal rates; version 6 is correct."""
    if n >= 6:
        return GOOD + "# v6\n"
    return (f"# v{n}\nimport random\n\ndef propose_action(board):\n    return '[' + str(({n} + random.randint(0, {n})) % 9) + ']'\n\n"
            "def is_legal_action(board, action):\n    return True\n")


def responder(delay: float):
    def respond(messages) -> str:
        time.sleep(delay)
        found = re.findall(r"# v(\d+)", messages[-1]["content"])
        return fenced(version(int(found[-1]) + 1 if found else 1))

    return respond


def main() -> None:
    root, id_file = sys.argv[1], Path(sys.argv[2])
    resume = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    store = RunStore(root)
    cfg = AutoHarnessConfig(method="faithful", eval_envs=2, eval_steps=20, iterations=12, search_seeds=[0, 1],
                            heldout_seeds=[50], rng_seed=3)
    run = store.open_run(resume) if resume else store.create_run("autoharness", cfg.model_dump(), "resume-test")
    id_file.write_text(run.id)
    search = Synthesis(cfg, ScriptedModel(responder(delay)), run, lambda: FakeTicTacToe(), InProcessHarness,
                       description=RULES.format(p=0))
    result = search.run_search()
    nodes = sorted((n["candidate_id"], n["parent_id"], round(n["h"], 6), n["refinements"]) for n in search.tree.to_json())
    print(json.dumps({"best_h": result.best_h, "best_id": result.best_id, "iterations": result.iterations,
                      "calls": result.calls, "stop": result.stop_reason, "nodes": nodes}))


if __name__ == "__main__":
    main()
