"""Runs one search into a run store (a separate process, so a test can SIGKILL it mid-way).

usage: python resume_worker.py STORE_ROOT RUN_ID_FILE [RESUME_RUN_ID|-] [DELAY_S]
                               [--calls FILE] [--inflight FILE] [--samples N] [--die-at N]

``--calls FILE`` stands for a stateful endpoint: FILE holds how many replies it has sent, across
processes, and every reply carries that number, so a reply asked for twice differs (as from a
non-deterministic model). ``--inflight FILE``: the endpoint writes there when (wall time) it
started on the request it is answering, so a test can kill the search while a reply is pending
rather than in the instant after it was sent. ``--samples N`` samples N replies per refinement (ratchet method, no
other idea), so an iteration makes several calls. ``--die-at N`` SIGKILLs this process when it
is about to ask for reply N + 1, that is, after N replies have arrived.
Prints the final result as JSON on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fakes import GOOD, RULES, FakeTicTacToe, fenced  # noqa: E402

from ratchet.autoharness.config import AutoHarnessConfig, RatchetIdeas  # noqa: E402
from ratchet.autoharness.runtime import InProcessHarness  # noqa: E402
from ratchet.autoharness.search import Synthesis  # noqa: E402
from ratchet.models import ScriptedModel  # noqa: E402
from ratchet.store import RunStore  # noqa: E402
from ratchet.store.files import read_json, write_json_atomic  # noqa: E402


def version(n: int) -> str:
    """Harness version n: accepts everything and proposes cells in a fixed order from cell n % 9,
    so different versions reach different legal rates; version 6 is correct."""
    if n >= 6:
        return GOOD + "# v6\n"
    return (f"# v{n}\nimport random\n\ndef propose_action(board):\n    return '[' + str(({n} + random.randint(0, {n})) % 9) + ']'\n\n"
            "def is_legal_action(board, action):\n    return True\n")


def responder(delay: float, calls: Path | None = None, die_at: int | None = None, inflight: Path | None = None):
    def respond(messages) -> str:
        sent = int(read_json(calls, 0)) if calls else 0
        if die_at is not None and sent >= die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if inflight:
            write_json_atomic(inflight, {"reply": sent + 1, "since": time.time()})
        time.sleep(delay)
        found = re.findall(r"# v(\d+)", messages[-1]["content"])
        text = version(int(found[-1]) + 1 if found else 1)
        if calls:
            text += f"# reply {sent + 1}\n"
            write_json_atomic(calls, sent + 1)
        return fenced(text)

    return respond


def config(samples: int) -> AutoHarnessConfig:
    base = dict(eval_envs=2, eval_steps=20, iterations=12, search_seeds=[0, 1], heldout_seeds=[50], rng_seed=3)
    if samples <= 1:
        return AutoHarnessConfig(method="faithful", **base)
    ideas = RatchetIdeas(transitions=False, helper_library=False, few_shot=False, scaffold=False, grammar=False,
                         library_seed=False, induce=False, novelty=False, repair=False, samples_per_step=samples)
    return AutoHarnessConfig(method="ratchet", ideas=ideas, **base)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("id_file", type=Path)
    parser.add_argument("resume", nargs="?", default="-")
    parser.add_argument("delay", nargs="?", type=float, default=0.0)
    parser.add_argument("--calls", type=Path)
    parser.add_argument("--inflight", type=Path)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--die-at", type=int)
    args = parser.parse_args()
    store = RunStore(args.root)
    cfg = config(args.samples)
    resume = None if args.resume == "-" else args.resume
    run = store.open_run(resume) if resume else store.create_run("autoharness", cfg.model_dump(), "resume-test")
    args.id_file.write_text(run.id)
    search = Synthesis(cfg, ScriptedModel(responder(args.delay, args.calls, args.die_at, args.inflight)), run, lambda: FakeTicTacToe(),
                       InProcessHarness, description=RULES.format(p=0))
    result = search.run_search()
    nodes = sorted((n["candidate_id"], n["parent_id"], round(n["h"], 6), n["refinements"]) for n in search.tree.to_json())
    print(json.dumps({"best_h": result.best_h, "best_id": result.best_id, "iterations": result.iterations,
                      "calls": result.calls, "tokens": result.tokens, "stop": result.stop_reason, "nodes": nodes,
                      "history": result.history, "replayed": search.replies.replayed}))


if __name__ == "__main__":
    main()
