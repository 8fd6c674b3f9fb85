"""AutoHarness small-model ablation: which idea makes a 0.5B refiner succeed on TicTacToe-v0?

Each configuration runs the search on the engine (``ratchet.api.synthesize_harness``, what
``ratchet autoharness`` runs) with the same model, game, seeds and call budget; then the best
harness is checked on held-out seeds with no LLM (the code alone plays 5 seeds × 200 steps, and its
is_legal_action labels transitions harvested from those seeds). Rows without ``path: engine`` in the
results ran the dedicated search, since removed: history. Configurations: the
paper's loop (faithful), the faithful loop plus ONE idea at a time, and all ideas together;
plus reuse of the library's harness for a similar game. The results' two ``decompose`` rows are
history too: that idea lowered the score and was removed.

    python -m bench.autoharness_ablation --model local:qwen2.5-coder-0.5b --max-calls 9

Writes bench/results/autoharness_ablation.json and .md after every configuration.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench._results import RESULTS, write_json, write_markdown

NAME = "autoharness_ablation"
NONE = {"transitions": False, "helper_library": False, "few_shot": False, "samples_per_step": 1, "library_seed": False,
        "scaffold": False, "novelty": False, "repair": False}
CONFIGS = {
    "all ideas (ratchet method)": ("ratchet", {"library_seed": False}),
    "faithful (paper loop)": ("faithful", {}),
    "+ one-function scaffold with its expected output": ("ratchet", {**NONE, "scaffold": True}),
    "+ labelled transitions as unit tests": ("ratchet", {**NONE, "transitions": True}),
    "+ helper library (with its output on a real board)": ("ratchet", {**NONE, "helper_library": True}),
    "+ 3 samples per refinement, keep the best": ("ratchet", {**NONE, "samples_per_step": 3}),
    "+ worked example for another game": ("ratchet", {**NONE, "few_shot": True}),
    "all ideas but novelty (repeated programs judged again)": ("ratchet", {"library_seed": False, "novelty": False}),
    "all ideas but repair (no AST mutants)": ("ratchet", {"library_seed": False, "repair": False}),
    "all ideas + restarts after a stall": ("ratchet", {"library_seed": False, "restarts": True}),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.autoharness_ablation", description=__doc__)
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    parser.add_argument("--env", default="TicTacToe-v0")
    parser.add_argument("--max-calls", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None, help="run only configurations whose name contains one of these")
    parser.add_argument("--resume", action="store_true", help="keep configurations already in the JSON")
    args = parser.parse_args(argv)

    from bench._autoharness import row
    from ratchet.api import synthesize_harness
    from ratchet.autoharness.config import AutoHarnessConfig

    store = Path(tempfile.mkdtemp(prefix="ratchet-ablation-"))
    out = RESULTS / f"{NAME}.json"
    rows: list[dict] = json.loads(out.read_text())["rows"] if args.resume and out.exists() else []
    have = {r["config"] for r in rows}
    for name, (method, ideas) in CONFIGS.items():
        if name in have or (args.only and not any(o in name for o in args.only)):
            continue
        # each configuration its own, empty library: no row starts from the harness another kept
        cfg = AutoHarnessConfig(env=args.env, method=method, model=args.model, iterations=args.max_calls, eval_steps=50,
                                heldout_seeds=list(range(1000, 1005)), ideas=ideas,
                                library_dir=str(store / "libraries" / name[:40].replace("/", "-")))
        cfg.budget.max_calls = args.max_calls
        started = time.perf_counter()
        result = synthesize_harness(config=cfg, protocol="none", store=store / "runs", threads=args.threads)
        rows.append({"config": name, "method": method, "ideas": ideas, "path": "engine",
                     **row(result.report, result.run_dir), "total_wall_s": round(time.perf_counter() - started, 1)})
        print(json.dumps(rows[-1]), flush=True)
        _write(args, rows)
    _write(args, rows)
    return 0


def _write(args, rows: list[dict], out: Path = RESULTS) -> None:
    data = {"model": args.model, "env": args.env, "max_calls": args.max_calls, "rows": rows}
    write_json(NAME, data, out=out)
    write_markdown(NAME, markdown(data), out=out)


def markdown(data: dict) -> str:
    """The table for people, from the results' JSON (``model``, ``env``, ``max_calls``, ``rows``)."""
    lines = [
        f"# AutoHarness ablation: {data['env']}, {data['model']}, at most {data['max_calls']} refiner calls per configuration",
        "",
        "Held-out = the best harness alone (no LLM) on 5 held-out seeds × 200 steps; verifier accuracy on transitions",
        "harvested from those seeds. Search seeds 0-9. One run per configuration (no repeats: read small differences as noise).",
        "Rows added with --resume keep their first run: the run id (its date and time) says which version of the code made it.",
        "",
        "| configuration | best h (search) | calls used | call that first reached h = 1 | held-out legal rate | held-out verifier accuracy | tokens | wall s | run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        f = lambda v: "–" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))  # noqa: E731
        lines.append(f"| {r['config']} | {f(r['best_h'])} | {r['calls']} | {f(r['calls_to_h1'])} | {f(r['heldout_legal_rate'])} | "
                     f"{f(r['heldout_verifier_accuracy'])} | {r['tokens']} | {r['wall_s']} | {r.get('run', '–')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
