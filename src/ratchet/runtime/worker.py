"""The process of one sub-agent: ``python -m ratchet.runtime.worker AGENT_DIR [--message TEXT]``.

It rebuilds the model from its spec, then starts the task or resumes the saved conversation.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ratchet.models.spec import load_model
from ratchet.runtime.agent import Agent
from ratchet.runtime.workspace import HarnessWorkspace
from ratchet.store import read_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ratchet.runtime.worker")
    parser.add_argument("agent_dir", type=Path)
    parser.add_argument("--message", default="")
    args = parser.parse_args(argv)
    # close_agent sends SIGTERM: leave through the normal exit path so the sandbox is cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    spec = read_json(args.agent_dir / "spec.json")
    model = load_model(spec["model"], **spec.get("model_options", {}))
    agent = Agent(model, spec["workdir"], args.agent_dir, workspace=HarnessWorkspace(spec["workspace"]),
                  agent_id=args.agent_dir.name, depth=int(spec["depth"]), model_spec=spec["model"],
                  model_options=spec.get("model_options", {}))
    state = read_json(args.agent_dir / "state.json", {}) or {}
    result = agent.resume(args.message) if state.get("messages") else agent.run(spec["task"])
    print(f"{agent.agent_id}: {result.exit_status} after {result.steps} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
