"""Ratchet's coding agent vs mini-swe-agent 2.4.6 on the coding-basics suite, same model and step limit.

One OpenAI-compatible server (``ratchet serve --learn off`` over the embedded model, greedy) answers
both agents, so the model, its weights, its chat template and its token counts are the same for
both. Each task's repository is copied fresh for each agent, the agent gets the same one-line
statement (the one ``ratchet agent run`` gives), the same step limit (model calls), the same reply
budget and the same 30 s command timeout, and both are graded the same way: the suite's grader runs
the original tests on the agent's tree in the sandbox. mini-swe-agent runs in its own environment
(``.venv-bench``, ``pip install mini-swe-agent==2.4.6``; see ``bench/_miniswe_worker.py`` for how
it is configured) and its commands use the same interpreter as Ratchet's (its ``python`` first on
PATH). Tokens are the server's usage, per call, summed; wall time is the agent's run, grading not
included. Ratios are Ratchet over mini-swe-agent. A table can mix rows of several runs (carried
rows, below): tokens do not depend on the machine's load, so their ratio compares exactly; wall time
does, so its ratio over carried rows is only indicative.

Resumable: every (agent, task) result is appended to ``--store``/results.jsonl and skipped on a
rerun, so the bench runs in chunks (``--max-minutes``); ``--report`` rewrites the tables from it.
Committed rows whose store is not the one passed (a fresh store on another machine) are carried
over from bench/results/NAME.json, marked †, and not run again where they still count.

    python -m bench.runtime_vs_miniswe --max-minutes 14
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench._results import RESULTS, write_json, write_markdown
from bench._miniswe import format_errors, run_miniswe, start_server, statement, stop_server
from bench._setup import bench_python
from ratchet.models.spec import load_model
from ratchet.runtime import Agent, HarnessWorkspace
from ratchet.runtime.suite import grade, load_suite, prepare
from ratchet.store import append_jsonl, read_jsonl

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ("ratchet", "miniswe")








def run_ratchet(task, store: Path, api_base: str, step_limit: int, max_tokens: int) -> dict:
    workspace = HarnessWorkspace()
    config = workspace.settings((f"step_limit={step_limit}", f"max_tokens={max_tokens}"))
    policy = workspace.permissions()
    policy.hidden_paths = [*policy.hidden_paths, str(task.dir.parent)]
    workdir = prepare(task, store / "work" / "ratchet" / task.id)
    model = load_model(f"{api_base}#qwen")
    agent = Agent(model, workdir, store / "runs" / "ratchet" / task.id, workspace=workspace, config=config,
                  permissions=policy, agent_id=task.id)
    started = time.perf_counter()
    try:
        result = agent.run(statement(task))
        exit_status = result.exit_status
    except Exception as exc:  # a backend failure is a failed task, recorded
        exit_status = f"error: {type(exc).__name__}: {exc}"[:300]
    wall = time.perf_counter() - started
    return {"exit_status": exit_status, "steps": agent.steps, "prompt_tokens": agent.tracer.tokens["prompt"],
            "completion_tokens": agent.tracer.tokens["completion"], "wall_s": round(wall, 3), "workdir": str(workdir)}




RUNNERS = {"ratchet": run_ratchet, "miniswe": run_miniswe}


def harness_version() -> str:
    """What Ratchet ran: a hash of the runtime's code and the shipped workspace, so a row says
    which harness it measured and a changed harness reruns its tasks."""
    runtime = ROOT / "src" / "ratchet" / "runtime"
    digest = hashlib.sha256()
    for path in sorted(runtime.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(runtime).as_posix().encode() + b"\0" + path.read_bytes())
    return "ratchet@" + digest.hexdigest()[:8]


def harness_commit() -> str:
    """The commit of this checkout the harness came from, ``+changes`` when the runtime has
    uncommitted edits (then only the hash in ``version`` says what ran)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short=10", "HEAD") or "unknown"
    return commit + ("+changes" if git("status", "--porcelain", "--", "src/ratchet/runtime") else "")


def version_of(row: dict) -> str:
    return row.get("version") or ("ratchet@unrecorded" if row["agent"] == "ratchet" else "mini-swe-agent")




def committed_rows(results: dict, stored: list[dict], meta: dict) -> list[dict]:
    """The committed results' rows that are not in the store (measured in a store that is gone), as
    store rows marked ``carried``, with their own version, commit and format-error counts. They count
    as done by the same rule as stored rows: a mini-swe-agent row always, a Ratchet row only for the
    harness it ran. None when the committed results were measured under other settings."""
    if any(results.get(k) != meta[k] for k in ("model", "step_limit", "max_tokens", "n_ctx")):
        return []
    here = {(r["agent"], r["task_id"], r.get("measured_at")) for r in stored}
    rows = [{"agent": a, "task_id": t["task_id"], **t[a], "carried": True}
            for t in results.get("per_task", []) for a in AGENTS]
    return [r for r in rows if (r["agent"], r["task_id"], r.get("measured_at")) not in here]


def is_done(row: dict, ratchet_version: str) -> bool:
    """mini-swe-agent does not change between runs; Ratchet's rows count only for the harness they ran."""
    return row["agent"] != "ratchet" or version_of(row) == ratchet_version


def report(store: Path, out: str, meta: dict, carried: list[dict] = ()) -> dict:
    stored = read_jsonl(store / "results.jsonl") if (store / "results.jsonl").exists() else []
    rows = [*carried, *stored]  # carried first: a row measured in this store is the later one
    # The latest row per (agent, task); a Ratchet row of the current harness wins over older ones.
    by: dict = {}
    for r in rows:
        key = (r["agent"], r["task_id"])
        current = by.get(key)
        if current is None or r["agent"] != "ratchet" or version_of(current) != meta["ratchet_version"] \
                or version_of(r) == meta["ratchet_version"]:
            by[key] = r
    tasks = sorted({r["task_id"] for r in rows})
    both = [t for t in tasks if all((a, t) in by for a in AGENTS)]
    totals = {}
    for agent in AGENTS:
        mine = [by[(agent, t)] for t in both]
        totals[agent] = {"tasks": len(mine), "solved": sum(r["solved"] for r in mine),
                         "solve_rate": (sum(r["solved"] for r in mine) / len(mine)) if mine else None,
                         "prompt_tokens": sum(r["prompt_tokens"] for r in mine),
                         "completion_tokens": sum(r["completion_tokens"] for r in mine),
                         "steps": sum(r["steps"] for r in mine),
                         "wall_s": round(sum(r["wall_s"] for r in mine), 1)}
    r_, m_ = totals["ratchet"], totals["miniswe"]
    ratios = {}
    if both:
        ratios = {"tokens": round((r_["prompt_tokens"] + r_["completion_tokens"]) /
                                  max(1, m_["prompt_tokens"] + m_["completion_tokens"]), 3),
                  "wall_s": round(r_["wall_s"] / max(1e-9, m_["wall_s"]), 3)}
    data = {**meta, "tasks_compared": both, "totals": totals, "ratios_ratchet_over_miniswe": ratios,
            "per_task": [{"task_id": t, **{a: {k: by[(a, t)][k] for k in ("solved", "exit_status", "steps",
                                                                          "prompt_tokens", "completion_tokens", "wall_s")}
                                            | {"version": version_of(by[(a, t)]), "commit": by[(a, t)].get("commit"),
                                               "measured_at": by[(a, t)].get("measured_at"),
                                               "carried": by[(a, t)].get("carried", False)}
                                            for a in AGENTS}} for t in both]}
    # a carried row's trajectory stayed in its store: its counts are the ones committed with it
    rejected = {t: by[("miniswe", t)]["format_errors"] if by[("miniswe", t)].get("format_errors") is not None
                else format_errors(store / "runs" / "miniswe" / f"{t}.traj.json") for t in both}
    for row in data["per_task"]:
        row["miniswe"]["format_errors"] = rejected[row["task_id"]]
    not_run = [t for t in meta.get("suite_tasks", []) if t not in both]
    data["tasks_not_run"] = not_run
    write_json(out, data, out=RESULTS)  # RESULTS read at call time: the tests point it elsewhere
    lines = [f"# {out} ({meta['measured_at']})", "",
             f"{meta['model']} served by `ratchet serve --learn off` ({meta['threads']} threads, n_ctx {meta['n_ctx']}, "
             f"greedy) to both agents; step limit {meta['step_limit']} model calls, replies up to {meta['max_tokens']} "
             f"tokens, 30 s per command; graded by the suite's grader in the sandbox. Ratchet: the shipped harness "
             f"workspace, text protocol, middleware: {', '.join(meta.get('ratchet_middleware') or ['none'])}. "
             f"mini-swe-agent {meta['miniswe_version']}: `mini_textbased.yaml`, "
             f"`litellm_textbased`, `DefaultAgent`, `LocalEnvironment`. {len(both)} of the "
             f"{len(meta.get('suite_tasks') or []) or 15} tasks run by both"
             + (f"; not run: {', '.join(not_run)}." if not_run else "."), "",
             "| task | Ratchet | version (commit) | steps | tokens | wall s | mini-swe-agent | steps | tokens | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for t in both:
        a, b = by[("ratchet", t)], by[("miniswe", t)]
        cell = lambda r: ("**solved**" if r["solved"] else r["exit_status"][:40]) + (" †" if r.get("carried") else "")  # noqa: E731
        shown_version = version_of(a).removeprefix("ratchet@") + (f" ({a['commit']})" if a.get("commit") else "")
        lines.append(f"| {t} | {cell(a)} | {shown_version} | {a['steps']} | {a['prompt_tokens'] + a['completion_tokens']} | "
                     f"{a['wall_s']:.1f} | {cell(b)} | {b['steps']} | {b['prompt_tokens'] + b['completion_tokens']} | "
                     f"{b['wall_s']:.1f} |")
    lines.append(f"| **total** | **{r_['solved']}/{r_['tasks']}** | | {r_['steps']} | "
                 f"{r_['prompt_tokens'] + r_['completion_tokens']} | {r_['wall_s']:.1f} | **{m_['solved']}/{m_['tasks']}** | "
                 f"{m_['steps']} | {m_['prompt_tokens'] + m_['completion_tokens']} | {m_['wall_s']:.1f} |")
    if ratios:
        lines += ["", f"Ratchet / mini-swe-agent: tokens {ratios['tokens']}, wall time {ratios['wall_s']}."]
    known = [c for c in rejected.values() if c is not None]
    if known:
        total = {k: sum(c[k] for c in known) for k in known[0]}
        source = ("from its trajectories" + (", for rows marked † the counts committed with them" if any(
            by[("miniswe", t)].get("carried") for t in both) else "")
            + (f"; only the {len(known)} of {len(both)} runs whose trajectories are present" if len(known) < len(both)
               else f", {len(known)} of {len(both)} runs"))
        lines += ["", f"mini-swe-agent replies rejected as format errors ({source}): {total['rejected']}, {total['several_actions']} with more than one "
                      f"action block and {total['no_action']} with none; {total['cut_at_reply_budget']} of them "
                      f"stopped at the reply budget of {meta['max_tokens']} tokens, {total['other_fence']} had a "
                      f"command fenced as ```bash/```sh instead of ```mswea_bash_command, {total['wrote_observation']} "
                      f"wrote a command's result (<returncode>) itself."]
    shown = sorted({version_of(by[("ratchet", t)]) for t in both})
    lines += ["", f"Ratchet harness of this checkout: {meta['ratchet_version']} (commit {meta['ratchet_commit']}); "
                  f"the rows above ran "
                  f"{', '.join(shown) or 'none'} (a task's row is of this harness when it has one, else its latest)."]
    if any(by[(a, t)].get("carried") for t in both for a in AGENTS):
        lines += ["", "† carried over from the committed results: measured earlier in a run store that is not the one "
                      "passed (Ratchet at the harness and commit named, each row's measured_at is in the JSON) and not "
                      "run again. Rows measured at other times ran under other loads on a shared machine: the "
                      "wall-time ratio mixes them, the token counts do not depend on load."]
    lines += ["", "Notes: " + meta["notes"]]
    write_markdown(out, "\n".join(lines) + "\n", out=RESULTS)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.runtime_vs_miniswe", description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="embedded model name")
    parser.add_argument("--step-limit", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--task", action="append", default=[], help="only these task ids")
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=AGENTS)
    parser.add_argument("--spec", default=None, help="served model spec (default local:MODEL)")
    parser.add_argument("--endpoint", default=None, help="use this OpenAI-compatible base URL (…/v1) instead of starting a server")
    # One thread: on this shared 2-core machine two llama.cpp threads were ~4x slower per call than
    # one (measured: ~100 s vs ~22 s for a 100-token reply) once other jobs took CPU.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=16384)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--store", type=Path, default=None, help="run directory (default runs/bench-runtime-vs-miniswe-MODEL)")
    parser.add_argument("--max-minutes", type=float, default=14.0, help="start no new task after this long")
    parser.add_argument("--report", action="store_true", help="only rewrite the tables from the store")
    parser.add_argument("--out", default=None, help="result name (default runtime_vs_miniswe[_MODEL])")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still stops the server (finally below)
    store = (args.store or ROOT / "runs" / f"bench-runtime-vs-miniswe-{args.model}").resolve()
    store.mkdir(parents=True, exist_ok=True)
    out = args.out or ("runtime_vs_miniswe" if args.model == "qwen2.5-coder-0.5b" else f"runtime_vs_miniswe_{args.model}")
    version = subprocess.run([str(bench_python()), "-c", "import importlib.metadata as m; print(m.version('mini-swe-agent'))"],
                             capture_output=True, text=True).stdout.strip()
    middleware = [m.kind for m in HarnessWorkspace().settings().middleware]
    ratchet_version, commit = harness_version(), harness_commit()
    meta = {"model": args.model, "step_limit": args.step_limit, "max_tokens": args.max_tokens, "threads": args.threads,
            "ratchet_middleware": middleware, "ratchet_version": ratchet_version, "ratchet_commit": commit,
            "n_ctx": args.n_ctx, "miniswe_version": version, "python": platform.python_version(),
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "notes": ("mini-swe-agent's LocalEnvironment runs commands on the host (its recommended default), "
                      "Ratchet's bash runs in the sandbox. mini-swe-agent is as its documentation configures it. "
                      "Ratchet's shipped workspace is NOT blind to this suite: it was changed after reading its "
                      "failures here (harness 7018c69f -> the current one: an opening that shows the file tree and "
                      "the files the task names with their tests, a worked example from another repository, edits "
                      "matching whole lines copied with line numbers, a repeat guard that also refuses an unchanged "
                      "read or an unchanged passing test command, and submit_on_pass); the traces of fahrenheit, "
                      "fizzbuzz-fifteen and inventory-total were read while changing it. submit_on_pass ends "
                      "Ratchet's run as submitted when a test command passes after a change to the files (in "
                      "inventory-total the 0.5B fixed the bug at step 1 and then reran the passing tests until the "
                      "step limit); it saves steps, tokens and time, it does not decide a solve: both agents' trees "
                      "are graded by the suite's grader either way, and mini-swe-agent ends only when the model "
                      "submits by itself. The version column says which harness a Ratchet row ran (a hash of "
                      "src/ratchet/runtime) and, for rows measured since it was recorded, the commit it came from; "
                      "mini-swe-agent rows measured earlier with the same worker, server, model and limits are "
                      "reused (each row's measured_at is in the JSON). Each agent's own format-error handling "
                      "applies (Ratchet stops after 5 replies in a row without a tool call, mini-swe-agent after "
                      "3); Ratchet's repeat_guard ends a run as repeated_failure when one call is refused twice "
                      "(stop_after 2). The format-error line above is read from mini-swe-agent's trajectories: a "
                      "reply with more than one ```mswea_bash_command block is the model not keeping to the "
                      "config's 'exactly ONE bash code block' rule, one with none may be the model writing an "
                      "observation (<returncode>, <output>) itself (counted); a command fenced as ```bash would be a fence "
                      "the config never asked for (a mismatch to fix here), so that count is given too. "
                      "mini-swe-agent's history keeps only its error message, not the rejected reply. No stop sequence is added: none of "
                      "mini-swe-agent's shipped configs sets one, and Ratchet gets none either. Its tool-call "
                      "config (mini.yaml), which its docs recommend over the text one for models with tool "
                      "calls, is not used: ratchet serve accepts and ignores the OpenAI tools field, so its replies "
                      "carry no tool calls to parse.")}
    suite = load_suite("coding-basics")
    meta["suite_tasks"] = sorted(t.id for t in suite)
    tasks = [t for t in suite if not args.task or t.id in args.task]
    stored = read_jsonl(store / "results.jsonl") if (store / "results.jsonl").exists() else []
    committed = RESULTS / f"{out}.json"
    carried = committed_rows(json.loads(committed.read_text()), stored, meta) if committed.exists() else []
    done = {(r["agent"], r["task_id"]) for r in [*carried, *stored] if is_done(r, ratchet_version)}
    measured = {(r["agent"], r["task_id"]) for r in [*carried, *stored]}
    # tasks not in the table yet (not run by both agents) first: they widen it, a rerun only renews a row
    pending = sorted(((t, a) for t in tasks for a in args.agents if (a, t.id) not in done),
                     key=lambda pair: all((a, pair[0].id) in measured for a in AGENTS))
    if pending and not args.report:
        started = time.monotonic()
        server = None if args.endpoint else start_server(args.spec or f"local:{args.model}", args.port, args.threads,
                                                         args.n_ctx, store)
        api_base = args.endpoint or f"http://127.0.0.1:{args.port}/v1"
        try:
            for n, (task, agent) in enumerate(pending):
                if time.monotonic() - started > args.max_minutes * 60:
                    print(f"time budget spent; {len(pending) - n} of {len(pending)} runs still pending, rerun to "
                          f"continue", flush=True)
                    break
                outcome = RUNNERS[agent](task, store, api_base, args.step_limit, args.max_tokens)
                verdict = grade(task, Path(outcome.pop("workdir")))
                record = {"agent": agent, "task_id": task.id, "solved": verdict.score == 1.0,
                          "version": ratchet_version if agent == "ratchet" else f"mini-swe-agent {version}",
                          **({"commit": commit} if agent == "ratchet" else {}),
                          "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **outcome}
                append_jsonl(store / "results.jsonl", record)
                print(f"{agent:8s} {task.id:24s} {'SOLVED' if record['solved'] else 'failed':7s} "
                      f"{record['exit_status'][:30]:30s} {record['steps']} steps "
                      f"{record['prompt_tokens'] + record['completion_tokens']} tok {record['wall_s']:.1f} s", flush=True)
        finally:
            if server is not None:
                stop_server(server)
    data = report(store, out, meta, carried)
    print(json.dumps({"totals": data["totals"], "ratios": data["ratios_ratchet_over_miniswe"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
