"""The evolve gate's error rates on the synthetic noisy suite (no model): A/A and planted runs.

- **A/A**: 20 runs whose every proposal is a no-op (files unchanged) or cosmetic (the same pass
  probabilities, re-indented JSON: the suite redraws every answer, as a sampling model answers a
  reworded prompt differently). Target: the gate accepts <= 5% of the cosmetic proposals it sees.
  No-op proposals never reach the gate (the static check rejects an unchanged candidate); they
  are run to show that.
- **Planted**: 20 runs whose every proposal raises every task's pass probability by ``gain``.
  Target: >= 80% accepted at the default gain; smaller gains are shown as the power curve.
- **Gate alone**: the same two questions asked of the gate directly, 500 parent/child pairs each
  (no store, no loop), for a tighter estimate of its error rates, with Wilson 95% intervals.

Each run is a fresh instance of the suite (its own salt) with its own starting pass probability,
through the whole engine (static check, smoke stage, held-in / held-out / guard, the gate, the
final report). The controls are defined here, in the benchmark, so that it needs no proposer.

    python -m bench.evolve_gate [--runs 20] [--steps 5] [--tasks 80]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from bench._results import RESULTS, write_json, write_markdown
from ratchet.config import Settings
from ratchet.contracts import Candidate, Claim, Proposal
from ratchet.evolve.config import EvolveConfig, GateOptions
from ratchet.evolve.context import EngineContext
from ratchet.evolve.gate import BootstrapGate, PairedGate, noise_band
from ratchet.evolve.loop import Engine
from ratchet.evolve.manifest import Manifest
from ratchet.evolve.suites.synthetic import NoisyOptions, NoisySuite
from ratchet.stats import wilson
from ratchet.store import RunStore

FILE = "harness.json"
MODULE = "bench.evolve_gate"


class ControlOptions(Settings):
    """Options of the benchmark's controls."""

    gain: float = Field(default=0.0, ge=0, le=1)
    """How much the planted control raises every task's pass probability."""


class NoopControl:
    """Proposes the parent's files unchanged."""

    name = "noop"
    deterministic = False

    def __init__(self, options: ControlOptions, ctx: EngineContext) -> None:
        self.options = options

    def propose(self, parent: Candidate, archive: Any, rng: random.Random) -> Proposal:
        return Proposal(dict(parent.files), Claim("nothing"), self.name, (parent.id,))


class CosmeticControl(NoopControl):
    """The same pass probabilities written differently (indent, trailing newlines)."""

    name = "cosmetic"

    def propose(self, parent: Candidate, archive: Any, rng: random.Random) -> Proposal:
        data = json.loads(parent.files[FILE])
        # Whitespace only, drawn from enough variants that no two proposals of a run coincide.
        text = json.dumps(data, indent=rng.randint(1, 12)) + " " * rng.randrange(10_000) + "\n"
        return Proposal({FILE: text}, Claim("reformat"), self.name, (parent.id,))


class PlantedControl(NoopControl):
    """Raises every task's pass probability by ``gain``: a real improvement of known size."""

    name = "planted"

    def propose(self, parent: Candidate, archive: Any, rng: random.Random) -> Proposal:
        data = json.loads(parent.files[FILE])
        data["default"] = min(1.0, data["default"] + self.options.gain)
        # A variant number (the suite ignores it) makes each proposal a new candidate with its own
        # draws, so a rejected improvement is retried as a fresh one rather than as a duplicate.
        data["variant"] = rng.randrange(10**9)
        return Proposal({FILE: json.dumps(data) + "\n"}, Claim(f"+{self.options.gain}"), self.name, (parent.id,))


def workspace(root: Path, p: float) -> Path:
    (root / "grader").mkdir(parents=True)
    (root / "manifest.yaml").write_text("name: noisy\neditable: ['harness.json']\nprotected: ['grader/**']\n")
    (root / FILE).write_text(json.dumps({"default": p}) + "\n")
    (root / "grader" / "README").write_text("the noisy suite grades in-process; nothing to pin but this\n")
    return root


def one_run(tmp: Path, control: str, gain: float, gate: str, index: int, args: argparse.Namespace,
            correction: str = "spending") -> dict[str, Any]:
    rng = random.Random(f"{control}:{gain}:{gate}:{index}")
    # A planted run starts low enough that its first gain stays below p = 1 (later ones may cap).
    p = rng.uniform(0.2, 0.8) if control != "planted" else rng.uniform(0.1, 0.9 - gain)
    ws = workspace(tmp / f"ws-{control}-{gain}-{gate}-{correction}-{index}", round(p, 3))
    cfg = EvolveConfig.model_validate({
        "workspace": str(ws),
        "suite": {"name": "noisy", "options": {"tasks": args.tasks, "salt": index}},
        "splits": {"search": 0.25, "heldin": 0.25, "heldout": 0.25, "test": 0.25, "seed": index},
        "selector": {"name": "greedy"},
        "proposers": [{"name": f"{MODULE}:{type_name(control)}", "options": {"gain": gain}}],
        "gate": {"name": gate, "options": {"correction": correction}},
        "iterations": args.steps,
        "seeds": [0, 1, 2],
        "static": {"load_entry": False},
        "report": {"max_best_of_n": 1, "bootstrap": 200},  # the report is not what this bench measures
        "seed": index,
    })
    run = RunStore(tmp / "runs").create_run("evolve", cfg)
    events: list[dict[str, Any]] = []
    Engine(cfg, run, on_event=events.append).execute()
    steps = [e for e in events if e["kind"] == "step"]
    gated = [e for e in steps if e["status"] in ("accepted", "rejected")
             and not e.get("reason", "").startswith(("static check", "smoke"))]
    # Per paired test: its index in the run, whether it kept the child, and the parent's held-in
    # mean against the suite's true rate (how lucky or unlucky the sample every child is compared to).
    tests = [{"k": int(e["numbers"]["test_index"]), "accepted": e["status"] == "accepted",
              "parent_minus_true": round(e["numbers"]["heldin_parent"] - round(p, 3), 4)}
             for e in gated if "test_index" in (e.get("numbers") or {})]
    return {"p0": round(p, 3), "proposals": len(steps), "gated": len(gated), "tests": tests,
            "first_accepted": bool(steps) and steps[0]["status"] == "accepted",
            "accepted": sum(1 for e in steps if e["status"] == "accepted"),
            "static_rejects": sum(1 for e in steps if e.get("reason", "").startswith("static check")),
            "smoke_rejects": sum(1 for e in steps if e.get("reason", "").startswith("smoke")),
            "duplicates": sum(1 for e in steps if e["status"] == "duplicate")}


def type_name(control: str) -> str:
    return {"noop": "NoopControl", "cosmetic": "CosmeticControl", "planted": "PlantedControl"}[control]


def arm(tmp: Path, control: str, gain: float, gate: str, args: argparse.Namespace,
        correction: str = "spending") -> dict[str, Any]:
    t0 = time.perf_counter()
    runs = [one_run(tmp, control, gain, gate, i, args, correction) for i in range(args.runs)]
    proposals = sum(r["proposals"] for r in runs)
    gated = sum(r["gated"] for r in runs)
    accepted = sum(r["accepted"] for r in runs)
    row = {"control": control, "gain": gain, "gate": gate, "correction": correction, "runs": len(runs),
           "proposals": proposals,
           "reached_gate": gated, "accepted": accepted,
           "acceptance_of_proposals": accepted / proposals if proposals else 0.0,
           "acceptance_at_gate": accepted / gated if gated else 0.0,
           "runs_with_any_accept": sum(1 for r in runs if r["accepted"]) / len(runs),
           "first_proposal_accepted": sum(1 for r in runs if r["first_accepted"]) / len(runs), "static_rejects": sum(r["static_rejects"] for r in runs),
           "smoke_rejects": sum(r["smoke_rejects"] for r in runs), "duplicates": sum(r["duplicates"] for r in runs), "wall_s": round(time.perf_counter() - t0, 2)}
    print(json.dumps(row), flush=True)
    return row


def aa_at_scale(tmp: Path, gate: str, correction: str, runs: int, args: argparse.Namespace) -> dict[str, Any]:
    """The A/A (cosmetic) row again with many more runs: a 20-run rate has a 95% interval about
    25 points wide, too wide to tell 5% from 10%. Also the acceptance of each test index of a run
    (the k-th test is at alpha / 2^k under ``spending``) and, for the kept children, how far their
    parent's held-in mean was below its true pass rate."""
    many = argparse.Namespace(**{**vars(args), "runs": runs})
    results = [one_run(tmp, "cosmetic", 0.0, gate, i, many, correction) for i in range(runs)]
    with_any = sum(1 for r in results if r["accepted"])
    low, high = wilson(with_any, runs)
    tests = [t for r in results for t in r["tests"]]
    by_k: dict[int, list[int]] = {}
    for t in tests:
        by_k.setdefault(t["k"], [0, 0])
        by_k[t["k"]][0] += 1
        by_k[t["k"]][1] += t["accepted"]
    kept = [t["parent_minus_true"] for t in tests if t["accepted"]]
    row = {"gate": gate, "correction": correction, "runs": runs, "runs_with_any_accept": with_any,
           "rate": with_any / runs, "ci95": [round(low, 4), round(high, 4)],
           "by_test_index": {str(k): {"tests": n, "accepted": a} for k, (n, a) in sorted(by_k.items())},
           "kept_parent_minus_true": kept,
           "all_parent_minus_true_mean": round(sum(t["parent_minus_true"] for t in tests) / len(tests), 4) if tests else None}
    print(json.dumps(row), flush=True)
    return row


def gate_alone(gate: str, gain: float, pairs: int, tasks: int, correction: str = "spending") -> dict[str, Any]:
    """Acceptance of ``pairs`` parent/child pairs decided by the gate directly (gain 0: cosmetic).
    Each pair is decided by a fresh gate: it is the first test of a run (under ``spending``, at alpha/2)."""
    suite = NoisySuite(NoisyOptions(tasks=tasks))
    heldin, heldout = suite.tasks()[: tasks // 2], suite.tasks()[tasks // 2:]
    cls = {"paired": PairedGate, "bootstrap": BootstrapGate}[gate]
    rng = random.Random(f"alone:{gate}:{gain}")
    accepted = 0
    for i in range(pairs):
        p = rng.uniform(0.1, 0.9 - gain)
        parent = Candidate.from_files("noisy", {FILE: json.dumps({"default": p, "pair": i})})
        child = Candidate.from_files("noisy", {FILE: json.dumps({"default": p + gain, "pair": i, "child": True})})

        def on(c: Candidate, split: list) -> list:
            return [r for seed in (0, 1, 2) for r in suite.evaluate(c, split, seed)]

        before = {"heldin": on(parent, heldin), "heldout": on(parent, heldout)}
        after = {"heldin": on(child, heldin), "heldout": on(child, heldout)}
        decider = cls(GateOptions(correction=correction), EngineContext(Manifest(name="noisy", editable=[FILE]), Path(".")))
        accepted += decider.decide(before, after, {k: noise_band(v) for k, v in before.items()}).accepted
    low, high = wilson(accepted, pairs)
    row = {"gate": gate, "correction": correction, "gain": gain, "pairs": pairs, "heldin_tasks": len(heldin), "accepted": accepted,
           "rate": accepted / pairs, "ci95": [round(low, 4), round(high, 4)]}
    print(json.dumps(row), flush=True)
    return row


def markdown(result: dict[str, Any]) -> str:
    cfg = result["config"]
    lines = [
        "# evolve gate: A/A and planted-improvement runs (synthetic noisy suite, no model)",
        "",
        f"{cfg['runs']} runs per row, {cfg['steps']} proposals per run, {cfg['tasks']} tasks split 1/4 each into "
        "search / held-in / held-out / test, seeds 0-2 (held-in: "
        f"{cfg['tasks'] // 4} tasks x 3 seeds per paired test). Targets: A/A (cosmetic) acceptance <= 5%, "
        "planted (gain 0.25) acceptance >= 80%.",
        "",
        "| control | gain | gate | correction | proposals | reached gate | accepted | accepted / proposals | first proposal accepted | runs with any accept | static rejects | smoke rejects | duplicates |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(f"| {r['control']} | {r['gain']} | {r['gate']} | {r['correction']} | {r['proposals']} | {r['reached_gate']} | {r['accepted']} "
                     f"| {r['acceptance_of_proposals']:.1%} | {r['first_proposal_accepted']:.0%} | {r['runs_with_any_accept']:.0%} | {r['static_rejects']} "
                     f"| {r['smoke_rejects']} | {r['duplicates']} |")
    lines += ["", "## The gate alone", "",
              f"{result['config']['pairs']} parent/child pairs per row decided by the gate directly: held-in "
              f"{result['config']['tasks'] // 4} tasks x 3 seeds, held-out as many; gain 0 is a cosmetic child "
              "(the same pass probability, every answer redrawn).", "",
              "| gate | correction | gain | pairs | accepted | rate | Wilson 95% |", "|---|---|---|---|---|---|---|"]
    for r in result["alone"]:
        lines.append(f"| {r['gate']} | {r['correction']} | {r['gain']} | {r['pairs']} | {r['accepted']} | {r['rate']:.1%} "
                     f"| {r['ci95'][0]:.1%} – {r['ci95'][1]:.1%} |")
    for r in result.get("scale", []):
        alpha = GateOptions().alpha  # the bench runs the gate at its default alpha
        levels = " + ".join(f"{alpha / 2 ** int(k):.4g}" for k in r["by_test_index"]) if r["correction"] == "spending" else None
        lines += ["", f"## A/A with {r['runs']} runs ({r['gate']}/{r['correction']})", "",
                  f"{r['runs_with_any_accept']} of {r['runs']} cosmetic runs kept a change: {r['rate']:.1%} "
                  f"(Wilson 95% {r['ci95'][0]:.1%} – {r['ci95'][1]:.1%})"
                  + (f"; the bound is the sum of the run's test levels, {levels} = "
                     f"{sum(alpha / 2 ** int(k) for k in r['by_test_index']):.3f}." if levels else "."), "",
                  "| test k of the run | tests | accepted | rate |", "|---|---|---|---|"]
        for k, c in r["by_test_index"].items():
            lines.append(f"| {k} | {c['tests']} | {c['accepted']} | {c['accepted'] / c['tests']:.1%} |")
        kept = ", ".join(f"{d:+.3f}" for d in r["kept_parent_minus_true"]) or "none"
        lines += ["", f"Parent's held-in mean minus its true pass rate, for the kept children: {kept} "
                  f"(over all tests: {r['all_parent_minus_true_mean']:+.3f})."]
    lines += ["", "## Verdict", ""]
    for line in result["verdict"]:
        lines.append(f"- {line}")
    lines += ["", "No-op proposals never reach the gate: the static check rejects a candidate identical to its parent. "
              "Cosmetic proposals do reach it, with every answer redrawn, so their acceptance is the gate's "
              "false-positive rate per proposal; \"runs with any accept\" is the chance that a run of "
              f"{cfg['steps']} such proposals keeps at least one, the per-run rate the target is about. "
              "Correction `none` tests each proposal at alpha = 0.05, which does not make a whole run's "
              "false-acceptance rate 5%; `spending` (the default) tests the k-th proposal of a run at "
              "alpha / 2^k, so a run's rate is at most alpha. The price is power: see the planted rows.", "",
              "Why a run's rate is above the gate-alone rate: a gate-alone pair is one test at the first level "
              "(alpha / 2); a run makes up to one test per proposal, and its bound is the sum of their levels. "
              "The tests of a run also share one sample of the parent: when its held-in mean is low by chance, "
              "every child compared to it looks better (the A/A-at-scale section lists, for the kept children, "
              "how far below its true rate their parent's sample was). That makes a run's tests correlated, "
              "which the sum bound allows for; it does not break it.", "",
              "The smoke stage (4 held-in tasks, one seed, drop a child 0.25 below its parent) is cheap but blunt: "
              "the planted rows' smoke rejects are real improvements it threw away. Planted rows after the first "
              "proposal compound on an improved parent and cap at p = 1, so \"first proposal accepted\" (20 "
              "trials) and the gate-alone rows (500 pairs) are the measures of power.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evolve_gate", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=80)
    parser.add_argument("--pairs", type=int, default=500, help="parent/child pairs per gate-alone row")
    parser.add_argument("--aa-runs", type=int, default=400,
                        help="runs of the A/A-at-scale row (cosmetic, first --gates entry; 0 skips it)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--gates", nargs="+", default=["paired:spending", "paired:none", "bootstrap:spending"],
                        help="gate:correction pairs to measure")
    parser.add_argument("--name", default="evolve_gate", help="result name under --out")
    args = parser.parse_args(argv)
    combos = [tuple(g.split(":", 1)) for g in args.gates]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for gate, correction in combos:
            rows.append(arm(Path(tmp), "noop", 0.0, gate, args, correction))
            rows.append(arm(Path(tmp), "cosmetic", 0.0, gate, args, correction))
            for gain in (0.1, 0.15, 0.25):
                rows.append(arm(Path(tmp), "planted", gain, gate, args, correction))
        scale = [aa_at_scale(Path(tmp) / "scale", *combos[0], args.aa_runs, args)] if args.aa_runs else []
    alone = [gate_alone(gate, gain, args.pairs, args.tasks // 2, correction)
             for gate, correction in combos for gain in (0.0, 0.15, 0.25)]
    verdict = []
    for r in alone:
        if r["gain"] == 0.0:
            verdict.append(f"gate alone, {r['gate']}/{r['correction']}: {r['rate']:.1%} of {r['pairs']} cosmetic "
                           f"children accepted (95% {r['ci95'][0]:.1%} – {r['ci95'][1]:.1%})")
    for r in rows:
        name = f"{r['gate']}/{r['correction']}"
        if r["control"] == "cosmetic":
            per_run = r["runs_with_any_accept"]
            verdict.append(f"A/A {name}: {per_run:.0%} of runs kept a cosmetic change "
                           f"({'meets' if per_run <= 0.05 else 'MISSES'} <= 5% of runs); "
                           f"{r['acceptance_of_proposals']:.1%} of cosmetic proposals accepted")
        if r["control"] == "planted" and r["gain"] == 0.25:
            ok = r["first_proposal_accepted"] >= 0.8
            verdict.append(f"planted +0.25 {name}: the first proposal of {r['first_proposal_accepted']:.0%} of runs "
                           f"accepted ({'meets' if ok else 'MISSES'} >= 80%); {r['runs_with_any_accept']:.0%} of runs "
                           f"kept one; {r['acceptance_of_proposals']:.0%} of all its proposals")
    for r in scale:
        verdict.append(f"A/A {r['gate']}/{r['correction']}, {r['runs']} runs: {r['rate']:.1%} kept a cosmetic change "
                       f"(95% {r['ci95'][0]:.1%} – {r['ci95'][1]:.1%}; {'meets' if r['rate'] <= 0.05 else 'MISSES'} <= 5%)")
    result = {"bench": "evolve_gate", "config": vars(args) | {"out": str(args.out)}, "rows": rows, "alone": alone,
              "scale": scale, "verdict": verdict,
              "python": sys.version.split()[0], "created_at": time.time()}
    write_json(args.name, result, out=args.out)
    write_markdown(args.name, markdown(result), out=args.out)
    print("\n".join(verdict))
    return 0


if __name__ == "__main__":
    sys.exit(main())
