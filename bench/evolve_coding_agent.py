"""``ratchet evolve`` on the coding agent's own workspace, judged on coding-basics tasks it never saw.

The run itself is ``ratchet evolve run examples/coding-agent/evolve.yaml`` (the agentic proposer on
the runtime with the candidate's own harness, DGM selector, paired gate; splits of the 15 tasks:
search 5, held-in 5, test 5, untouched until the report), in chunks under the CPU lock and resumed
with ``ratchet evolve resume RUN_ID`` (a run store pays nothing twice). This module runs nothing:
it reads that run store and writes ``bench/results/evolve_coding_agent.{json,md}``: the before/after
on the test split with the report's bootstrap CIs, each proposal (the proposer agent's tool calls,
its claim, the diff), the gate's decision and its numbers, and per-task results. Before the run
has its report, the same command writes what it has so far (``finished: false``).

    python -m bench.evolve_coding_agent --root /work/runs/evolve-coding-agent-0.5b --run-id RUN_ID
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench.evolve_humaneval import RESULTS, steps_of
from bench.evolve_textarena import calls_line, candidates_table, steps_table
from ratchet.evolve.archive import Archive
from ratchet.evolve.cache import EVALS
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import split_tasks
from ratchet.runtime.config import CodingSuiteOptions
from ratchet.runtime.engine_suite import CodingAgentSuite
from ratchet.store import RunStore

TITLE = "`ratchet evolve` on the coding agent's workspace (coding-basics)"


def proposer_runs(run: Any) -> list[dict[str, Any]]:
    """Each proposer agent's run in the store: its tool calls (name, ok, first line of the result)."""
    out = []
    root = Path(run.dir) / "proposer-agent"
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        trace = d / "trace.jsonl"
        records = [json.loads(line) for line in trace.read_text().splitlines()] if trace.is_file() else []
        calls = [{"step": r["step"], "name": r["name"], "ok": r["ok"],
                  "arguments": json.dumps(r["arguments"])[:300],
                  "result": (r["result"].strip().splitlines() or [""])[0][:200]}
                 for r in records if r["type"] == "tool_call"]
        replies = [r for r in records if r["type"] == "model_call"]
        out.append({"run": d.name, "model_calls": len(replies),
                    "prompt_tokens": sum(r["prompt_tokens"] for r in replies),
                    "completion_tokens": sum(r["completion_tokens"] for r in replies),
                    "calls": calls, "replies": [r["text"][:600] for r in replies]})
    return out


def split_of(config: dict[str, Any]) -> dict[str, str]:
    """task id -> the split the engine put it in (recomputed from the run's config, as the engine does)."""
    cfg = EvolveConfig.model_validate(config)
    suite = CodingAgentSuite(CodingSuiteOptions.model_validate(cfg.suite.options), None)
    return {t.id: name for name, tasks in split_tasks(suite.tasks(), cfg.splits).items() for t in tasks}


def per_task(run: Any, splits: dict[str, str]) -> list[dict[str, Any]]:
    """Every task evaluation paid so far (the engine's cache, finished ones only): candidate,
    task, its split, seed, score, how the agent's run ended."""
    rows = []
    for r in run.read_jsonl(EVALS):
        lines = r["trace"].splitlines()
        rows.append({"candidate": r["candidate"], "task": r["task_id"], "split": splits.get(r["task_id"], "?"),
                     "seed": r["seed"], "score": r["score"], "agent": lines[1] if len(lines) > 1 else "",
                     "tokens": r.get("metrics", {}).get("tokens")})
    return rows


def proposals(archive: Archive) -> list[dict[str, Any]]:
    out = []
    for c in archive.candidates():
        if c.parent_id is None:
            continue
        decision = archive.decision(c.id)
        out.append({"id": c.id, "parent": c.parent_id, "status": archive.status(c.id),
                    "proposer": c.meta.get("proposer"), "claim": c.meta.get("claim"),
                    "decision": None if decision is None else
                    {"accepted": decision.accepted, "reason": decision.reason, "numbers": decision.numbers},
                    "claim_check": archive.claim_check(c.id), "diff": archive.diff(c.id)})
    return out


def arm(row: dict[str, Any]) -> str:
    return f"{row['mean']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evolve_coding_agent", description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the run store's root (ratchet evolve --root)")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--out", default="evolve_coding_agent")
    parser.add_argument("--note", default="", help="a paragraph of what happened, put under the tables")
    args = parser.parse_args(argv)
    run = RunStore(args.root).open_run(args.run_id)
    archive = Archive(run)
    report = run.read_json("evolve/report.json")
    status = run.read_json("status.json") or {}
    config = (run.read_json("run.json") or {}).get("config") or {}
    out = {"finished": report is not None, "run_id": args.run_id, "status": status,
           "config": config, "report": report,
           "steps": [{k: e.get(k) for k in ("step", "proposer", "status", "reason", "child", "numbers", "model_calls")}
                     for e in steps_of(run)],
           "proposals": proposals(archive), "failed_proposals": archive.unusable(),
           "proposer_runs": proposer_runs(run), "per_task": per_task(run, split_of(config)),
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(out, indent=2, default=str) + "\n")

    lines = [f"# {TITLE}" if report else f"# An unfinished {TITLE}", "",
             "`ratchet evolve run examples/coding-agent/evolve.yaml` with local:qwen2.5-coder-0.5b (one llama.cpp "
             "thread), resumed in chunks; written by `python -m bench.evolve_coding_agent` from the run store "
             f"(run `{args.run_id}`). Score: the suite's grader (the original tests, in the sandbox) per task.", ""]
    if report:
        same = " (= original: nothing was accepted)" if report["best"]["id"] == report["original"]["id"] else ""
        lines += [f"## Test split ({report['tasks']} tasks, untouched by the search): solve rate, 95% bootstrap CI",
                  "", "| arm | solve rate [95% CI] |", "|---|---|",
                  f"| original ({report['original']['id'][:12]}) | {arm(report['original'])} |",
                  f"| best ({report['best']['id'][:12]}){same} | {arm(report['best'])} |",
                  f"| original, best-of-{report['original_best_of_n']['attempts']} | "
                  f"{arm(report['original_best_of_n'])} |", "",
                  f"best - original: {arm(report['comparison']['best_minus_original'])}. "
                  f"Stopped by: {report['stop_reason']}.", ""]
    else:
        lines += ["The run has no report yet: no test-split comparison here.", ""]
    lines += ["## Every task evaluation", "", "| candidate | split | task | seed | solved | the agent's run |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r['candidate'][:12]} | {r['split']} | {r['task']} | {r['seed']} | {r['score']:.0f} | {r['agent']} |"
              for r in sorted(out["per_task"], key=lambda r: (r["split"], r["task"], r["candidate"]))]
    lines += ["", "## The search", "", calls_line(run), "", *candidates_table(run), "", *steps_table(run), ""]
    for p in out["proposals"]:
        d = p["decision"] or {}
        lines += [f"### Proposal {p['id'][:12]} ({p['status']})", "",
                  f"Claim: {json.dumps(p['claim'])[:600]}", "",
                  f"Gate: {d.get('reason')} (numbers: {json.dumps(d.get('numbers'))})", "",
                  "```diff", p["diff"].rstrip()[:3000], "```", ""]
    for r in out["proposer_runs"]:
        lines += [f"Proposer agent run `{r['run']}`: {r['model_calls']} model calls, {r['prompt_tokens']} prompt + "
                  f"{r['completion_tokens']} completion tokens; its tool calls:", ""]
        lines += [f"- step {c['step']} `{c['name']}` {c['arguments'][:160]} -> {'ok' if c['ok'] else 'FAILED'}: "
                  f"{c['result'][:160]}" for c in r["calls"]] or ["- (none)"]
        if r["replies"]:
            first = r["replies"][0].replace("\n", " / ")[:300]
            lines += ["", f"Its first reply: `{first}`"]
        lines.append("")
    if args.note:
        lines += ["## What happened", "", args.note, ""]
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
