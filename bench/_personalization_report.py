"""The personalization bench's report: result keys, the spread between seeds and the markdown
table of ``bench/results/online_personalization.md`` (rendering apart from the measuring, which lives
in ``bench/online_personalization.py``)."""

from __future__ import annotations

import statistics
from typing import Any


def result_key(result: dict[str, Any]) -> str:
    """MODEL/PREFERENCE/SIGNAL[/sSEED][/LABEL] (results before seeds were recorded have none)."""
    key = f"{result['model']}/{result['preference']}/{result['signal']}"
    if result.get("seed") is not None:
        key += f"/s{result['seed']}"
    return key + (f"/{result['label']}" if result.get("label") else "")


def spread(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per MODEL/PREFERENCE/SIGNAL[/LABEL] run at two or more seeds: the between-run spread."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in runs.values():
        if r.get("seed") is not None:
            key = f"{r['model']}/{r['preference']}/{r['signal']}" + (f"/{r['label']}" if r.get("label") else "")
            groups.setdefault(key, []).append(r)
    rows = []
    for key, group in sorted(groups.items()):
        if len(group) < 2:
            continue
        group.sort(key=lambda r: r["seed"])
        best = [r["best_served_preference"] for r in group]
        final = [r["final_served_preference"] for r in group]
        rows.append({
            "key": key, "seeds": [r["seed"] for r in group], "base": [r["base_preference"] for r in group],
            "best_mean": statistics.mean(best), "best_sd": statistics.stdev(best),
            "final_mean": statistics.mean(final), "final_sd": statistics.stdev(final),
            "final_min": min(final), "final_max": max(final),
            "guard_within_band": sum(bool(r["guard_within_band"]) for r in group),
            "first_improvement": [(r.get("first_improvement") or {}).get("conversations") for r in group],
        })
    return rows


def judge_words(judge: dict[str, Any] | None) -> str:
    """"; judged by …", which judge ran, from the run's record ("" for results from before it was
    recorded: those ran the classifier, the default then, unless their overrides name another)."""
    if not judge:
        return ""
    by = ", ".join(f"{name} ({n} turn{'s' * (n != 1)})" for name, n in (judge.get("judgements_by") or {}).items()) or "no judgement"
    choice = judge.get("choice") or {}
    how = (f", chosen by judge.kind=auto because {choice.get('reason')}" if choice.get("configured") == "auto"
           else f", judge.kind={choice['configured']}" if choice.get("configured") else "")
    return f"; judged by {by}{how}"


def markdown(data: dict[str, Any]) -> str:
    lines = ["# Personalization through `ratchet serve` (bench/online_personalization.py)", "",
             "Held-out preference score = fraction of greedy replies to 12 held-out prompts that satisfy the "
             "preference checker; guard = fraction of 12 neutral tasks answered correctly; band = 2 binomial "
             "standard errors of the base. Every version the trainer published is listed: served (promoted) or "
             "refused by the gate, with the checks that refused it.", ""]
    if data.get("base"):
        lines += ["## The base model per preference", "",
                  "Before any conversation (`--base-only`): the share of the base's greedy replies to the "
                  "preference's held-out prompts that its checker accepts.", "",
                  "| model | preference | met | score | reply budget (tokens) | guard |", "|---|---|---|---|---|---|"]
        for key, b in sorted(data["base"].items()):
            guard = "—" if b.get("guard") is None else f"{b['guard']:.2f}"
            lines.append(f"| {b['model']} | {b['preference']} | {b['met']}/{b['prompts']} | {b['score']:.2f} | "
                         f"{b['max_tokens']} | {guard} |")
        lines.append("")
    rows = spread(data["runs"])
    if rows:
        lines += ["## Spread between seeds", "",
                  "Mean ± sample standard deviation over the seeds; first improvement = conversations before the "
                  "first served version above the base's band (— none).", "",
                  "| run | seeds | base | best served | final served (min–max) | guard in band | first improvement |",
                  "|---|---|---|---|---|---|---|"]
        for g in rows:
            lines.append(
                f"| {g['key']} | {','.join(map(str, g['seeds']))} | {'/'.join(f'{b:.2f}' for b in g['base'])} | "
                f"{g['best_mean']:.2f} ± {g['best_sd']:.2f} | {g['final_mean']:.2f} ± {g['final_sd']:.2f} "
                f"({g['final_min']:.2f}–{g['final_max']:.2f}) | {g['guard_within_band']}/{len(g['seeds'])} | "
                f"{', '.join('—' if c is None else str(c) for c in g['first_improvement'])} |")
        lines.append("")
    for key, r in sorted(data["runs"].items()):
        first = r.get("first_improvement")
        args = r.get("serve_args") or []
        extra = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--set" and not args[i + 1].startswith(
            ("runs_root=", "trainer.heldout_path=", "trainer.gate.", "max_tokens=", "status_every_s="))]
        context = r["signal"] == "context"
        gate = ("no trainer and no gate: the playbook learned by the judge loop is served in every prompt"
                if context else "the server's default gate (nothing configured: it holds out a share of its own "
                "conversations)" if r.get("gate") == "default" else "the bench's preference and guard cases given to the gate")
        serve = "--learn off --set context.online=true" if context else f"--learn {r['signal']}"
        extra = [x for x in extra if not (context and x == "context.online=true")]
        lines += [f"## {key}", "", f"`ratchet serve {serve}`, overrides: {', '.join(extra) or 'none'} "
                  f"(everything else: the defaults when it ran); {gate}{judge_words(r.get('judge'))}."
                  + (f" {r['note']}" if r.get("note") else ""), "",
                  f"{r['conversations']} conversations"
                  + (f" (a pause after every {r['pace']} until the {'playbook' if context else 'trainer'} had taken "
                     "them)" if r.get("pace") else "")
                  + f", {r.get('wall_s') or 0:.0f} s; base preference "
                  f"{r['base_preference']:.2f} (band ±{r['preference_noise_band']:.2f}), best served "
                  f"{r['best_served_preference']:.2f}, final served {r['final_served_preference']:.2f}; guard base "
                  f"{r['base_guard']:.2f} (band ±{r['guard_noise_band']:.2f}), final served {r['final_served_guard']:.2f}"
                  f" ({'within' if r['guard_within_band'] else 'OUTSIDE'} band for every served version). First "
                  "measurable improvement: " + ("none" if not first else
                                                f"v{first['version']} after {first['conversations']} conversations, "
                                                f"{first['elapsed_s']:.0f} s"), ""]
        if context:
            lines += context_table(r)
            continue
        lines += ["| version | conversations | s | served | preference | guard | KL to base | refused by |",
                  "|---|---|---|---|---|---|---|---|"]
        for v in r["versions"]:
            kl = v.get("kl_to_base")
            lines.append(f"| {v['version']} | {v.get('conversations') if v.get('conversations') is not None else '—'} | "
                         f"{v.get('elapsed_s') if v.get('elapsed_s') is not None else '—'} | "
                         f"{'yes' if v['promoted'] else 'no'} | {v['preference']:.2f} | {v['guard']:.2f} | "
                         f"{'—' if kl is None else f'{kl:.3f}'} | {', '.join(v.get('gate_failed') or []) or '—'} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def context_table(r: dict[str, Any]) -> list[str]:
    """A ``--learn context`` run's rows: one per playbook snapshot (version 0: the empty playbook, the
    base), with its size and what learning it had cost by then."""
    lines = ["Version = playbook snapshot (taken after the conversations shown); items and tokens: the whole "
             "playbook (a prompt gets those chosen for it, within the budget); calls and model s: the "
             "reflector/curator calls and their seconds so far, learn s: the learning steps' wall time so far.", "",
             "| version (playbook) | conversations | s | items | tokens | calls | model s | learn s | preference | guard |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v in r["versions"]:
        lines.append(f"| {v['version']} | {v.get('conversations')} | {v.get('elapsed_s')} | {v.get('items', 0)} | "
                     f"{v.get('tokens', 0)} | {v.get('calls', 0)} | {v.get('model_s', 0.0):.1f} | "
                     f"{v.get('learn_wall_s', 0.0):.1f} | {v['preference']:.2f} | {v['guard']:.2f} |")
    return [*lines, ""]
