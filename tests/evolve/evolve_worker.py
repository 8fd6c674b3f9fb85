"""Runs one engine run into a store, in its own process, so a test can SIGKILL it mid-way.

usage: python evolve_worker.py STORE WORKSPACE RUN_ID_FILE EVAL_LOG CALL_LOG [--resume RUN] [--die-before N]

The model is scripted and stateful across processes: CALL_LOG counts the replies it has sent and
every reply depends on that count, so a reply asked for twice would come back different. Prints
the run's summary (without the report) as JSON on its last line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from doubles import config  # noqa: E402

from ratchet.evolve.loop import Engine  # noqa: E402
from ratchet.models import ScriptedModel  # noqa: E402
from ratchet.store import RunStore  # noqa: E402


def responder(call_log: Path):
    def respond(messages) -> str:
        sent = len(call_log.read_text().splitlines()) if call_log.exists() else 0
        with call_log.open("a") as f:
            f.write(messages[-1]["content"][:40] + "\n")
        return str(round(0.3 + 0.07 * (sent % 10), 2))

    return respond


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("store", "workspace", "id_file", "eval_log", "call_log"):
        parser.add_argument(name, type=Path)
    parser.add_argument("--resume")
    parser.add_argument("--die-before", type=int)
    args = parser.parse_args()
    cfg = config(args.workspace, "doubles:ModelProposer", iterations=5, seeds=[0, 1],
                 suite={"name": "doubles:CountingSuite",
                        "options": {"tasks": 24, "log": str(args.eval_log), "die_before": args.die_before}},
                 canaries={"enabled": False})
    store = RunStore(args.store)
    if args.resume:
        run = store.open_run(args.resume)
    else:
        run = store.create_run("evolve", cfg)
        args.id_file.write_text(run.id)
    summary = Engine(cfg, run, ScriptedModel(responder(args.call_log))).execute()
    summary.pop("report", None)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
