"""mini-swe-agent's tool-calling config against ``ratchet serve``: one coding-suite task, end to end.

bench/runtime_vs_miniswe.py runs mini-swe-agent with its text-based config (commands in fenced
blocks). Its default config (``mini.yaml``) sends one ``bash`` tool as OpenAI ``tools`` and reads
the reply's ``tool_calls``: this runs that config (``bench/_miniswe_worker.py --config toolcall``,
in ``.venv-bench``) against a ``ratchet serve --learn off`` subprocess over the embedded model,
greedy, on one task of the coding-basics suite, and grades the tree with the suite's grader.

Besides the agent's outcome it reads what the server recorded: the serving queue keeps every turn
(with learning off too), so the table says how many of the agent's model calls came back as tool
calls (``finish_reason``), whether the ``bash`` tool was rendered into their prompts (``tools``),
and how mini-swe-agent's rejected replies were wrong (its trajectory's FormatErrors). Writes
``bench/results/miniswe_toolcalls.{json,md}``.

    python -m bench.miniswe_toolcalls --task fahrenheit
"""

from __future__ import annotations

import argparse
import json
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
from ratchet.runtime.suite import grade, load_suite

ROOT = Path(__file__).resolve().parents[1]


def recorded_turns(store: Path) -> list[dict]:
    """Every turn the server recorded, oldest first (the queue of its one run under ``store``)."""
    turns = []
    for queue in sorted((store / "serve-runs").rglob("queue.sqlite")):
        db = sqlite3.connect(queue)
        try:
            turns += [json.loads(data) for (data,) in db.execute("SELECT data FROM turns ORDER BY created_at")]
        finally:
            db.close()
    return turns


def render(result: dict) -> str:
    run, served = result["run"], result["served"]
    errors = run.get("format_errors") or {}
    lines = ["# mini-swe-agent's tool-calling config against ratchet serve (bench/miniswe_toolcalls.py)", "",
             (f"{result['model']} served greedy by `ratchet serve --learn off` ({result['threads']} thread), "
              f"mini-swe-agent {result['miniswe_version']} with its `mini.yaml` config (`litellm` model class, one "
              f"`bash` tool), task `{result['task']}` of coding-basics, step limit {result['step_limit']}, "
              f"{result['max_tokens']} reply tokens, measured {result['measured_at']}."), "",
             "| exit | solved | model calls | prompt tokens | completion tokens | wall (s) |", "|---|---|---|---|---|---|",
             (f"| {run['exit_status']} | {run.get('solved')} | {run['steps']} | {run['prompt_tokens']} | "
              f"{run['completion_tokens']} | {run['wall_s']} |"), "",
             "| what the server recorded | count |", "|---|---|",
             f"| turns | {served['turns']} |",
             f"| with the `bash` tool in the prompt | {served['with_tools']} |"]
    lines += [f"| finish_reason `{k}` | {v} |" for k, v in sorted(served["finish_reasons"].items())]
    if served.get("replies"):
        lines += ["", "| call | roles sent | the reply (first 300 characters) |", "|---|---|---|"]
        lines += [f"| {i} | {' '.join(r['roles'])} | {json.dumps(r['text'])[1:-1].replace('|', '/')} |"
                  for i, r in enumerate(served["replies"], 1)]
    if errors:
        lines += ["", "| mini-swe-agent's rejected replies | count |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in errors.items()]
    lines += ["", result["notes"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.miniswe_toolcalls", description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="embedded model name")
    parser.add_argument("--task", default="fahrenheit", help="a coding-basics task id")
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
    task = next((t for t in load_suite("coding-basics") if t.id == args.task), None)
    if task is None:
        raise SystemExit(f"no task {args.task!r} in coding-basics")
    version = subprocess.run([str(bench_python()), "-c", "import importlib.metadata as m; print(m.version('mini-swe-agent'))"],
                             capture_output=True, text=True, check=False).stdout.strip()
    server = start_server(f"local:{args.model}", args.port, args.threads, args.n_ctx, store)
    try:
        run = run_miniswe(task, store, f"http://127.0.0.1:{args.port}/v1", args.step_limit, args.max_tokens,
                          config="toolcall")
    finally:
        stop_server(server)
    workdir = Path(run.pop("workdir"))
    run["solved"] = grade(task, workdir).score >= 1.0
    run["format_errors"] = format_errors(store / "runs" / "miniswe" / f"{task.id}.traj.json")
    turns = recorded_turns(store)
    served = {"turns": len(turns), "with_tools": sum(bool(t.get("tools")) for t in turns),
              "finish_reasons": dict(Counter(str(t.get("finish_reason")) for t in turns)),
              # What the model wrote, and which roles each prompt held: whether the agent kept its
              # rejected replies in the conversation it sent back.
              "replies": [{"roles": [m.get("role") for m in t["messages"]], "text": t["response_text"][:300]}
                          for t in turns]}
    result = {"model": args.model, "task": task.id, "step_limit": args.step_limit, "max_tokens": args.max_tokens,
              "threads": args.threads, "n_ctx": args.n_ctx, "miniswe_version": version,
              "python": platform.python_version(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "run": run, "served": served,
              "notes": ("One run of one task, greedy: what happened, not a rate. mini-swe-agent's LocalEnvironment "
                        "runs commands on the host; its own format-error handling applies (it stops after 3 "
                        "rejected replies in a row). The text-based config's runs on the whole suite are in "
                        "bench/results/runtime_vs_miniswe.md.")}
    write_json(args.out, result, indent=1)
    text = render(result)
    write_markdown(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
