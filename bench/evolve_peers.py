"""Ratchet's evolve vs GEPA (``optimize_anything``) and OpenEvolve on the same HumanEval run.

Every arm evolves the same surface of the same starting harness (the system prompt of
``examples/humaneval-coder``; its generate -> run the examples -> repair workflow stays fixed) with
the same model (the embedded qwen2.5-coder-0.5b), on the same splits and grader as
``bench/evolve_humaneval.py`` (search HumanEval/100-103, held-in 104-115, test 134-163), under
the same budget of model calls: what Ratchet's run spent in its search (proposals and
evaluations, the original's included). The best candidate of each arm is then graded here on the
untouched test split, paired with the original, with bootstrap CIs.

The peers are not dependencies of Ratchet: they run in the bench environment
(``scripts/setup-bench.sh``, ``make bench-env``; default ``.venv-bench`` or
``$RATCHET_BENCH_VENV``) as a child process (``bench/_peers/*.py``) that reaches this process
over HTTP on localhost:

- ``POST /v1/chat/completions``: an OpenAI-compatible endpoint in front of the embedded model,
  so each peer uses its own documented LLM client (GEPA: litellm through ``reflection_lm``;
  OpenEvolve: its OpenAI client through ``llm.models[].api_base``);
- ``POST /evaluate`` ``{"system_prompt", "task_ids"}``: the engine's humaneval suite (workflow and
  grading in the sandbox) on the harness with that system prompt, per-task scores and traces.

Each peer is configured as its documentation recommends for prompt optimization: GEPA in its
generalization mode (``dataset`` = search, ``valset`` = held-in, reflective mutation on
minibatches of 3, Pareto candidate selection), OpenEvolve with full rewrites of a text program
(``diff_based_evolution: false``, as its prompt-optimization example), scored on held-in with
the search split's failures as artifacts. Both stop when the call budget is spent (checked
between their iterations, so the last one may run over; the calls actually made are reported).

Replies are shared with ``evolve_humaneval`` through one reply cache
(``evolve_humaneval.replies.jsonl``), so a request one arm made is not paid again; every arm's
calls are counted as asked for, cached or not.

    python -m bench.evolve_peers --arm gepa        # one arm per chunk of machine time
    python -m bench.evolve_peers --arm openevolve
    python -m bench.evolve_peers --table           # the table from what has run

``--size workflow`` repeats the workflow search instead (``bench/workflow_search.py``, issue: a
searched workflow against best-of-k): its search, held-in and test problems (``WORKFLOW_SPLITS``,
98 test problems), the model calls its search spent as the budget, and a table of the peers' best
prompts (each graded under the original's greedy workflow, as the search's ``original`` arm) beside
its three arms, with pass@1, Wilson intervals, calls per task and exact McNemar pairs. GEPA there is
the prompt-only reference: what rewriting the prompt alone buys for the same calls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench._results import RESULTS, write_json, write_markdown
from bench._setup import (
    MODEL,
    PROPOSER_MAX_TOKENS,
    PROPOSER_TEMPERATURE,
    SMALL_SPLITS,
    SPLITS,
    WORKFLOW_SPLITS,
    WORKSPACE,
    JsonHandler,
    bench_python,
    proposer_model,
    proposer_suffix,
    shared_model,
    span,
    suite_options,
)
from ratchet.contracts import Candidate
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.report import bootstrap_ci
from ratchet.evolve.report_tables import ci_cell
from ratchet.evolve.suites.config import HumanEvalOptions
from ratchet.evolve.suites.humaneval import HumanEvalSuite
from ratchet.models.budget import Accountant, AccountedModel
from ratchet.stats import mcnemar_exact, wilson

HERE = Path(__file__).resolve().parent
PEERS = {"gepa": HERE / "_peers" / "gepa_run.py", "openevolve": HERE / "_peers" / "openevolve_run.py"}
SURFACE = "prompts/system.md"
#: Which Ratchet run the peers repeat (``--size``): its splits, its results, this bench's result name.
SIZES = {"full": {"splits": SPLITS, "ours": "evolve_humaneval", "out": "evolve_peers", "reference": "evolve"},
         "small": {"splits": SMALL_SPLITS, "ours": "evolve_humaneval_small", "out": "evolve_peers_small",
                   "reference": "evolve"},
         "workflow": {"splits": WORKFLOW_SPLITS, "ours": "workflow_search", "out": "evolve_peers_workflow",
                      "reference": "workflow"}}
SIZE = dict(SIZES["full"])


def original_files() -> dict[str, str]:
    manifest = load_manifest(WORKSPACE)
    return {str(p.relative_to(WORKSPACE)): p.read_text() for p in sorted(WORKSPACE.rglob("*"))
            if p.is_file() and manifest.is_editable(str(p.relative_to(WORKSPACE)))}


class Service:
    """The model and the grader behind one lock (one model process), with per-arm call counts."""

    def __init__(self, model: Any, proposer_model: Any = None, max_tokens: int = PROPOSER_MAX_TOKENS) -> None:
        self.lock = threading.Lock()
        self.max_tokens = max_tokens  # the cap Ratchet's proposer had: a peer asking for more gets this
        self.proposer = Accountant()
        self.evaluation = Accountant()
        # The peer's own LLM (GEPA's reflection_lm, OpenEvolve's models) is the proposer: the
        # larger model when one proposes for the small one, as Ratchet's proposer_model.
        self.proposer_model = AccountedModel(proposer_model or model, self.proposer, "propose")
        ctx = EngineContext(load_manifest(WORKSPACE), WORKSPACE, model=AccountedModel(model, self.evaluation, "evaluate"))
        self.suite = HumanEvalSuite(HumanEvalOptions.model_validate(suite_options(SIZE["splits"])), ctx)
        self.tasks = {t.id: t for t in self.suite.tasks()}
        self.base = original_files()
        self.cache: dict[tuple[str, str], dict[str, Any]] = {}
        self.task_evals = 0

    def candidate(self, system_prompt: str) -> Candidate:
        return Candidate.from_files("humaneval-coder", {**self.base, SURFACE: system_prompt})

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str)
                     else "".join(part.get("text", "") for part in m["content"])} for m in body["messages"]]
        params = {"temperature": float(body.get("temperature", PROPOSER_TEMPERATURE) or 0.0),
                  "max_tokens": min(int(body.get("max_tokens") or self.max_tokens), self.max_tokens),
                  "seed": body.get("seed")}
        with self.lock:
            if params["seed"] is None:  # a peer that sends no seed gets the next one: replies stay replayable
                params["seed"] = self.proposer.snapshot()["calls"]
            out = self.proposer_model.complete(messages, **params)
        return {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", MODEL),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": out.text},
                             "finish_reason": out.finish_reason or "stop"}],
                "usage": {"prompt_tokens": out.usage.prompt_tokens, "completion_tokens": out.usage.completion_tokens,
                          "total_tokens": out.usage.prompt_tokens + out.usage.completion_tokens}}

    def evaluate(self, system_prompt: str, task_ids: list[str]) -> list[dict[str, Any]]:
        candidate = self.candidate(system_prompt)
        unknown = [t for t in task_ids if t not in self.tasks]
        if unknown:
            raise ValueError(f"unknown task ids {unknown[:3]}")
        rows = []
        with self.lock:
            for task_id in task_ids:
                key = (candidate.id, task_id)
                if key not in self.cache:
                    [r] = self.suite.evaluate(candidate, [self.tasks[task_id]], 0)
                    self.task_evals += 1
                    self.cache[key] = {"task_id": task_id, "score": r.score, "trace": r.trace[-3000:],
                                       "failures": [f"{f.kind}: {f.message}" for f in r.failures]}
                rows.append(self.cache[key])
        return rows

    def spent(self) -> dict[str, Any]:
        p, e = self.proposer.snapshot(), self.evaluation.snapshot()
        return {"proposer_calls": p["calls"], "evaluation_calls": e["calls"], "calls": p["calls"] + e["calls"],
                "tokens": p["tokens"] + e["tokens"], "task_evals": self.task_evals}


def handler_for(service: Service) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                return self.reply(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            if self.path == "/spent":
                return self.reply(200, service.spent())
            self.reply(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            try:
                if self.path.rstrip("/").endswith("/chat/completions"):
                    return self.reply(200, service.complete(body))
                if self.path == "/evaluate":
                    return self.reply(200, service.evaluate(body["system_prompt"], list(body["task_ids"])))
            except (KeyError, ValueError, TypeError) as exc:
                return self.reply(400, {"error": {"message": str(exc)}})
            self.reply(404, {"error": f"no route {self.path}"})

    return Handler


def ours() -> dict[str, Any]:
    """The Ratchet run the peers repeat (its result under bench/results)."""
    path = RESULTS / f"{SIZE['ours']}.json"
    if not path.exists():
        bench = "workflow_search" if SIZE["reference"] == "workflow" else "evolve_humaneval"
        raise SystemExit(f"no {path.name}: run python -m bench.{bench} first (the peers get the budget its search spent)")
    return json.loads(path.read_text())


def ratchet_budget() -> dict[str, Any]:
    data = ours()
    if SIZE["reference"] == "workflow":  # the workflow search's engine report, as the headline keeps it
        return {"calls": data["search"]["budget"]["calls"], "proposals": data["search"]["proposals"]["total"]}
    report = data["report"]
    return {"calls": report["original_best_of_n"]["search_spend"], "proposals": report["proposals"]["total"],
            "report": report}


def test_scores(service: Service, system_prompt: str) -> tuple[dict[str, float], float]:
    """Each test problem's score, and the model calls per problem the grading asked for."""
    before = service.evaluation.snapshot()["calls"]
    rows = service.evaluate(system_prompt, SIZE["splits"]["test"])
    calls = service.evaluation.snapshot()["calls"] - before
    return {r["task_id"]: r["score"] for r in rows}, calls / max(1, len(rows))


def run_arm(name: str, args: argparse.Namespace) -> dict[str, Any]:
    budget = args.budget if args.budget is not None else ratchet_budget()["calls"]
    replies = None if args.model == MODEL else Path(args.work) / "scripted.replies.jsonl"
    proposer = proposer_model(args.proposer_model if args.model == MODEL else None, args.threads, n_ctx=8192)
    service = Service(shared_model(args.model, args.threads, n_ctx=8192, **({"replies": replies} if replies else {})),
                      proposer, args.proposer_max_tokens)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(service))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    work = Path(args.work) / name
    work.mkdir(parents=True, exist_ok=True)
    spec = {"url": url, "budget_calls": budget, "seed_prompt": service.base[SURFACE], "search": SIZE["splits"]["search"],
            "heldin": SIZE["splits"]["heldin"], "model": args.proposer_model or MODEL, "temperature": PROPOSER_TEMPERATURE,
            "max_tokens": args.proposer_max_tokens, "work": str(work)}
    (work / "spec.json").write_text(json.dumps(spec, indent=2))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "local", "PYTHONPATH": ""}
    started = time.perf_counter()
    proc = subprocess.run([str(bench_python()), str(PEERS[name]), str(work / "spec.json")], env=env,
                          timeout=args.timeout_s, cwd=work)
    search_spent = service.spent()
    wall = time.perf_counter() - started
    result_path = work / "result.json"
    if proc.returncode != 0 or not result_path.exists():
        server.shutdown()
        raise SystemExit(f"{name} failed (exit {proc.returncode}); see its output above")
    peer = json.loads(result_path.read_text())
    best = peer["best_prompt"]
    best_test, best_calls = test_scores(service, best)
    original_test, original_calls = test_scores(service, service.base[SURFACE])
    server.shutdown()
    row = {"arm": name, "budget_calls": budget, "search": search_spent, "wall_s": round(wall, 1),
           "best_prompt": best, "best_is_original": best == service.base[SURFACE],
           "peer": {k: v for k, v in peer.items() if k != "best_prompt"},
           "test": {"best": best_test, "original": original_test},
           # 0 where a prompt's grading was answered from this process's cache (the best is the original)
           "test_calls_per_task": {"best": best_calls, "original": original_calls}}
    if args.model == MODEL:  # a plumbing run (scripted:) leaves the results alone
        store = RESULTS / f"{SIZE['out']}.arms.json"
        arms = json.loads(store.read_text()) if store.exists() else {}
        arms[name] = row
        write_json(store.stem, arms)
    return row


def ci(values: list[float]) -> dict[str, float]:
    return bootstrap_ci(values, 2000, 0.95, 0)


def table(missing_why: str = "") -> None:
    if SIZE["reference"] == "workflow":
        return workflow_table(missing_why)
    ours = ratchet_budget()["report"]
    store = RESULTS / f"{SIZE['out']}.arms.json"
    arms = json.loads(store.read_text()) if store.exists() else {}
    splits = SIZE["splits"]
    ids = splits["test"]
    evolve = json.loads((RESULTS / f"{SIZE['ours']}.json").read_text())
    rows = [{"arm": "ratchet evolve", "calls": ours["original_best_of_n"]["search_spend"],
             "proposals": ours["proposals"]["total"], "accepted": ours["proposals"]["accepted"],
             "best": ours["best"], "gain": ours["comparison"]["best_minus_original"],
             "best_is_original": ours["best"]["id"] == ours["original"]["id"]}]
    for name, arm in arms.items():
        best = [arm["test"]["best"].get(t, 0.0) for t in ids]
        orig = [arm["test"]["original"].get(t, 0.0) for t in ids]
        rows.append({"arm": name, "calls": arm["search"]["calls"], "proposals": arm["peer"].get("proposals"),
                     "accepted": arm["peer"].get("improved"), "best": ci(best),
                     "gain": ci([b - o for b, o in zip(best, orig)]), "best_is_original": arm["best_is_original"]})
    proposing = evolve.get("proposer_model")
    out = {"model": MODEL, "proposer_model": proposing, "splits": splits, "original_test": ours["original"], "rows": rows, "arms": arms,
           "ratchet_totals": evolve.get("totals"), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(SIZE["out"], out, default=str)
    lines = [f"# Evolving the humaneval-coder system prompt: Ratchet vs GEPA vs OpenEvolve ({MODEL}"
             + (f", {proposing} proposing for every arm)" if proposing else ")"), "",
             "Produced by `python -m bench.evolve_peers` (its docstring has the set-up). Same model, surface "
             "(the system prompt), starting harness, splits and grader for every arm; each peer's budget is the "
             "model calls Ratchet's search spent (peers stop between iterations, so they may run a little over: "
             f"the calls column is what each actually made). Test split: {span(ids)} ({len(ids)} problems, greedy, "
             "untouched by every search). 95% bootstrap CIs over test problems.", "",
             f"Original harness on test: {ci_cell(ours['original'])}", "",
             "| arm | model calls in the search | proposals | kept / improved | best on test | best - original |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        same = " (= original)" if r["best_is_original"] else ""
        lines.append(f"| {r['arm']} | {r['calls']} | {r['proposals']} | {r['accepted']} | {ci_cell(r['best'])}{same} "
                     f"| {ci_cell(r['gain'])} |")
    missing = sorted(set(PEERS) - set(arms))
    if missing:
        lines += ["", f"Not run: {', '.join(missing)}." + (f" {missing_why}" if missing_why else "")]
    write_markdown(SIZE["out"], "\n".join(lines) + "\n")
    print("\n".join(lines))


def _passed(scores: dict[str, float], ids: list[str]) -> set[str]:
    return {t for t in ids if scores.get(t, 0.0) >= 1.0}


def workflow_table(missing_why: str = "") -> None:
    """The peers' best prompts beside the workflow search's arms, on its test split."""
    data = ours()
    ids = SIZE["splits"]["test"]
    store = RESULTS / f"{SIZE['out']}.arms.json"
    arms = json.loads(store.read_text()) if store.exists() else {}
    # the search's arms ran seed 0 of each test problem (its test_seeds); the peers' graded greedy, once
    solved = {arm: {key.rsplit("#", 1)[0] for key in keys if key.endswith("#0")} for arm, keys in data["solved"].items()}
    rows = [{"arm": f"workflow search: {arm}", "passed": a["passed"], "n": a["n"], "calls_per_task": a["calls_per_task"],
             "search_calls": data["search"]["budget"]["calls"] if arm == "evolved" else None} for arm, a in data["arms"].items()]
    pairs = []
    for name, arm in arms.items():
        best = _passed(arm["test"]["best"], ids)
        original = _passed(arm["test"]["original"], ids)
        rows.append({"arm": f"{name}: best prompt, original workflow", "passed": len(best), "n": len(ids),
                     "calls_per_task": arm["test_calls_per_task"]["best"], "search_calls": arm["search"]["calls"],
                     "best_is_original": arm["best_is_original"]})
        # the same original graded here and by the search's bench: they should agree (greedy)
        rows.append({"arm": f"{name}: original, graded here", "passed": len(original), "n": len(ids),
                     "calls_per_task": arm["test_calls_per_task"]["original"], "search_calls": None})
        for other in ("evolved", "best-of-k", "original"):
            wins, losses = len(best - solved[other]), len(solved[other] - best)
            pairs.append({"first": name, "second": other, "only_first": wins, "only_second": losses,
                          "mcnemar_p": mcnemar_exact(wins, losses)})
    for r in rows:
        r["pass_at_1"] = r["passed"] / r["n"] if r["n"] else 0.0
        r["wilson_low"], r["wilson_high"] = wilson(r["passed"], r["n"])
    write_json(SIZE["out"], {"model": MODEL, "splits": SIZE["splits"], "rows": rows, "pairs": pairs, "arms": arms,
                             "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, default=str)
    lines = [f"# The workflow search beside the prompt-only reference ({MODEL})", "",
             "Produced by `python -m bench.evolve_peers --size workflow` after `python -m bench.workflow_search` "
             "(`workflow_search.md`): the same search, held-in and test problems, each peer given the model calls the "
             f"workflow search spent ({data['search']['budget']['calls']}). A peer evolves the system prompt only; its "
             f"best prompt is graded under the original's greedy workflow. Test split: {len(ids)} problems, untouched "
             "by every search; Wilson 95% intervals.", "",
             "| arm | pass@1 | Wilson 95% | passed | calls / task | search calls |", "|---|---|---|---|---|---|"]
    for r in rows:
        same = " (= original)" if r.get("best_is_original") else ""
        lines.append(f"| {r['arm']}{same} | {r['pass_at_1']:.3f} | {r['wilson_low']:.3f}–{r['wilson_high']:.3f} | "
                     f"{r['passed']}/{r['n']} | {r['calls_per_task']:.2f} | {r['search_calls'] or '–'} |")
    lines.append("")
    for p in pairs:
        lines.append(f"- {p['first']} vs {p['second']}: only {p['first']} solved {p['only_first']}, only {p['second']} "
                     f"{p['only_second']}; exact McNemar p = {p['mcnemar_p']:.3f}.")
    missing = sorted(set(PEERS) - set(arms))
    if missing:
        lines += ["", f"Not run: {', '.join(missing)}." + (f" {missing_why}" if missing_why else "")]
    write_markdown(SIZE["out"], "\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evolve_peers", description=__doc__.splitlines()[0])
    parser.add_argument("--arm", choices=sorted(PEERS), action="append", help="run this peer (repeatable)")
    parser.add_argument("--table", action="store_true", help="write the table from the arms that have run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=3000)
    parser.add_argument("--model", default=MODEL, help="model spec (scripted: checks the plumbing, no model, no results)")
    parser.add_argument("--budget", type=int, default=None, help="model calls per peer (default: Ratchet's search spend)")
    parser.add_argument("--work", default=str(HERE.parent / "runs" / "peers"), help="the peers' working directories")
    parser.add_argument("--size", choices=sorted(SIZES), default="full",
                        help="which Ratchet run to repeat: evolve_humaneval's (full, small) or workflow_search's (workflow)")
    parser.add_argument("--proposer-model", default=None,
                        help="the peers' own LLM (GEPA's reflection_lm, OpenEvolve's model) when it is not --model: "
                             "repeats the evolve_humaneval run made with the same --proposer-model")
    parser.add_argument("--proposer-max-tokens", type=int, default=PROPOSER_MAX_TOKENS,
                        help="the peers' reply budget: the one the Ratchet run they repeat had")
    parser.add_argument("--ours", default=None,
                        help="the evolve_humaneval result (its name under bench/results) the arms repeat and the "
                             "table compares with (default: by --size and --proposer-model)")
    parser.add_argument("--missing-why", default="", help="why the arms the table lacks did not run (written beside them)")
    args = parser.parse_args(argv)
    SIZE.update(SIZES[args.size])
    if args.proposer_model:  # the Ratchet run it repeats, and its own results, are named apart
        SIZE.update(ours=SIZE["ours"] + proposer_suffix(args), out=SIZE["out"] + proposer_suffix(args))
    if args.ours:
        SIZE["ours"] = args.ours
    # Apart per proposer model: GEPA resumes from the state it finds there, and would continue
    # another model's run as its own.
    args.work = str(Path(args.work).resolve() / (args.size + proposer_suffix(args)))  # the peer runs in it: absolute
    for name in args.arm or ([] if args.table else sorted(PEERS)):
        row = run_arm(name, args)
        print(json.dumps({k: row[k] for k in ("arm", "search", "best_is_original", "best_prompt")}), flush=True)
    if args.model == MODEL:
        table(args.missing_why)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
