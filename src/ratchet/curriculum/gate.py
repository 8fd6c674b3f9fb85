"""The games gate: a candidate weight version against the version it would replace, on the held-out
games with the same search seeds.

The unit is a (game, search seed) pair, measured by both versions. The candidate is **better** when
its mean best h over the pairs is higher, tested one-sided with the engine gate's paired test
(:func:`ratchet.evolve.gate.paired_p`, sign flips) at ``alpha``; where no outcome of so few pairs
could reach ``alpha`` (2^-n ≥ alpha) the point estimates decide, as :func:`~ratchet.evolve.gate.not_worse`
does, and the record says so. When best h ties on every pair (both solve everything, or neither
moves), fewer calls to solve on the pairs both solved is the gain, by the same test. A candidate
that solves fewer pairs is refused whatever its mean h (a solve is what the headline counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import fmean
from typing import Any

from ratchet.evolve.gate import paired_p
from ratchet.stats import wilson


def summary(results: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Solve rate (with its Wilson 95% interval), mean best h and mean calls to solve of one
    version's held-out searches (``results``: per ``game#seed``)."""
    rows = list(results.values())
    solved = sum(bool(r["solved"]) for r in rows)
    low, high = wilson(solved, len(rows)) if rows else (0.0, 0.0)
    to_solve = [r["calls_to_solve"] for r in rows if r.get("calls_to_solve") is not None]
    return {"n": len(rows), "solved": solved, "solve_rate": round(solved / len(rows), 4) if rows else None,
            "wilson95": [round(low, 3), round(high, 3)],
            "mean_best_h": round(fmean(r["best_h"] for r in rows), 4) if rows else None,
            "mean_calls_to_solve": round(fmean(to_solve), 2) if to_solve else None,
            "calls": sum(int(r.get("calls") or 0) for r in rows)}


def _better(diffs: list[float], alpha: float) -> tuple[bool, dict[str, Any]]:
    mean = fmean(diffs)
    if 0.5 ** len(diffs) >= alpha:
        return mean > 1e-9, {"basis": "point estimates", "why": f"{len(diffs)} pairs cannot reach p < {alpha}",
                             "mean_delta": round(mean, 4)}
    p = paired_p(diffs)
    return mean > 1e-9 and p < alpha, {"basis": "sign_flip", "p": round(p, 4), "mean_delta": round(mean, 4)}


def decide(incumbent: Mapping[str, dict[str, Any]], candidate: Mapping[str, dict[str, Any]], *,
           alpha: float = 0.05) -> dict[str, Any]:
    """Whether ``candidate`` replaces ``incumbent`` (see the module's docstring): ``promote``,
    ``reason`` and the numbers it decided on."""
    pairs = sorted(incumbent.keys() & candidate.keys())
    if not pairs:
        return {"promote": False, "reason": "no held-out (game, seed) pair was measured by both versions", "pairs": 0}
    before = {k: incumbent[k] for k in pairs}
    after = {k: candidate[k] for k in pairs}
    numbers: dict[str, Any] = {"pairs": len(pairs), "incumbent": summary(before), "candidate": summary(after)}
    lost = numbers["incumbent"]["solved"] - numbers["candidate"]["solved"]
    if lost > 0:
        return {**numbers, "promote": False, "test": None,
                "reason": f"solves {numbers['candidate']['solved']} of {len(pairs)} held-out searches, "
                          f"{lost} fewer than the version it would replace"}
    h_diffs = [after[k]["best_h"] - before[k]["best_h"] for k in pairs]
    if any(abs(d) > 1e-9 for d in h_diffs):
        better, test = _better(h_diffs, alpha)
        what = f"mean best h {numbers['incumbent']['mean_best_h']:.3f} -> {numbers['candidate']['mean_best_h']:.3f}"
    else:
        both = [k for k in pairs if before[k]["calls_to_solve"] is not None and after[k]["calls_to_solve"] is not None]
        if not both:
            return {**numbers, "promote": False, "test": None,
                    "reason": "no better: the same best h on every held-out search, and no search both solved to compare calls"}
        better, test = _better([float(before[k]["calls_to_solve"] - after[k]["calls_to_solve"]) for k in both], alpha)
        what = (f"the same best h on every held-out search; calls to solve "
                f"{fmean(before[k]['calls_to_solve'] for k in both):.1f} -> {fmean(after[k]['calls_to_solve'] for k in both):.1f}")
    basis = f"sign-flip p = {test['p']}" if test["basis"] == "sign_flip" else f"point estimates ({test['why']})"
    return {**numbers, "promote": better, "test": test,
            "reason": f"{'better' if better else 'not better'}: {what} over {len(pairs)} pairs, {basis}"}
