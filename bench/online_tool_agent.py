"""The runtime's own agent in native tool mode against ``ratchet serve``: its turns judged from the
tool results.

One in-process server over the embedded model (greedy), learning on (turns collected into a queue),
answers Ratchet's coding agent with ``protocol=native`` (OpenAI ``tools``; each tool result goes back
as a ``tool`` message) on coding-suite tasks. The suite's grader scores the agent's tree; then the
rule judge scores every collected turn from its next state, which for a tool call is the tool's
result (``tool: ...``). The table says how many model calls came back as tool calls, how many turns
were paired with a tool result, and the rewards the judge gave.

    python -m bench.online_tool_agent --tasks fahrenheit --step-limit 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections import Counter
from pathlib import Path

from ratchet.models.registry import cached_path
from ratchet.models.spec import load_model
from ratchet.online.judge import RuleJudge
from ratchet.online.policy import LlamaPolicy, PolicyHost
from ratchet.online.queue import TurnQueue
from ratchet.online.server import ServerThread, create_app, make_state
from ratchet.runtime import Agent, HarnessWorkspace
from ratchet.runtime.suite import grade, load_suite, prepare

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def run(task_ids: list[str], model: str, step_limit: int, max_tokens: int, threads: int, store: Path) -> dict:
    policy = LlamaPolicy(cached_path(model), n_ctx=8192, n_threads=threads, name=model)
    queue = TurnQueue(store / "queue.sqlite")
    state = make_state(PolicyHost(lambda adapter: policy), queue, served_name="qwen", max_tokens=max_tokens)
    tasks = [t for t in load_suite("coding-basics") if t.id in task_ids]
    rows = []
    with ServerThread(create_app(state)) as server:
        for task in tasks:
            workspace = HarnessWorkspace()
            config = workspace.settings((f"step_limit={step_limit}", f"max_tokens={max_tokens}", "protocol=native"))
            permissions = workspace.permissions()
            permissions.hidden_paths = [*permissions.hidden_paths, str(task.dir.parent)]
            workdir = prepare(task, store / "work" / task.id)
            agent = Agent(load_model(f"{server.url}/v1#qwen"), workdir, store / "runs" / task.id, workspace=workspace,
                          config=config, permissions=permissions, agent_id=task.id)
            started = time.perf_counter()
            try:
                outcome = agent.run(f"{task.statement}\nThe repository is your working directory; its tests run "
                                    f"with `{task.test_command}`.")
                status, steps = outcome.exit_status, outcome.steps
            except Exception as exc:  # a failed run is a row, not a crash of the bench
                status, steps = f"error: {exc}"[:200], agent.steps
            rows.append({"task_id": task.id, "solved": grade(task, workdir).score == 1.0, "exit_status": status,
                         "steps": steps, "agent_s": round(time.perf_counter() - started, 1)})
    state.collector.close()
    judge = RuleJudge()
    judged = [(turn, next_state, judge.judge(turn, next_state).reward) for turn, next_state in queue.turns_to_judge(10_000)]
    calls = sum(1 for turn in (t for t, _, _ in judged) if "<tool_call>" in turn.response_text or
                turn.response_text.lstrip().startswith(("{", "`")))
    stats = queue.stats()
    return {
        "model": model, "step_limit": step_limit, "max_tokens": max_tokens, "threads": threads,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "tasks": rows,
        "turns_collected": stats.get("turns"), "turns_paired": len(judged),
        "paired_with_tool_result": sum(1 for _, ns, _ in judged if ns.startswith("tool:")),
        "paired_replies_that_called": calls,
        "rewards": dict(Counter(r for _, _, r in judged)),
        "examples": [{"reply": t.response_text[:160], "next_state": ns[:160], "reward": r} for t, ns, r in judged[:6]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="fahrenheit", help="comma-separated coding-basics task ids")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--step-limit", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--store", type=Path, default=Path("/tmp/ratchet-online-tool-agent"))
    parser.add_argument("--out", default="online_tool_agent")
    args = parser.parse_args()
    args.store.mkdir(parents=True, exist_ok=True)
    result = run(args.tasks.split(","), args.model, args.step_limit, args.max_tokens, args.threads, args.store)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "examples"}, indent=2))


if __name__ == "__main__":
    main()
