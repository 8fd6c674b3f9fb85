"""How relevant the first HumanEval trial's playbook items are to the train problems, by
all-MiniLM-L6-v2: the evidence behind ``ContextConfig.min_relevance`` and the choice of
:func:`ratchet.context.budget.relevance` (mean of the task's cosine with the item's text and with
the task it came from).

Only HumanEval/0-39 (the trial's train split) is read; problems 40-79 (its test split) are not.
The items are the two whose text ``docs/context.md`` records, as far as it quotes them (the third's
text is not in the repository). Their source problems are read from the trial's history, which
grew the playbook from 0 to 1, 2 and 3 items at HumanEval/1, /16 and /21
(``bench/results/context_playbook_humaneval.json``, ``playbook_sizes``); which quoted text came
from which is inferred from the problems: /16 asks for distinct characters "regardless of case",
/1 says "Ignore any spaces".

For each item and each rule (text alone, max, mean) it reports the relevance on the item's own
problem, the median over the other 39, and on how many of the 39 the item would reach each
threshold; and the cosine between two different train problems (what an origin alone measures).
The same for the word relevance of :mod:`ratchet.context.lexical` (what a sandboxed workflow can
compute), the evidence behind its ``MIN_RELEVANCE``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench._results import machine, write_json, write_markdown
from ratchet.context import lexical
from ratchet.context.playbook import origin_text
from ratchet.context.similarity import SentenceEmbedder
from ratchet.evolve.suites.humaneval import package_data_file, read_problems

ITEMS = {"HumanEval/16": "Always convert the input string to lowercase",
         "HumanEval/1": "Always replace spaces with an empty string before processing"}
THRESHOLDS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
LEXICAL_THRESHOLDS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
TRAIN = 40


def measure() -> dict:
    problems = read_problems(package_data_file())[:TRAIN]
    ids = [p["task_id"] for p in problems]
    embedder = SentenceEmbedder()
    # Origins as an item keeps them (one line, cut to ORIGIN_CHARS), so the numbers are the library's.
    prompts = embedder.embed([origin_text(p["prompt"]) for p in problems])
    between = prompts @ prompts.T
    pairs = between[np.triu_indices(TRAIN, 1)]
    out: dict = {"train": ids[0] + ".." + ids[-1], "between_problems": {
        "median": round(float(np.median(pairs)), 3), "p10": round(float(np.percentile(pairs, 10)), 3),
        "p90": round(float(np.percentile(pairs, 90)), 3)}, "items": []}
    for source, text in ITEMS.items():
        k = ids.index(source)
        by_text = prompts @ embedder.embed([text])[0]
        rules = {"text": by_text, "max": np.maximum(by_text, between[k]), "mean": (by_text + between[k]) / 2}
        for rule, scores in rules.items():
            others = np.delete(scores, k)
            other_ids = [i for j, i in enumerate(ids) if j != k]
            top = np.argsort(-others)[:4]
            out["items"].append({"item": text, "source": source, "rule": rule, "at_source": round(float(scores[k]), 3),
                                 "median_others": round(float(np.median(others)), 3),
                                 "others_at_or_above": {str(t): int((others >= t - 1e-9).sum()) for t in THRESHOLDS},
                                 "top_others": [[other_ids[j], round(float(others[j]), 3)] for j in top]})
    out["lexical"] = measure_lexical(problems)
    return out


def measure_lexical(problems: list[dict]) -> dict:
    """The same items and problems by :func:`ratchet.context.lexical.relevance` (text and mean rules)."""
    ids = [p["task_id"] for p in problems]
    prompts = [origin_text(p["prompt"]) for p in problems]
    bags = [lexical.words(p) for p in prompts]
    pairs = np.array([lexical.cosine(bags[i], bags[j]) for i in range(TRAIN) for j in range(i + 1, TRAIN)])
    out: dict = {"min_relevance": lexical.MIN_RELEVANCE, "between_problems": {
        "median": round(float(np.median(pairs)), 3), "p10": round(float(np.percentile(pairs, 10)), 3),
        "p90": round(float(np.percentile(pairs, 90)), 3)}, "items": []}
    for source, text in ITEMS.items():
        k = ids.index(source)
        for rule, origin in (("text", ""), ("mean", prompts[k])):
            scores = np.array([lexical.relevance(p, text, origin) for p in prompts])
            others = np.delete(scores, k)
            other_ids = [i for j, i in enumerate(ids) if j != k]
            top = np.argsort(-others, kind="stable")[:4]
            out["items"].append({"item": text, "source": source, "rule": rule, "at_source": round(float(scores[k]), 3),
                                 "median_others": round(float(np.median(others)), 3),
                                 "others_at_or_above": {str(t): int((others >= t - 1e-9).sum())
                                                        for t in LEXICAL_THRESHOLDS},
                                 "top_others": [[other_ids[j], round(float(others[j]), 3)] for j in top]})
    return out


def _table(rows: list[dict], thresholds: tuple[float, ...]) -> list[str]:
    lines = ["| item (source) | rule | on its source | median, other 39 | other 39 at ≥ "
             + " / ".join(str(t) for t in thresholds) + " | highest others |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        counts = " / ".join(str(row["others_at_or_above"][str(t)]) for t in thresholds)
        top = ", ".join(f"{i} {c}" for i, c in row["top_others"])
        lines.append(f"| {row['item']} ({row['source']}) | {row['rule']} | {row['at_source']} | "
                     f"{row['median_others']} | {counts} | {top} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m bench.context_relevance", description=__doc__.splitlines()[0]).parse_args(argv)
    report = {**measure(), "machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json("context_relevance", report)
    b = report["between_problems"]
    lines = ["# Relevance of the first trial's playbook items to HumanEval/0-39 (all-MiniLM-L6-v2)", "",
             "Produced by `python -m bench.context_relevance` (see its docstring: which items, which problems).", "",
             f"Cosine between two different train problems: median {b['median']}, p10 {b['p10']}, p90 {b['p90']}.", "",
             *_table(report["items"], THRESHOLDS)]
    lx = report["lexical"]
    b = lx["between_problems"]
    lines += ["", f"## By shared words (`ratchet.context.lexical`, MIN_RELEVANCE {lx['min_relevance']})", "",
              "What a sandboxed workflow can compute (no encoder there): cosine of content-word counts, the same "
              "mean rule.", "",
              f"Word cosine between two different train problems: median {b['median']}, p10 {b['p10']}, "
              f"p90 {b['p90']}.", "", *_table(lx["items"], LEXICAL_THRESHOLDS)]
    write_markdown("context_relevance", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
