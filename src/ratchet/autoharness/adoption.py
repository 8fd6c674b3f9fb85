"""The adoption gate: a synthesized harness is used (kept in the harness library, exported) only if
the held-out check shows it does no harm.

The search score ``h`` is measured on the search seeds with the harness alone; what a user gets is
the model *with* the harness on seeds the search never saw. A verifier that is wrong in a way the
search did not catch rejects legal moves and its fallback then plays an illegal one, so the model
with the harness can do worse than the model alone (measured: LightsOut 0.9 → 0.0 legal rate with
the 1.5B). The gate pairs the protocol's two sides, both measured in the same run on the same
held-out seeds: the legal rate seed by seed and the reward game by game (the same games for both
sides), and tests each with :mod:`ratchet.stats` (``sign_flip_p`` or ``bootstrap_p``, one-sided,
on ``model alone − with harness − margin``):

- ``rejected``: the harness is worse on either measure at p < ``alpha``; the reasons name the
  numbers and the p-value;
- ``adopted``: no measure shows it worse at that level (the p-values of it being *better* are
  recorded beside, ``better_p``, so a reader sees whether it also helped);
- ``unchecked``: the protocol did not run (``--protocol none``, or a batch that ran out of time),
  so nothing was compared.

A side stored without its per-seed numbers (reports written before they were kept), or with so few
pairs that no outcome could reach p < ``alpha`` (the sign-flip test's smallest p over n pairs is
2^-n), is judged by the point estimates, as before the test: any drop beyond the margin rejects.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any, Literal

from ratchet.autoharness.config import AdoptionConfig
from ratchet.stats import bootstrap_p, sign_flip_p

Verdict = Literal["adopted", "rejected", "unchecked"]

#: Each measure: the side's point estimate, its paired values, its label, its margin's config field.
MEASURES = (("legal_rate", "legal_per_seed", "legal rate", "legal_margin", "seed"),
            ("reward", "reward_per_game", "reward", "reward_margin", "game"))


def judge(before: dict[str, Any] | None, after: dict[str, Any] | None, config: AdoptionConfig | None = None) -> dict[str, Any]:
    """The verdict on one harness from the protocol's ``before``/``after`` sides of a report."""
    config = config or AdoptionConfig()
    if not before or not after:
        return {"verdict": "unchecked", "reasons": ["the held-out before/after check did not run"]}
    test = sign_flip_p if config.test == "sign_flip" else bootstrap_p
    reasons, tests = [], {}
    for key, paired, label, margin_field, unit in MEASURES:
        margin = getattr(config, margin_field)
        b, a = before.get(key), after.get(key)
        pairs = _pairs(before.get(paired), after.get(paired))
        if pairs and 0.5 ** len(pairs) >= config.alpha:
            # So few pairs that no outcome could reach p < alpha (4 seeds: at best 1/16): a test
            # would adopt every harness, so the point estimates judge, as without per-seed numbers.
            tests[key] = {"test": "point estimates", "n": len(pairs), "why": f"{len(pairs)} pairs cannot reach p < {config.alpha}"}
            if b is not None and a is not None and a < b - margin - 1e-9:
                reasons.append(f"{label} {b:.2f} without the harness, {a:.2f} with it (point estimates: "
                               f"{len(pairs)} paired {unit}s are too few for the test)")
        elif pairs:
            worse = [x - y - margin for x, y in pairs]
            p_worse = test(worse)
            p_better = test([y - x for x, y in pairs])
            tests[key] = {"test": config.test, "n": len(pairs), "mean_delta": round(fmean(y - x for x, y in pairs), 4),
                          "worse_p": round(p_worse, 4), "better_p": round(p_better, 4)}
            if p_worse < config.alpha:
                reasons.append(f"{label} {_f(b)} without the harness, {_f(a)} with it: worse over {len(pairs)} paired "
                               f"{unit}s at p = {p_worse:.3g} < {config.alpha}")
        elif b is not None and a is not None and a < b - margin - 1e-9:
            reasons.append(f"{label} {b:.2f} without the harness, {a:.2f} with it (point estimates: no per-{unit} numbers)")
    verdict: Verdict = "rejected" if reasons else "adopted"
    return {"verdict": verdict,
            "reasons": reasons or ["no loss on the held-out seeds" + (
                f" (the paired test: not worse at p < {config.alpha})" if any(t["test"] == config.test for t in tests.values()) else "")],
            "legal_delta": _delta(before, after, "legal_rate"), "reward_delta": _delta(before, after, "reward"),
            "tests": tests, "alpha": config.alpha}


def _pairs(before: list[float | None] | None, after: list[float | None] | None) -> list[tuple[float, float]]:
    """The paired values both sides measured (a seed with no step on a side has no rate: left out);
    none when the sides were not measured on the same seeds/games (different lengths)."""
    if not before or not after or len(before) != len(after):
        return []
    return [(float(x), float(y)) for x, y in zip(before, after, strict=True) if x is not None and y is not None]


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _delta(before: dict[str, Any], after: dict[str, Any], key: str) -> float | None:
    if before.get(key) is None or after.get(key) is None:
        return None
    return round(after[key] - before[key], 4)


def verdict_of(report: dict[str, Any] | None) -> Verdict:
    """A stored report's verdict; reports written before the gate existed are judged from their sides."""
    report = report or {}
    return (report.get("adoption") or judge(report.get("before"), report.get("after")))["verdict"]
