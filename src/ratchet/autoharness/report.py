"""Per-game reports (JSON) and the readable table over many games (markdown); a report's held-out
sides (``protocol_sides``) and verdict come from :mod:`ratchet.autoharness.heldout`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratchet.autoharness.heldout import verdict_of


def failed_games(reports: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Games of a batch that produced no result, each with its reason (a batch's status shows them)."""
    return {env: r.get("reason", "") for env, r in reports.items() if r.get("status") == "not run"}


def _f(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(reports: Sequence[dict[str, Any]], title: str = "", notes: Sequence[str] = ()) -> str:
    """A table with one row per game; games not run keep a row marked "not run"."""
    lines = [f"# {title}" if title else "", *[f"- {n}" for n in notes], ""]
    lines.append("| game | players | best h (search) | legal rate before | legal rate after | reward before | reward after | "
                 "held-out check | harness alone: legal rate | harness alone: verifier accuracy | iterations | LLM calls | tokens | "
                 "search s | stop |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in reports:
        if r.get("status") == "not run" or "search" not in r:
            lines.append(f"| {r['env']} | {_f(r.get('players'))} | not run | | | | | | | | | | | | {r.get('reason', '')} |")
            continue
        s, b, a = r["search"], r.get("before") or {}, r.get("after") or {}
        alone = r.get("harness_alone") or {}
        check = verdict_of(r) if b and a else None
        lines.append(
            f"| {r['env']} | {_f(r.get('players'))} | {_f(s['best_h'])} | {_f(b.get('legal_rate'))} | {_f(a.get('legal_rate'))} | "
            f"{_f(b.get('reward'))} | {_f(a.get('reward'))} | {_f(check)} | {_f(alone.get('legal_rate'))} | {_f(alone.get('verifier_accuracy'))} | "
            f"{s['iterations']} | {s['llm_calls']} | {s['tokens']} | "
            f"{_f(s['wall_s'], 0)} | {s['stop_reason']} |"
        )
    return "\n".join(lines).lstrip("\n") + "\n"
