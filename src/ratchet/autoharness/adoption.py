"""The adoption gate: a synthesized harness is used (kept in the harness library, exported) only if
the held-out check shows it does no harm.

The search score ``h`` is measured on the search seeds with the harness alone; what a user gets is
the model *with* the harness on seeds the search never saw. A verifier that is wrong in a way the
search did not catch rejects legal moves and its fallback then plays an illegal one, so the model
with the harness can do worse than the model alone (measured: LightsOut 0.9 → 0.0 legal rate with
the 1.5B). The gate compares the protocol's two sides, both measured in the same run:

- ``adopted``: legal rate and reward with the harness are each no lower than without it (less the
  configured margins);
- ``rejected``: either one is lower; the reasons name the numbers;
- ``unchecked``: the protocol did not run (``--protocol none``, or a batch that ran out of time),
  so nothing was compared.
"""

from __future__ import annotations

from typing import Any, Literal

from ratchet.autoharness.config import AdoptionConfig

Verdict = Literal["adopted", "rejected", "unchecked"]


def judge(before: dict[str, Any] | None, after: dict[str, Any] | None, config: AdoptionConfig | None = None) -> dict[str, Any]:
    """The verdict on one harness from the protocol's ``before``/``after`` sides of a report."""
    config = config or AdoptionConfig()
    if not before or not after:
        return {"verdict": "unchecked", "reasons": ["the held-out before/after check did not run"]}
    reasons = []
    for key, label, margin in (("legal_rate", "legal rate", config.legal_margin), ("reward", "reward", config.reward_margin)):
        b, a = before.get(key), after.get(key)
        if b is not None and a is not None and a < b - margin - 1e-9:
            reasons.append(f"{label} {b:.2f} without the harness, {a:.2f} with it")
    verdict: Verdict = "rejected" if reasons else "adopted"
    return {"verdict": verdict, "reasons": reasons or ["no loss on the held-out seeds"],
            "legal_delta": _delta(before, after, "legal_rate"), "reward_delta": _delta(before, after, "reward")}


def _delta(before: dict[str, Any], after: dict[str, Any], key: str) -> float | None:
    if before.get(key) is None or after.get(key) is None:
        return None
    return round(after[key] - before[key], 4)


def verdict_of(report: dict[str, Any] | None) -> Verdict:
    """A stored report's verdict; reports written before the gate existed are judged from their sides."""
    report = report or {}
    return (report.get("adoption") or judge(report.get("before"), report.get("after")))["verdict"]

