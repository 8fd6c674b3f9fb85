"""An engine run rendered for people: markdown tables read from its run store.

The benches and the results pages print the same tables from a run: the final report's arms
(:func:`arms_table`), each candidate per split
(:func:`candidates_table`), each candidate's score beside its cost per task and which are on the
score-vs-cost frontier (:func:`frontier_table`), each step (:func:`steps_table`), what the model was paid
(:func:`calls_line`), per-task solve rates over seeds (:func:`rate_tables`) and the post-hoc
measurements of a finished run beside the original, with the gate's sign-flip test
(:func:`post_hoc_lines`; measured by :func:`ratchet.evolve.report.measure_post_hoc`). Rows of task
results are plain dicts with ``candidate``, ``task``, ``split``, ``seed`` and ``score`` (and, for
the post-hoc table, ``agent``: how the task's run ended). :func:`report_markdown` puts the arms,
the frontier, the candidates and the steps together: the run's ``evolve/report.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from statistics import fmean
from typing import Any, Literal

from ratchet.evolve.archive import Archive
from ratchet.evolve.report import paired_comparison


def ci_cell(row: Mapping[str, Any]) -> str:
    """A mean with its confidence interval, as every table shows one: ``0.450 [0.300, 0.600]``."""
    return f"{row['mean']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"


def best_of_n_label(row: Mapping[str, Any]) -> str:
    """``best-of-N`` with what the N attempts were: how many distinct, sampled at what temperature."""
    n, distinct = row["attempts"], row.get("distinct_attempts")
    how = f"sampled at {row['temperature']:g}" if row.get("temperature") else "not sampled"
    if distinct is None or n == 1:
        return f"best-of-{n}" + (f" ({how})" if n > 1 else "")
    return f"best-of-{n} ({distinct} distinct, {how})"


def arms_table(report: Mapping[str, Any], metric: str, tasks: str = "tasks") -> list[str]:
    """The final report's three arms on its untouched split (:func:`ratchet.evolve.report.final_report`):
    a heading naming the split and ``metric``, the original, the best and the original's best-of-N
    with their 95% bootstrap CIs, then the paired differences. ``tasks`` names what a task is
    (problems, games)."""
    split = "Test split" if report.get("split", "test") == "test" else "Held-out split (no test split configured)"
    same = " (= original: nothing was accepted)" if report["best"]["id"] == report["original"]["id"] else ""
    n = report["original_best_of_n"]
    diff = report["comparison"]
    return [f"## {split} ({report['tasks']} {tasks}, untouched by the search): {metric}, 95% bootstrap CIs", "",
            f"| arm | {metric} [95% CI] |", "|---|---|",
            f"| original ({report['original']['id'][:12]}) | {ci_cell(report['original'])} |",
            f"| best ({report['best']['id'][:12]}){same} | {ci_cell(report['best'])} |",
            f"| original, {best_of_n_label(n)} (the search's extra budget) | {ci_cell(n)} |", "",
            (f"best - original: {ci_cell(diff['best_minus_original'])}; "
             f"best - best-of-N: {ci_cell(diff['best_minus_best_of_n'])}. Stopped by: {report['stop_reason']}."), ""]


def step_events(run: Any) -> list[dict[str, Any]]:
    """The run's engine steps, in order (the ``step`` events of ``evolve/events.jsonl``), one per
    step index: a run killed after a step's event was written but before its checkpoint redoes that
    step on resume and logs it again, and the redone step's event (the later one) is what the run
    went on from."""
    last: dict[Any, dict[str, Any]] = {}
    for e in run.read_jsonl("evolve/events.jsonl"):
        if e.get("kind") == "step":
            last.pop(e.get("step"), None)  # re-inserted: the order is the step's last event's
            last[e.get("step")] = e
    return list(last.values())


def candidates_table(run: Any) -> list[str]:
    """Each candidate's mean reward per split it was evaluated on, and its status. The test split
    is scored only by the run's report (the archive never holds it), so its cell comes from there."""
    archive = Archive(run)
    report = run.read_json("evolve/report.json") or {}
    tested = {arm["id"]: arm for arm in (report.get("original"), report.get("best")) if arm and arm.get("id")}
    lines = ["| candidate | proposer | status | search | held-in | test |", "|---|---|---|---|---|---|"]
    for c in archive.candidates():
        cells = []
        for split in ("search", "heldin"):
            rs = archive.results(c.id, split)
            cells.append(f"{fmean(r.score for r in rs):.3f} ({len(rs)})" if rs else "–")
        arm = tested.get(c.id)
        cells.append(f"{arm['mean']:.3f} ({arm['n']} tasks)" if arm else "–")
        lines.append(f"| {c.id[:12]} | {c.meta.get('proposer', 'original')} | {archive.status(c.id)} | "
                     + " | ".join(cells) + " |")
    return lines


def frontier(points: Mapping[str, tuple[float, float]]) -> set[str]:
    """The keys of ``points`` ({key: (score, cost)}) that no other point dominates: none scores at
    least as much at no more cost, better in one of the two."""
    return {k for k, (s, c) in points.items()
            if not any(s2 >= s and c2 <= c and (s2 > s or c2 < c) for o, (s2, c2) in points.items() if o != k)}


def frontier_table(run: Any, split: str = "heldin", cost: Literal["model_calls", "tokens"] = "model_calls") -> list[str]:
    """Each candidate scored on ``split``: its mean score, its mean model calls and tokens per task
    (the metrics the workflow suites record), and whether it is on the score-vs-``cost`` frontier.
    A candidate whose results lack ``cost`` is listed ("–") without a frontier mark."""
    archive = Archive(run)
    rows, points = [], {}
    for c in archive.candidates():
        rs = archive.results(c.id, split)
        if not rs:
            continue
        per = {m: fmean(r.metrics[m] for r in rs) if all(m in r.metrics for r in rs) else None
               for m in ("model_calls", "tokens")}
        score = fmean(r.score for r in rs)
        if per[cost] is not None:
            points[c.id] = (score, per[cost])
        rows.append((c, score, per))
    front = frontier(points)
    lines = [f"| candidate | proposer | status | {split} score | calls / task | tokens / task | on the {cost} frontier |",
             "|---|---|---|---|---|---|---|"]
    for c, score, per in rows:
        cells = " | ".join(f"{v:.1f}" if v is not None else "–" for v in per.values())
        lines.append(f"| {c.id[:12]} | {c.meta.get('proposer', 'original')} | {archive.status(c.id)} | {score:.3f} | "
                     f"{cells} | {'yes' if c.id in front else ''} |")
    return lines


def records_cost(run: Any, split: str = "heldin", cost: str = "model_calls") -> bool:
    """Whether some candidate's results on ``split`` record ``cost`` per task (the workflow suites do)."""
    archive = Archive(run)
    return any(cost in r.metrics for c in archive.candidates() for r in archive.results(c.id, split))


def report_markdown(run: Any, report: Mapping[str, Any]) -> str:
    """The run's final report for people (the engine writes it beside ``report.json`` as
    ``evolve/report.md``): the arms on the untouched split, the score-vs-cost frontier on held-in
    when the suite records model calls per task, each candidate per split, and each step."""
    lines = [f"# Run {run.id}: the final report", ""]
    if report.get("tasks"):
        lines += arms_table(report, "mean score")
    else:  # a run whose untouched split is scored elsewhere (ratchet.workflows.headline): no arms here
        lines += ["No test or held-out task was configured: this run's arms were not scored here.", ""]
    stage = report.get("suite_report")
    if stage:
        lines += [f"{stage['name']}: {stage['summary']}", ""]
    if records_cost(run):
        lines += ["## Score vs cost per task (held-in)", "",
                  ("A candidate is on the frontier when no other scores at least as much at no more model calls "
                   "per task (and better in one of the two)."), "", *frontier_table(run, "heldin", "model_calls"), ""]
    lines += ["## Candidates", "", *candidates_table(run), "", "## Steps", "", *steps_table(run), ""]
    return "\n".join(lines)


def calls_line(run: Any) -> str:
    """What the run paid the model: calls, prompt and completion tokens, latency."""
    calls = run.read_jsonl("llm_calls.jsonl")
    return (f"Model calls paid: {len(calls)}, {sum(c['prompt_tokens'] for c in calls)} prompt + "
            f"{sum(c['completion_tokens'] for c in calls)} completion tokens, "
            f"{sum(c['latency_s'] for c in calls):.0f} s of model latency (a reply already in the bench's cache "
            "counts with the latency it had when first made).")


def steps_table(run: Any) -> list[str]:
    """One row per engine step: its proposer, what the gate decided, its model calls and why."""
    lines = ["| step | proposer | status | model calls | reason |", "|---|---|---|---|---|"]
    for e in step_events(run):
        reason = str(e.get("reason", "")).replace("|", "/").replace("\n", " ")[:400]
        step = "" if e.get("step") is None else e["step"] + 1  # from 1, as the run's progress lines number them
        lines.append(f"| {step} | {e.get('proposer')} | {e.get('status')} | {e.get('model_calls', '')} | {reason} |")
    return lines


def rate_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per split, each task's solve rate over the seeds each candidate ran it at (``solved/runs``),
    the candidates side by side: what a gate on several seeds compares. Empty when no task ran
    at more than one seed (the table of every evaluation says it all then)."""
    if all(n == 1 for n in Counter((r["split"], r["task"], r["candidate"]) for r in rows).values()):
        return []
    return ["## Solve rates per task (over the seeds each candidate ran)", "", *rate_tables(rows)]


def rate_tables(rows: list[dict[str, Any]]) -> list[str]:
    """A ``solved/runs`` table per split of ``rows``, a column per candidate."""
    runs: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        runs.setdefault((r["split"], r["task"], r["candidate"]), []).append(r["score"])
    lines = []
    for split in dict.fromkeys(sorted(key[0] for key in runs)):
        candidates = list(dict.fromkeys(r["candidate"] for r in rows if r["split"] == split))
        tasks = sorted({key[1] for key in runs if key[0] == split})
        lines += [f"{split}:", "", "| task | " + " | ".join(c[:12] for c in candidates) + " |",
                  "|---|" + "---|" * len(candidates)]
        for task in tasks:
            cells = [runs.get((split, task, c)) for c in candidates]
            lines.append(f"| {task} | " + " | ".join("-" if s is None else f"{sum(s):.0f}/{len(s)}" for s in cells) + " |")
        totals = [[x for t in tasks for x in runs.get((split, t, c), [])] for c in candidates]
        lines += ["| **all** | " + " | ".join(f"**{sum(s):.0f}/{len(s)}**" for s in totals) + " |", ""]
    return lines


def post_hoc_lines(measured: list[dict[str, Any]], rows: list[dict[str, Any]], original_id: str) -> list[str]:
    """The post-hoc measurements (the run's ``bench/post_hoc.jsonl``) beside the original's test
    results on the same task and seed (the run's own or measured post hoc too), then every test
    run pooled: each task's solve rate over all the seeds it ran at, and for each candidate the
    same sign-flip test the gate uses on its per-task rate differences with the original."""
    if not measured:
        return []
    test = [r for r in rows if r["split"] == "test"] + [{**r, "split": "test"} for r in measured]
    score = {(r["candidate"], r["task"], r.get("seed", 0)): r["score"] for r in test}
    seeds = sorted({r.get("seed", 0) for r in measured})
    lines = ["## After the run: the test split measured again", "",
             (f"Measured after the run had decided (`--post-hoc`, seed{'s' if len(seeds) > 1 else ''} "
              f"{', '.join(map(str, seeds))}): nothing was selected with these numbers."), "",
             "| candidate | test runs | solved | the original on them | tasks gained | tasks lost |", "|---|---|---|---|---|---|"]
    for cand in dict.fromkeys(r["candidate"] for r in measured if r["candidate"] != original_id):
        mine = {(r["task"], r.get("seed", 0)): r["score"] for r in measured if r["candidate"] == cand}
        theirs = {key: score[(original_id, *key)] for key in mine if (original_id, *key) in score}
        tasks = sorted({task for task, _ in mine})
        diff = {t: sum(v - theirs[k] for k, v in mine.items() if k[0] == t and k in theirs) for t in tasks}
        on = "" if len(theirs) == len(mine) else f" (ran {len(theirs)} of them)"
        lines.append(f"| {cand[:12]} | {len(mine)} | {sum(mine.values()):.0f} | {sum(theirs.values()):.0f}{on} | "
                     f"{', '.join(t for t in tasks if diff[t] > 0) or '-'} | {', '.join(t for t in tasks if diff[t] < 0) or '-'} |")
    if len({(r["task"], r.get("seed", 0)) for r in test}) > len({r["task"] for r in test}):
        lines += ["", "Every test run pooled (the report's and these):", "", *rate_tables(test)]
        lines += pooled_test_lines(test, original_id)
    lines += ["", "| candidate | task | seed | solved | the agent's run |", "|---|---|---|---|---|"]
    lines += [f"| {r['candidate'][:12]} | {r['task']} | {r.get('seed', 0)} | {r['score']:.0f} | {r['agent']} |"
              for r in measured]
    return lines + [""]


def pooled_test_lines(test: list[dict[str, Any]], original_id: str) -> list[str]:
    """Each candidate against the original over the test tasks both ran at the same seeds: the mean
    per-task difference of solve rates and its one-sided sign-flip p-value (the gate's test, from
    :func:`~ratchet.evolve.report.paired_comparison`)."""
    lines = []
    for cand in dict.fromkeys(r["candidate"] for r in test if r["candidate"] != original_id):
        c = paired_comparison(test, cand, original_id)
        if c is not None:
            how = "every sign assignment" if c["exact"] else f"{c['resamples']:,} random flips"
            lines.append(f"{cand[:12]} - original over {c['tasks']} test tasks at the seeds both ran: mean per-task "
                         f"solve-rate difference {c['mean_difference']:+.3f}, better on {c['better']}, worse on "
                         f"{c['worse']}; one-sided sign-flip p = {c['p_value']:.3f} ({how}).")
    return lines
