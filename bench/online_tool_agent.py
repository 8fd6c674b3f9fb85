"""The runtime's own agent in native tool mode against ``ratchet serve``: its turns judged from the
tool results.

One in-process server over the embedded model (greedy), learning on (turns collected into a queue),
answers Ratchet's coding agent with ``protocol=native`` (OpenAI ``tools``; each tool result goes back
as a ``tool`` message) on coding-suite tasks. The suite's grader scores the agent's tree; then the
rule judge scores every collected turn from its next state, which for a tool call is the tool's
result (``tool: ...``). The table says, per task, how many model calls came back as tool calls (the
server's ``finish_reason``, recorded with each turn), how many turns were paired with a tool result,
and the rewards the judge gave them. Writes ``bench/results/online_tool_agent.{json,md}``.

    python -m bench.online_tool_agent --tasks fahrenheit,fizzbuzz-fifteen,median-even --step-limit 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import time
from collections import Counter
from pathlib import Path

from bench._results import write_json, write_markdown
from ratchet.models.registry import cached_path
from ratchet.models.spec import load_model
from ratchet.online.judge import RuleJudge
from ratchet.online.llama_policy import LlamaPolicy
from ratchet.online.policy import PolicyHost
from ratchet.online.queue import TurnQueue
from ratchet.online.server import ServerThread, create_app, make_state
from ratchet.online.tool_calls import Tool, split_reply
from ratchet.runtime import Agent, HarnessWorkspace
from ratchet.runtime.suite import grade, load_suite, prepare

ROOT = Path(__file__).resolve().parents[1]


def call_counts(turns: list[dict]) -> tuple[int, int]:
    """(replies that came back with ``tool_calls``, calls in all): the recorded replies split again
    as the server split them ("auto": nothing forced)."""
    counts = [len(split_reply(t["response_text"], [Tool(d["function"]["name"]) for d in t.get("tools") or []]).calls)
              for t in turns]
    return sum(n > 0 for n in counts), sum(counts)


def recorded(path: Path) -> list[dict]:
    """Every turn in the queue at ``path``, oldest first, as recorded."""
    db = sqlite3.connect(path)
    try:
        return [json.loads(data) for (data,) in db.execute("SELECT data FROM turns ORDER BY created_at")]
    finally:
        db.close()


def run(task_ids: list[str], model: str, step_limit: int, max_tokens: int, threads: int, store: Path) -> dict:
    policy = LlamaPolicy(cached_path(model), n_ctx=8192, n_threads=threads, name=model)
    queue = TurnQueue(store / "queue.sqlite")
    state = make_state(PolicyHost(lambda adapter: policy), queue, served_name="qwen", max_tokens=max_tokens)
    tasks = [t for t in load_suite("coding-basics") if t.id in task_ids]
    rows, seen = [], set()
    load_before = [round(x, 2) for x in os.getloadavg()]
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
            state.collector.flush()
            mine = [t for t in recorded(store / "queue.sqlite") if t["turn_id"] not in seen]
            seen.update(t["turn_id"] for t in mine)
            with_calls, calls = call_counts(mine)
            rows.append({"task_id": task.id, "solved": grade(task, workdir).score == 1.0, "exit_status": status,
                         "steps": steps, "agent_s": round(time.perf_counter() - started, 1), "turns": len(mine),
                         "tool_call_turns": sum(t.get("finish_reason") == "tool_calls" for t in mine),
                         "replies_with_calls": with_calls, "calls": calls, "turn_ids": [t["turn_id"] for t in mine]})
    state.collector.close()
    load_after = [round(x, 2) for x in os.getloadavg()]
    judge = RuleJudge()
    judged = [(turn, next_state, judge.judge(turn, next_state).reward) for turn, next_state in queue.turns_to_judge(10_000)]
    for row in rows:
        ids = set(row.pop("turn_ids"))
        mine = [(t, ns, r) for t, ns, r in judged if t.turn_id in ids]
        row["paired"] = len(mine)
        row["paired_with_tool_result"] = sum(ns.startswith("tool:") for _, ns, _ in mine)
        row["rewards_from_tool_results"] = {str(k): v for k, v in
                                            Counter(r for _, ns, r in mine if ns.startswith("tool:")).items()}
    stats = queue.stats()
    return {
        "model": model, "step_limit": step_limit, "max_tokens": max_tokens, "threads": threads,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_before": load_before,
        "load_after": load_after, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tasks": rows,
        "turns_collected": stats.get("turns"), "turns_paired": len(judged),
        "tool_call_turns": sum(r["tool_call_turns"] for r in rows),
        "replies_with_calls": sum(r["replies_with_calls"] for r in rows), "calls": sum(r["calls"] for r in rows),
        "paired_with_tool_result": sum(1 for _, ns, _ in judged if ns.startswith("tool:")),
        "rewards": {str(k): v for k, v in Counter(r for _, _, r in judged).items()},
        "examples": [{"reply": t.response_text[:160], "finish_reason": t.finish_reason, "next_state": ns[:160],
                      "reward": r} for t, ns, r in judged[:8]],
    }


def render(result: dict) -> str:
    lines = ["# The runtime's agent with native tools against ratchet serve (bench/online_tool_agent.py)", "",
             (f"{result['model']} served greedy in process (learning on: turns collected and paired), Ratchet's "
              f"coding agent with `protocol=native` (OpenAI `tools`, `tool_choice` auto), step limit "
              f"{result['step_limit']}, {result['max_tokens']} reply tokens, {result['threads']} thread, measured "
              f"{result['measured_at']}; load average {result['load_before']} before, {result['load_after']} after "
              f"({result['machine']}, shared with other jobs)."), "",
             ("| task | exit | solved | model calls | replies with `tool_calls` (calls in all) | finish_reason "
              "`tool_calls` | paired with a tool result | rewards from tool results (+1/0/-1) | wall (s) |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for row in result["tasks"]:
        r = row["rewards_from_tool_results"]
        lines.append(f"| {row['task_id']} | {row['exit_status'][:60]} | {row['solved']} | {row['turns']} | "
                     f"{row['replies_with_calls']} ({row['calls']}) | {row['tool_call_turns']} | "
                     f"{row['paired_with_tool_result']} / {row['paired']} | "
                     f"{r.get('1', 0)} / {r.get('0', 0)} / {r.get('-1', 0)} | {row['agent_s']} |")
    lines += ["", "| reply (first 160 characters) | finish | next state (first 160) | reward |", "|---|---|---|---|"]
    lines += [f"| {json.dumps(e['reply'])[1:-1].replace('|', '/')} | {e['finish_reason']} | "
              f"{json.dumps(e['next_state'])[1:-1].replace('|', '/')} | {e['reward']} |" for e in result["examples"]]
    lines += ["", ("One greedy run per task: what happened, not a rate. The rule judge scores a turn whose next "
                   "state is a tool result by that result (+1 unless it shows an error).")]
    return "\n".join(lines) + "\n"


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
    write_json(args.out, result)
    text = render(result)
    write_markdown(args.out, text)
    print(text)


if __name__ == "__main__":
    main()
