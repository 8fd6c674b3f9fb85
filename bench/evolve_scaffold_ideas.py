"""The search's ideas as engine components, one at a time, over engine seeds: AutoHarness on the
engine with the one-function request (``examples/autoharness-engine/evolve-scaffold.yaml``,
TicTacToe-v0, the real 0.5B) as shipped and with one component changed.

Variants (the ``critic_refiner``'s options; everything else is the YAML's: the Thompson selector,
the legality suite, the paired gate, 10 steps, at most 20 model calls, search seeds 0-3, held-in
4-11, test 1000-1007):

- ``plain``: the YAML as shipped;
- ``body_only``: ``ScaffoldRefiner(body_only=True)``, legal_moves' signature and docstring sent as
  the reply's prefix (the search's ``body_prefix``);
- ``body_counterexamples``: that plus ``counterexamples=2``, the states the parent's
  ``legal_actions`` gets wrong (run in the sandbox) first among the doctest examples;
- ``body_samples``: ``body_only`` with ``samples: 2``, two replies per step ranked by the
  refiner's screen (``legal_actions`` against the explored states, in the sandbox), the best
  proposed (the search's ``samples``): 20 model calls, the YAML's whole budget, where the others
  use 10, and the report's best-of-N for the original grows with them;
- ``fallback``: ``fallback_refiner: HarnessRefiner`` after two unusable replies for a parent (the
  search's whole-harness fallback).

The engine seed draws the parents, the proposers' sampling seeds and the report's best-of-N seeds;
the splits are fixed by id. Each (variant, seed) is one run in ``--root``, found again by its
config, so a cut-short bench resumes where it stopped and runs made with ``ratchet evolve run
CONFIG --set seed=S`` of the same config count. Writes
``bench/results/evolve_autoharness_engine_scaffold_ideas.{json,md}``.

    python -m bench.evolve_scaffold_ideas --root STORE --seeds 0 1 2 3 4 5 --threads 1
"""

from __future__ import annotations

import argparse
import ast
import json
import time
from pathlib import Path
from statistics import fmean
from typing import Any

import yaml

from bench._results import machine, write_json, write_markdown
from ratchet.evolve.archive import Archive
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.evolve.preflight import CONFIG_COPY
from ratchet.evolve.report_tables import ci_cell
from ratchet.store import RunStore
from ratchet.store.files import write_bytes_atomic

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "autoharness-engine" / "evolve-scaffold.yaml"
OUT = "evolve_autoharness_engine_scaffold_ideas"
TITLE = "AutoHarness on the engine: the search's ideas as components of the one-function request, over engine seeds"
VARIANTS = ("plain", "body_only", "body_counterexamples", "body_samples", "fallback")


def variant_config(variant: str, seed: int) -> dict[str, Any]:
    """The YAML with ``variant``'s change to the critic_refiner and the engine seed."""
    raw = yaml.safe_load(CONFIG.read_text())
    options = raw["proposers"][0]["options"]
    refiner = options["refiner_options"]
    if variant in ("body_only", "body_counterexamples", "body_samples"):
        refiner["body_only"] = True
    if variant == "body_counterexamples":
        refiner["counterexamples"] = 2
    if variant == "body_samples":
        options["samples"] = 2  # 20 model calls in 10 steps: the YAML's whole budget
    if variant == "fallback":
        options.update(fallback_refiner="ratchet.autoharness.refine:HarnessRefiner",
                       fallback_refiner_options={"game": refiner["game"], "description": refiner["description"]})
    elif variant != "plain" and variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r}; the variants: {', '.join(VARIANTS)}")
    return {**raw, "workspace": str(CONFIG.parent), "seed": seed}


def variant_of(config: dict[str, Any]) -> str | None:
    """Which variant a run's config is (None: another config)."""
    proposers = config.get("proposers") or []
    if len(proposers) != 1 or proposers[0].get("name") != "critic_refiner":
        return None
    options = proposers[0].get("options") or {}
    if "ScaffoldRefiner" not in str(options.get("refiner")):
        return None
    refiner = options.get("refiner_options") or {}
    if options.get("fallback_refiner"):
        return "fallback"
    if refiner.get("body_only"):
        if options.get("samples", 1) > 1:
            return "body_samples"
        return "body_counterexamples" if refiner.get("counterexamples") else "body_only"
    return "plain"


def runs_by_variant(root: Path) -> dict[tuple[str, int], Any]:
    """(variant, seed) -> the finished or unfinished run of it in ``root`` (the newest if several)."""
    store, found = RunStore(root), {}
    for d in sorted(p for p in root.iterdir() if (p / CONFIG_COPY).is_file()) if root.is_dir() else []:
        config = yaml.safe_load((d / CONFIG_COPY).read_text())
        variant = variant_of(config)
        if variant is not None:
            found[(variant, int(config.get("seed", 0)))] = store.open_run(d.name)
    return found


def legal_moves_of(code: str) -> str:
    """The body of ``legal_moves`` in one line, its docstring left out (what the kept harness decides)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "(does not parse)"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "legal_moves":
            body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
            return " / ".join(ast.unparse(n).replace("\n", " ") for n in body)[:240]
    return "(no legal_moves)"


def row(variant: str, seed: int, run: Any) -> dict[str, Any]:
    report = run.read_json("evolve/report.json")
    archive = Archive(run)
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e.get("kind") == "step"]
    out: dict[str, Any] = {"variant": variant, "seed": seed, "run": run.id, "finished": report is not None,
                           "steps": [{k: e.get(k) for k in ("step", "status", "child", "parent", "reason")} for e in steps]}
    if report is None:
        return out
    best = archive.get(report["best"]["id"])
    fell_back = [c.id for c in archive.candidates() if (c.meta.get("proposal") or {}).get("refiner") == "fallback"]
    calls = sum(1 for r in run.read_jsonl("llm_calls.jsonl"))
    # where a counterexample request could be made: the parent has its own legal_moves
    own = sum(1 for e in steps if "def legal_moves" in archive.get(e["parent"]).files.get("harness.py", ""))
    out.update(test_best=report["best"], test_original=report["original"], best_of_n=report["original_best_of_n"],
               kept=None if best.parent_id is None else {"id": best.id, "step": best.meta.get("step"),
                                                         "legal_moves": legal_moves_of(best.files.get("harness.py", ""))},
               fallback_children=fell_back, model_calls=calls, steps_on_own_legal_moves=own,
               accepted=sum(1 for c in archive.candidates("accepted") if c.parent_id is not None))
    return out


def write(rows: list[dict[str, Any]], seeds: list[int], threads: int, note: str = "") -> None:
    data = {"what": TITLE, "note": note, "config": str(CONFIG.relative_to(ROOT)), "seeds": seeds,
            "variants": list(VARIANTS), "rows": rows, "machine": machine(threads=threads),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json(OUT, data)
    lines = [f"# {data['what']}", "",
             "`python -m bench.evolve_scaffold_ideas` (module docstring: the variants). TicTacToe-v0, "
             "local:qwen2.5-coder-0.5b, one llama.cpp thread; test seeds 1000-1007, 95% bootstrap CIs; the "
             "original's best-of-2 is the same extra budget given to the original.", "",
             "| variant | seeds run | test, best: mean over seeds | seeds at ≥ 0.95 | seeds where a child was kept |",
             "|---|---|---|---|---|"]
    for variant in VARIANTS:
        done = [r for r in rows if r["variant"] == variant and r["finished"]]
        if not done:
            continue
        means = [r["test_best"]["mean"] for r in done]
        lines.append(f"| {variant} | {', '.join(str(r['seed']) for r in done)} | {fmean(means):.3f} | "
                     f"{sum(m >= 0.95 for m in means)} of {len(done)} | {sum(r['kept'] is not None for r in done)} of {len(done)} |")
    lines += ["", "| variant | seed | test, best | test, original | original best-of-2 | kept | its legal_moves | model calls "
              "| steps refining a parent's own legal_moves |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["finished"]:
            lines.append(f"| {r['variant']} | {r['seed']} | (unfinished: {len(r['steps'])} steps) | | | | | | |")
            continue
        kept = r["kept"]
        lines.append(f"| {r['variant']} | {r['seed']} | {ci_cell(r['test_best'])} | {ci_cell(r['test_original'])} | "
                     f"{ci_cell(r['best_of_n'])} | {'nothing' if kept is None else 'step ' + str(kept['step'] + 1)} | "
                     f"{'' if kept is None else '`' + kept['legal_moves'].replace('|', '/') + '`'} | {r['model_calls']} | "
                     f"{r['steps_on_own_legal_moves']} of {len(r['steps'])} |")
    fallback = [r for r in rows if r["variant"] == "fallback" and r["finished"]]
    if fallback:
        lines += ["", "Fallback children (asked with the whole-harness request): "
                  + "; ".join(f"seed {r['seed']}: {len(r['fallback_children'])}" for r in fallback) + "."]
    if note:
        lines += ["", note]
    write_markdown(OUT, "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evolve_scaffold_ideas", description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, type=Path, help="the run store holding one run per (variant, seed)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    parser.add_argument("--write-only", action="store_true", help="write the results of the runs in --root; run nothing")
    parser.add_argument("--note", default="", help="a paragraph of what the numbers say, put under the tables")
    args = parser.parse_args(argv)
    model = None
    found = runs_by_variant(args.root)  # read once; a run made below is added to it
    for variant in args.variants:
        for seed in args.seeds:
            run = found.get((variant, seed))
            if args.write_only or (run is not None and run.read_json("evolve/report.json") is not None):
                continue
            if model is None:
                from ratchet.models import load_model  # llama.cpp loads only when a run is to be made

                model = load_model(args.model, n_threads=args.threads)
            raw = variant_config(variant, seed)
            config = EvolveConfig.model_validate({**raw, "model": args.model})
            if run is None:
                run = RunStore(args.root).create_run("evolve", config, name="autoharness-tictactoe",
                                                     run_id=f"{variant}-s{seed}")
                # as `ratchet evolve run` keeps it: how this bench finds the run again
                write_bytes_atomic(run.path(CONFIG_COPY), yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False).encode())
                found[(variant, seed)] = run
            print(f"{variant} seed {seed}: run {run.id}", flush=True)
            Engine(config, run, model, on_event=lambda e: print(json.dumps(e, default=str)[:200], flush=True)).execute()
    rows = [row(v, s, found[(v, s)]) for v in args.variants for s in args.seeds if (v, s) in found]
    write(rows, args.seeds, args.threads, args.note)
    print(f"wrote bench/results/{OUT}.md ({len(rows)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
