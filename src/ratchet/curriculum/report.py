"""A curriculum's report: per weight version, its held-out results and the games gate's decision;
per round, its training searches, the samples fed and the version trained. Written as
``learn.json`` and ``learn.md`` in the curriculum's run after every step (``ratchet autoharness
learn --show RUN`` prints it)."""

from __future__ import annotations

from statistics import fmean
from typing import Any

from ratchet.contracts import FORMAT_VERSION
from ratchet.curriculum.gate import summary

JSON_NAME, MD_NAME = "learn.json", "learn.md"


def build(state: dict[str, Any], versions: Any) -> dict[str, Any]:
    """The report's data from the curriculum's state and its version store."""
    current = versions.current_number()
    decided = {r["version"]: r for r in state.get("rounds", []) if r.get("version") is not None}
    rows = []
    for name, slot in state.get("heldout", {}).items():
        number = int(name[1:])
        results = {k: v["result"] for k, v in slot.items() if "result" in v}
        r = decided.get(number)
        status = ("base" if number == 0 else "awaiting the games gate" if r is None or r.get("gate") is None
                  else "promoted" if r["gate"]["promote"] else "refused")
        rows.append({"version": number, "status": status, "current": number == current,
                     "round": r["round"] + 1 if r else None, "trained_from": r["incumbent"] if r else None,
                     **summary(results), "searches_done": len(results), "searches_started": len(slot),
                     "gate": (r or {}).get("gate", {}).get("reason") if r and r.get("gate") else None})
    rows.sort(key=lambda row: row["version"])
    rounds = []
    for r in state.get("rounds", []):
        done = [e["result"] for e in r["train"].values() if "result" in e]
        rounds.append({"round": r["round"] + 1, "from": r["incumbent"], "train_searches": len(done),
                       "train_mean_best_h": round(fmean(x["best_h"] for x in done), 4) if done else None,
                       "train_solved": sum(x["solved"] for x in done), "fed": r["fed"], "version": r["version"],
                       "training": r["training"], "promoted": (r.get("gate") or {}).get("promote")})
    return {"format_version": FORMAT_VERSION, "train_games": state.get("train_games", []),
            "heldout_games": state.get("heldout_games", []), "current": current, "versions": rows, "rounds": rounds,
            "feedback": feedback_table(state.get("rounds", []))}


def feedback_table(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per round and failure type: failed samples in the round's training searches, the feedback
    policy's action, whether the next round's training searches showed the type to their refiner
    (``shown_next``: False where the action was ``weights``, so only the update could remove it;
    None until that round began), the count in the next round's (same games, the next seeds; None
    until they ran) and whether it went down. A type first seen in the next round is listed with 0 before."""
    out = []
    for i, r in enumerate(rounds):
        before = r.get("failures")
        if before is None:
            continue
        nxt = rounds[i + 1] if i + 1 < len(rounds) else {}
        after = nxt.get("failures")
        for t in [*before, *(t for t in after or {} if t not in before)]:
            decision = (r.get("decisions") or {}).get(t) or {}
            n_after = None if after is None else after.get(t, 0)
            out.append({"round": r["round"] + 1, "type": t, "before": before.get(t, 0), "samples": r.get("samples"),
                        "action": decision.get("action"), "by": decision.get("by"), "fallback": decision.get("fallback"),
                        "shown_next": None if not nxt else t not in (nxt.get("hidden") or []),
                        "after": n_after, "next_samples": nxt.get("samples") if after is not None else None,
                        "down": None if n_after is None else n_after < before.get(t, 0)})
    return out


def _f(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Curriculum", "", f"Training games: {', '.join(report['train_games'])}",
             f"Held-out games: {', '.join(report['heldout_games'])}", f"Current version: v{report['current']}", "",
             "## Held-out results per version", "",
             "| version | status | round | from | solved | solve rate (Wilson 95%) | mean best h | mean calls to solve | calls | games gate |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v in report["versions"]:
        rate = f"{_f(v['solve_rate'])} ({v['wilson95'][0]:.2f}–{v['wilson95'][1]:.2f})" if v["n"] else "–"
        lines.append(f"| v{v['version']}{' (current)' if v['current'] else ''} | {v['status']} | {_f(v['round'])} | "
                     f"{'v' + str(v['trained_from']) if v['trained_from'] is not None else '–'} | {v['solved']}/{v['n']} | "
                     f"{rate} | {_f(v['mean_best_h'])} | {_f(v['mean_calls_to_solve'], 1)} | {v['calls']} | {v['gate'] or '–'} |")
    lines += ["", "## Rounds", "", "| round | from | training searches | solved | mean best h | turns fed | version | training |",
              "|---|---|---|---|---|---|---|---|"]
    for r in report["rounds"]:
        lines.append(f"| {r['round']} | v{r['from']} | {r['train_searches']} | {r['train_solved']} | "
                     f"{_f(r['train_mean_best_h'])} | {_f(r['fed'])} | {'v' + str(r['version']) if r['version'] else '–'} | "
                     f"{r['training'] or '–'} |")
    if report.get("feedback"):
        lines += ["", "## Failure types: which step removed them", "",
                  "`weights`: fed to the update and hidden from the next round's refiner (only the weights were "
                  "left to act); `harness`: shown to the refiner, not fed; `both`: shown and fed.", "",
                  "| round | failure type | failed samples (of all) | action (by) | shown to the next refiner | "
                  "next round's searches | went down |",
                  "|---|---|---|---|---|---|---|"]
        for f in report["feedback"]:
            action = f"{f['action']} ({f['by']}{', ' + f['fallback'] if f['fallback'] else ''})" if f["action"] else "–"
            after = "–" if f["after"] is None else f"{f['after']}/{f['next_samples']}"
            down = "–" if f["down"] is None else "yes" if f["down"] else "no"
            shown = "–" if f.get("shown_next") is None else "yes" if f["shown_next"] else "no"
            lines.append(f"| {f['round']} | {f['type']} | {f['before']}/{f['samples']} | {action} | {shown} | {after} | {down} |")
    return "\n".join(lines) + "\n"


def write_report(run: Any, state: dict[str, Any], versions: Any) -> dict[str, Any]:
    report = build(state, versions)
    run.write_json(JSON_NAME, report)
    from ratchet.store.files import write_bytes_atomic

    write_bytes_atomic(run.path(MD_NAME), markdown(report).encode())
    return report
