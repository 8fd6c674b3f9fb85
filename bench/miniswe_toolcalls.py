"""mini-swe-agent's tool-calling config against ``ratchet serve``: coding-suite tasks, end to end.

bench/runtime_vs_miniswe.py runs mini-swe-agent with its text-based config (commands in fenced
blocks). Its default config (``mini.yaml``) sends one ``bash`` tool as OpenAI ``tools`` and reads
the reply's ``tool_calls``: this runs that config (``bench/_miniswe_worker.py --config toolcall``,
in ``.venv-bench``) against one ``ratchet serve --learn off`` subprocess over the embedded model,
greedy, on tasks of the coding-basics suite, and grades each tree with the suite's grader.
``--tool-choice required`` sends ``tool_choice: "required"`` through the config's ``model_kwargs``
(passed to ``litellm.completion`` as they are), so every reply is grammar-constrained calls (one
or more; one with ``--no-parallel-tool-calls``, which sends ``parallel_tool_calls: false``).

Besides the agent's outcome it reads what the server recorded: the serving queue keeps every turn
(with learning off too) and pairs each with its next state, so the table says how many of the
agent's model calls came back as tool calls (``finish_reason``), how many turns were paired with a
tool result, and the rewards the server's own judge loop gave them (it runs with learning off too;
a turn it had not reached when the server stopped is scored by the rule judge here). It also says how mini-swe-agent's rejected replies were
wrong (its trajectory's FormatErrors). Writes ``bench/results/miniswe_toolcalls.{json,md}``.

    python -m bench.miniswe_toolcalls --tasks fahrenheit,median-even,chunks-partial --tool-choice required
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench._miniswe import format_errors, run_miniswe, start_server, stop_server
from bench._results import write_json, write_markdown
from bench._setup import bench_python
from ratchet.online.judge import RuleJudge
from ratchet.online.queue import TurnQueue
from ratchet.online.tool_calls import Tool, split_reply
from ratchet.runtime.suite import grade, load_suite

ROOT = Path(__file__).resolve().parents[1]


def queue_files(store: Path) -> list[Path]:
    return sorted((store / "serve-runs").rglob("queue.sqlite"))


def recorded_turns(store: Path) -> list[dict]:
    """Every turn the server recorded, oldest first (the queue of its one run under ``store``)."""
    turns = []
    for queue in queue_files(store):
        db = sqlite3.connect(queue)
        try:
            turns += [json.loads(data) for (data,) in db.execute("SELECT data FROM turns ORDER BY created_at")]
        finally:
            db.close()
    return turns


def call_counts(turns: list[dict], forced: bool) -> tuple[int, int]:
    """(replies that came back with ``tool_calls``, calls in all), the recorded replies split again
    as the server split them (a reply cut at ``max_tokens`` after complete calls still returns
    them, with ``finish_reason: length``)."""
    counts = [len(split_reply(t["response_text"], [Tool(d["function"]["name"]) for d in t.get("tools") or []],
                              forced=forced).calls) for t in turns]
    return sum(n > 0 for n in counts), sum(counts)


def judged_turns(store: Path) -> list[dict]:
    """The recorded turns that have a next state, each with its reward: the turn's id, whether its
    next state is a tool result, the reward and who gave it — the server's own judge loop (it runs
    with learning off too) where it got to the turn before the server stopped, else the rule judge
    here, after the run."""
    judge, out = RuleJudge(), []
    for path in queue_files(store):
        db = sqlite3.connect(path)
        try:
            rows = db.execute("SELECT t.turn_id, t.next_state, j.data FROM turns t LEFT JOIN judgements j "
                              "ON j.turn_id = t.turn_id WHERE t.next_state IS NOT NULL ORDER BY t.created_at").fetchall()
        finally:
            db.close()
        unjudged = {turn.turn_id: turn for turn, _ in TurnQueue(path).turns_to_judge(100_000)}
        for turn_id, next_state, data in rows:
            if data is not None:
                verdict = json.loads(data)
                reward, by = verdict["reward"], f"server ({verdict.get('judge')})"
            elif turn_id in unjudged:
                reward, by = judge.judge(unjudged[turn_id], next_state).reward, "rule, after the run"
            else:
                continue
            out.append({"turn_id": turn_id, "tool_result": next_state.startswith("tool:"), "reward": reward,
                        "judged_by": by, "next_state": next_state[:160]})
    return out


def render(result: dict) -> str:
    choice = (f"`tool_choice: {result['tool_choice']}` in the config's `model_kwargs`" if result["tool_choice"]
              else "no `tool_choice` sent (the server's default, auto)")
    if not result.get("parallel_tool_calls", True):
        choice += " with `parallel_tool_calls: false`"
    lines = ["# mini-swe-agent's tool-calling config against ratchet serve (bench/miniswe_toolcalls.py)", "",
             (f"{result['model']} served greedy by `ratchet serve --learn off` ({result['threads']} thread), "
              f"mini-swe-agent {result['miniswe_version']} with its `mini.yaml` config (`litellm` model class, one "
              f"`bash` tool), {choice}, step limit "
              f"{result['step_limit']}, {result['max_tokens']} reply tokens, measured {result['measured_at']}; "
              f"load average {result['load_before']} before, {result['load_after']} after (a 2-core machine "
              f"shared with other jobs)."), "",
             ("| task | exit | solved | model calls | replies with `tool_calls` (calls in all) | finish_reason "
              "`tool_calls` | paired with a tool result | rewards (+1/0/-1) | rejected replies | wall (s) |"),
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["tasks"]:
        r = row["rewards"]
        lines.append(f"| {row['task']} | {row['exit_status'][:60]} | {row['solved']} | {row['steps']} | "
                     f"{row['replies_with_calls']} / {row['turns']} ({row['calls']}) | {row['tool_call_turns']} | "
                     f"{row['paired_with_tool_result']} / "
                     f"{row['paired']} | {r.get('1', 0)} / {r.get('0', 0)} / {r.get('-1', 0)} | "
                     f"{(row['format_errors'] or {}).get('rejected', '-')} | {row['wall_s']} |")
    served = result["served"]
    lines += ["", "| what the server recorded, all tasks | count |", "|---|---|",
              f"| turns | {served['turns']} |",
              f"| with the `bash` tool in the prompt | {served['with_tools']} |"]
    lines += [f"| finish_reason `{k}` | {v} |" for k, v in sorted(served["finish_reasons"].items())]
    lines += [f"| turns paired with a tool result, reward {k} | {v} |" for k, v in sorted(served["rewards"].items())]
    lines += [f"| paired turns judged by the {k} | {v} |" for k, v in sorted(served["judged_by"].items())]
    if served.get("replies"):
        lines += ["", "| call | roles sent | finish | the reply (first 200 characters) |", "|---|---|---|---|"]
        lines += [f"| {i} | {' '.join(r['roles'][-3:])} | {r['finish']} | "
                  f"{json.dumps(r['text'])[1:-1].replace('|', '/')} |"
                  for i, r in enumerate(served["replies"][:12], 1)]
    lines += ["", result["notes"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.miniswe_toolcalls", description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="embedded model name")
    parser.add_argument("--tasks", default="fahrenheit", help="comma-separated coding-basics task ids")
    parser.add_argument("--tool-choice", default="", help="tool_choice in mini-swe-agent's model_kwargs "
                        "(required | auto); empty: not sent")
    parser.add_argument("--no-parallel-tool-calls", action="store_true",
                        help="send parallel_tool_calls: false in model_kwargs (one call per reply)")
    parser.add_argument("--step-limit", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=16384)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--store", type=Path, default=None, help="run directory (default runs/bench-miniswe-toolcalls)")
    parser.add_argument("--out", default="miniswe_toolcalls", help="result name in bench/results")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still stops the server (finally below)
    store = (args.store or ROOT / "runs" / "bench-miniswe-toolcalls").resolve()
    if store.exists() and any(store.iterdir()):
        raise SystemExit(f"{store} is not empty: pass a fresh --store (the turns read back are the run's own)")
    store.mkdir(parents=True, exist_ok=True)
    suite = {t.id: t for t in load_suite("coding-basics")}
    unknown = [t for t in args.tasks.split(",") if t not in suite]
    if unknown:
        raise SystemExit(f"no task {unknown} in coding-basics (it has {', '.join(suite)})")
    version = subprocess.run([str(bench_python()), "-c", "import importlib.metadata as m; print(m.version('mini-swe-agent'))"],
                             capture_output=True, text=True, check=False).stdout.strip()
    load_before = [round(x, 2) for x in os.getloadavg()]
    server = start_server(f"local:{args.model}", args.port, args.threads, args.n_ctx, store)
    rows, seen = [], set()
    try:
        for task_id in args.tasks.split(","):
            task = suite[task_id]
            run = run_miniswe(task, store, f"http://127.0.0.1:{args.port}/v1", args.step_limit, args.max_tokens,
                              config="toolcall", tool_choice=args.tool_choice,
                              parallel_tool_calls=not args.no_parallel_tool_calls)
            workdir = Path(run.pop("workdir"))
            run["solved"] = grade(task, workdir).score >= 1.0
            run["format_errors"] = format_errors(store / "runs" / "miniswe" / f"{task.id}.traj.json")
            # The turns this task added (the server keeps one queue for the whole run).
            time.sleep(2)  # the collector writes turns in the background
            mine = [t for t in recorded_turns(store) if t["turn_id"] not in seen]
            seen.update(t["turn_id"] for t in mine)
            with_calls, calls = call_counts(mine, forced=args.tool_choice not in ("", "auto", "none"))
            rows.append({"task": task.id, **run, "turns": len(mine),
                         "tool_call_turns": sum(t.get("finish_reason") == "tool_calls" for t in mine),
                         "replies_with_calls": with_calls, "calls": calls, "turn_ids": [t["turn_id"] for t in mine]})
    finally:
        stop_server(server)
    load_after = [round(x, 2) for x in os.getloadavg()]
    turns = recorded_turns(store)
    judged = judged_turns(store)
    for row in rows:
        ids = set(row.pop("turn_ids"))
        mine = [j for j in judged if j["turn_id"] in ids]
        row["paired"] = len(mine)
        row["paired_with_tool_result"] = sum(j["tool_result"] for j in mine)
        row["rewards"] = {str(k): v for k, v in Counter(j["reward"] for j in mine if j["tool_result"]).items()}
    served = {"turns": len(turns), "with_tools": sum(bool(t.get("tools")) for t in turns),
              "finish_reasons": dict(Counter(str(t.get("finish_reason")) for t in turns)),
              "rewards": {str(k): v for k, v in Counter(j["reward"] for j in judged if j["tool_result"]).items()},
              "judged_by": dict(Counter(j["judged_by"] for j in judged)),
              # What the model wrote, and which roles each prompt held: whether the agent kept its
              # rejected replies in the conversation it sent back.
              "replies": [{"roles": [m.get("role") for m in t["messages"]], "finish": t.get("finish_reason"),
                           "text": t["response_text"][:200]} for t in turns]}
    result = {"model": args.model, "tasks": rows, "tool_choice": args.tool_choice,
              "parallel_tool_calls": not args.no_parallel_tool_calls, "step_limit": args.step_limit,
              "max_tokens": args.max_tokens, "threads": args.threads, "n_ctx": args.n_ctx, "miniswe_version": version,
              "python": platform.python_version(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "load_before": load_before, "load_after": load_after, "served": served,
              "judged": judged,
              "notes": ("One greedy run per task: what happened, not a rate. Rewards are those of the turns whose "
                        "next state is a tool result (`tool: ...`), read from the server's queue: its judge loop's "
                        "verdicts (the default classifier judge), the rule judge's after the run for turns the "
                        "loop had not reached. mini-swe-agent's LocalEnvironment runs commands on the host; its own "
                        "format-error handling applies (it stops after 3 rejected replies in a row). The "
                        "text-based config's runs on the whole suite are in bench/results/runtime_vs_miniswe.md.")}
    write_json(args.out, result, indent=1)
    text = render(result)
    write_markdown(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
