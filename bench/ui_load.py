"""Dashboard page loads on big runs: 1,000 candidates and 10,000 steps, and an improvement-engine
archive of 1,000 candidates, written through the store.

Each page is loaded over HTTP from a real uvicorn server (the server's whole answer: routing,
reading the store, rendering), and, where Debian's chromium is installed, in a headless browser
(navigation start to the load event, so parsing and layout count too). The baseline, measured in
the same run on the same server, is the same page on a small run (10 candidates, 100 steps): the
ratio says how much the page slows down with run size. Target: every page under 1 s.

``python -m bench.ui_load [--candidates N] [--steps N] [--repeat N]`` writes
bench/results/ui_load.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from bench._results import write_json, write_markdown
from ratchet.autoharness.pipeline import SEARCH_CHECKPOINT as CHECKPOINT
from ratchet.contracts import Candidate, Decision, EpisodeSummary, Evaluation, Failure, LLMCall, StepRecord, TaskResult
from ratchet.evolve.archive import Archive, claim_check, per_task_means
from ratchet.evolve.loop import EVENTS
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn
from ratchet.online.status import QUEUE_NAME, online_dir
from ratchet.online.status import write as write_status
from ratchet.store import RunStore
from ratchet.ui import UIConfig, create_app

CHROMIUM = Path("/usr/bin/chromium")
#: The candidate kind and checkpoint of a run of the dedicated search (removed): the AutoHarness view
#: still draws such runs' trees, so the big run is written in their shape.
KIND = "autoharness.harness"
BOARD = "[GAME] Current Board:\n\n 0 | 1 | X \n---+---+---\n 3 | O | 5 \n---+---+---\n 6 | 7 | 8 \n"
CODE = "import random\n\n" + "\n".join(f"def helper_{i}(board):\n    return board.count('{i}')\n" for i in range(30))


def build_autoharness_run(store: RunStore, candidates: int, steps: int, episodes: int, rng: random.Random) -> dict:
    """A search-shaped run: candidates with parents, evaluations with failures, a checkpoint whose
    tree holds the best sample of each refinement, model calls, and episodes of steps."""
    run = store.create_run("autoharness", {"env": "TicTacToe-v0", "mode": "verifier", "method": "ratchet",
                                           "budget": {"max_calls": candidates, "max_tokens": 10**9}}, "bench")
    ids: list[str] = []
    tree, history, codes = [], [], {}
    failure = Failure("rejected_by_env", "the environment rejected it: cell 4 is already occupied.",
                      detail={"function": "both", "board": BOARD, "action": "[4]", "verdict": True})
    for i in range(candidates):
        parent = ids[rng.randrange(len(ids))] if ids and i % 50 else None
        code = CODE + f"\n# version {i}\ndef is_legal_action(board, action):\n    return action.strip('[]') in board  # {i}\n"
        cand = Candidate.from_files(KIND, {"harness.py": code}, parent_id=parent, iteration=i // 2, sample=i % 2,
                                    response=f"```python\n{code}```", failures_shown=[failure.to_record()] * 3,
                                    prompt=[{"role": "user", "content": "Write the Python function ..." + BOARD}])
        run.add_candidate(cand)
        h = rng.random()
        run.add_evaluation(Evaluation(cand.id, "search", h, metrics={"legal_rate": h, "steps": 40.0}, failures=[failure] * 10))
        in_tree = i % 2 == 0 or parent is None
        run.set_candidate_status(cand.id, "evaluated" if in_tree else "rejected", h)
        if in_tree:
            tree.append({"candidate_id": cand.id, "parent_id": parent if parent in codes else None, "h": h, "refinements": 1,
                         "depth": 0, "meta": {}})
            codes[cand.id] = code
        history.append({"iteration": i // 2, "candidate": cand.id, "h": h, "status": "evaluated"})
        run.record_llm_call(LLMCall("scripted", "autoharness.refine", 800, 400, 0.5, True))
        ids.append(cand.id)
    run.checkpoint(CHECKPOINT, {"tree": tree, "history": history, "codes": codes, "failures": {}, "metrics": {},
                                "iteration": candidates // 2, "calls": candidates, "tokens": 1200 * candidates,
                                "elapsed_s": 0.0, "stop_reason": "iterations"})
    per = steps // episodes
    for e in range(episodes):
        eid = f"TicTacToe-v0-{e:04d}-s{e}"
        with run.step_writer(eid) as writer:
            writer.write_many(StepRecord(eid, k, k % 2, BOARD, f"[{k % 9}]", k % 7 != 0, None if k % 7 else "cell occupied",
                                         None, 0.01, {"seat": "agent", "raw": f"I pick [{k % 9}] needle{e}-{k}"}) for k in range(per))
        run.add_episode(EpisodeSummary(eid, "TicTacToe-v0", e, "scripted", per, per // 7, {0: 1.0, 1: -1.0}, False, 1.0))
    run.set_status("done", {"best_h": 1.0})
    return {"id": run.id, "node": ids[-1], "episode": f"TicTacToe-v0-{episodes - 1:04d}-s{episodes - 1}", "needle": f"needle{episodes - 1}-{per - 1}",
            "pages": max(1, per // 100)}


def build_evolve_run(store: RunStore, candidates: int, rng: random.Random) -> dict:
    """An engine-shaped archive: each candidate bred from one of the 20 newest, with results on
    three splits (10 tasks x 3 seeds), the gate's decision and claim check, and a step event."""
    run = store.create_run("evolve", {"iterations": candidates - 1, "suite": {"name": "noisy"}, "selector": {"name": "greedy"},
                                      "gate": {"name": "paired"}, "proposers": [{"name": "reflective"}]}, "bench-evolve")
    archive = Archive(run)
    tasks = [f"t{i:03d}" for i in range(10)]
    ids: list[str] = []
    for i in range(candidates):
        parent = ids[rng.randrange(max(0, len(ids) - 20), len(ids))] if ids else None
        p = rng.random()
        files = {"harness.json": json.dumps({"default": p}, indent=1) + "\n", "notes/why.md": f"note {i}\n" + CODE[:400]}
        cand = Candidate.from_files("noisy", files, parent, proposer="reflective", parents=[parent] if parent else [], step=i - 1,
                                    claim={"target": f"raise p ({i})", "root_cause": "p too low", "predicted_flips": tasks[:3]})
        archive.add(cand)
        results = {split: [TaskResult(t, seed, float(rng.random() < p)) for t in tasks for seed in range(3)]
                   for split in ("search", "heldin", "heldout")}
        for split, rs in results.items():
            archive.record_results(cand.id, split, rs)
        status = "accepted"
        if parent is not None:
            accepted = i % 4 == 0
            status = "accepted" if accepted else "rejected"
            archive.record_decision(cand.id, Decision(accepted, f"held-in gain {p:+.3f}", {"gain": p, "p_value": 0.01, "noise_heldin": 0.1}),
                                    claim_check(cand, per_task_means(archive.results(parent, "heldin")), per_task_means(results["heldin"])))
            run.append_jsonl(EVENTS, {"kind": "step", "step": i - 1, "parent": parent, "child": cand.id, "proposer": "reflective",
                                      "status": status, "reason": f"held-in gain {p:+.3f}", "best": p, "at": time.time()})
        else:
            run.append_jsonl(EVENTS, {"kind": "original", "candidate": cand.id, "heldin": p, "at": time.time()})
        archive.set_status(cand.id, status, archive.score(cand.id, "heldin"))
        ids.append(cand.id)
    run.checkpoint("evolve", {"step": candidates - 1})
    run.set_status("done", {"state": "done"})
    return {"id": run.id, "cand": ids[-1]}


def build_serving_run(root: Path, turns: int) -> str:
    run_dir = root / "serve-bench"
    queue = TurnQueue(online_dir(run_dir) / QUEUE_NAME)
    queue.add_turns(Turn(f"t{i}", f"s{i % 50}", False, "main", [{"role": "user", "content": f"q{i}"}], f"answer {i}", [1], [2], [-0.1],
                         policy_version=i * 3 // turns, created_at=1.7e9 + i) for i in range(turns))
    for i in range(turns):
        queue.set_next_state(f"t{i}", "thanks")
        queue.add_judgement(Judgement(f"t{i}", 1 if i % 3 else -1, [1, 1, -1], None, "thanks", "rule"))
        if i % 100 == 0:
            write_status(run_dir)
    return run_dir.name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(root: Path) -> tuple[uvicorn.Server, str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(UIConfig(root=root)), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def time_http(client: httpx.Client, url: str, repeat: int) -> list[float]:
    client.get(url).raise_for_status()  # warm: imports, template compilation, the OS page cache
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        out.append(time.perf_counter() - start)
        response.raise_for_status()
    return out


def time_browser(base: str, paths: list[str], repeat: int) -> dict[str, list[float]] | None:
    if not CHROMIUM.is_file():
        return None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"]
    out: dict[str, list[float]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=args)
        page = browser.new_page()
        for path in paths:
            page.goto(base + path)
            times = []
            for _ in range(repeat):
                page.goto(base + path, wait_until="load")
                times.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000)
            out[path] = times
        browser.close()
    return out


def pages(run: dict, evo: dict, serve_name: str) -> list[tuple[str, str]]:
    r, e = run["id"], evo["id"]
    return [
        ("runs list", "/"),
        ("run overview", f"/runs/{r}"),
        ("AutoHarness tree", f"/autoharness/{r}"),
        ("AutoHarness node", f"/autoharness/{r}?node={run['node']}"),
        ("AutoHarness candidates, page 5", f"/autoharness/{r}?page=5"),
        ("trajectories list", f"/trajectories/{r}"),
        ("episode, first page", f"/trajectories/{r}/episode/{run['episode']}"),
        ("episode, last page", f"/trajectories/{r}/episode/{run['episode']}?page={run['pages']}"),
        ("episode search", f"/trajectories/{r}/episode/{run['episode']}?q={run['needle']}"),
        ("run-wide search (worst case: last step)", f"/trajectories/{r}?q={run['needle']}"),
        ("learning from use", f"/learning/{serve_name}"),
        ("Evolution: lineage, plot, steps", f"/evolution/{e}"),
        ("Evolution candidate", f"/evolution/{e}?cand={evo['cand']}"),
        ("Evolution candidates, page 5", f"/evolution/{e}?page=5"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ui_load", description=__doc__)
    parser.add_argument("--candidates", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--turns", type=int, default=1000, help="judged turns of the serving run")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", default="ui_load")
    args = parser.parse_args(argv)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        store = RunStore(root)
        t0 = time.perf_counter()
        big = build_autoharness_run(store, args.candidates, args.steps, args.episodes, rng)
        small = build_autoharness_run(store, 10, 100, 1, rng)
        big_evo, small_evo = build_evolve_run(store, args.candidates, rng), build_evolve_run(store, 10, rng)
        serve_name = build_serving_run(root, args.turns)
        build_s = time.perf_counter() - t0
        server, base = serve(root)
        rows = []
        try:
            with httpx.Client(base_url=base, timeout=60) as client:
                big_pages, small_pages = pages(big, big_evo, serve_name), pages(small, small_evo, serve_name)
                for (label, path), (_, small_path) in zip(big_pages, small_pages, strict=True):
                    t_big = time_http(client, path, args.repeat)
                    t_small = time_http(client, small_path, args.repeat)
                    size = len(client.get(path).content)
                    rows.append({"page": label, "path": path, "bytes": size, "http_p50_ms": 1000 * statistics.median(t_big),
                                 "http_max_ms": 1000 * max(t_big), "small_p50_ms": 1000 * statistics.median(t_small),
                                 "ratio": statistics.median(t_big) / statistics.median(t_small)})
            browser = time_browser(base, [r["path"] for r in rows], max(3, args.repeat // 2))
            for r in rows:
                if browser:
                    r["browser_p50_ms"] = 1000 * statistics.median(browser[r["path"]])
                    r["browser_max_ms"] = 1000 * max(browser[r["path"]])
        finally:
            server.should_exit = True
    worst = max(max(r["http_max_ms"], r.get("browser_max_ms", 0.0)) for r in rows)
    result = {"candidates": args.candidates, "steps": args.steps, "episodes": args.episodes, "turns": args.turns,
              "repeat": args.repeat, "build_s": round(build_s, 1), "load_average": os.getloadavg()[0], "cpus": os.cpu_count(),
              "browser": bool(rows and "browser_p50_ms" in rows[0]), "worst_ms": worst, "target_met": worst < 1000, "pages": rows}
    write_json(args.out, result)
    lines = [
        "# Dashboard page loads on a big run", "",
        f"One AutoHarness-shaped run with **{args.candidates} candidates** (half of them in the tree, each with an evaluation) and "
        f"**{args.steps} steps** ({args.episodes} episodes of {args.steps // args.episodes}); a serving run with {args.turns} judged "
        f"turns; an improvement-engine archive of {args.candidates} candidates (results on three splits, a decision "
        f"and a claim check each, a step event each). Written through the store in {build_s:.0f} s. {args.repeat} loads per page after a warm-up; load average "
        f"{result['load_average']:.2f} on {os.cpu_count()} CPUs. Baseline: the same page for a run of 10 candidates and 100 steps "
        "(an archive of 10 candidates), same server, same run of the benchmark.", "",
        "| page | HTTP p50 (ms) | HTTP max (ms) | browser load p50 (ms) | browser max (ms) | small run p50 (ms) | ratio | HTML KiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['page']} | {r['http_p50_ms']:.1f} | {r['http_max_ms']:.1f} | {r.get('browser_p50_ms', float('nan')):.1f} | "
                     f"{r.get('browser_max_ms', float('nan')):.1f} | {r['small_p50_ms']:.1f} | {r['ratio']:.1f}× | {r['bytes'] / 1024:.0f} |")
    lines += ["", f"Target (every page under 1 s): {'met' if result['target_met'] else 'NOT met'}; slowest single load {worst:.0f} ms.",
              "The learning row reads the same serving run for both columns (its ratio is ~1 by construction)."]
    write_markdown(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
