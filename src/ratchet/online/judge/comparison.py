"""Judges side by side on labelled feedback sets: the library call behind ``bench/online_judge.py``.

A fitted judge is never scored on the rows it was fitted on: on its own fitting set it is scored by
k-fold cross-validation (each row judged by a classifier fitted on the other folds), on any other
set as shipped. Slow judges (a chat model per turn) may be scored on a stratified subset of a set;
the table says how many rows each number rests on.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ratchet.online.judge.classifier import (
    CLASSES,
    CUE_SCALE,
    FIT_SETTINGS,
    ClassifierJudge,
    cross_validated_proba,
    features,
    verdict,
)
from ratchet.online.judge.rules import correction_hint, tool_vote
from ratchet.online.judge.scoring import FeedbackRow, Verdicts, run, score


@dataclass
class Contender:
    """One judge to measure: how to build it as served, and, for a fitted one, how to cross-validate it."""

    name: str
    make: Callable[[], Any]
    cross_validate: Callable[[Sequence[FeedbackRow]], Verdicts] | None = None
    """For a judge fitted on ``fitted_on``: its verdicts on that set by cross-validation."""
    subset: int | None = None
    """Rows per set (stratified by label) for a slow judge; None judges every row."""


def stratified(rows: Sequence[FeedbackRow], n: int | None, seed: int = 0) -> list[FeedbackRow]:
    """``n`` rows keeping the labels' shares (every label at least once), in the set's order."""
    if n is None or n >= len(rows):
        return list(rows)
    by_label: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_label.setdefault(row.label, []).append(i)
    rng = random.Random(seed)
    chosen: list[int] = []
    for indices in by_label.values():
        take = max(1, round(n * len(indices) / len(rows)))
        chosen += rng.sample(indices, min(take, len(indices)))
    return [rows[i] for i in sorted(chosen)]


def classifier_cross_validation(encoder: Any, *, min_confidence: float, folds: int = 5, seed: int = 0,
                                hints: bool = True) -> Callable[[Sequence[FeedbackRow]], Verdicts]:
    """Verdicts of the classifier judge on a set by ``folds``-fold cross-validation over its people's messages.

    Tool outputs are judged by the rules (nothing is fitted on them); ``encoder`` None is the
    cues-only classifier.
    """

    def verdicts(rows: Sequence[FeedbackRow]) -> Verdicts:
        people = [i for i, r in enumerate(rows) if r.source == "user"]
        x = features(encoder, [rows[i].next_state for i in people], CUE_SCALE)
        proba = cross_validated_proba(x, [rows[i].label for i in people], folds=folds, seed=seed,
                                      encoder=getattr(encoder, "name", None), cue_scale=CUE_SCALE,
                                      l2=FIT_SETTINGS["l2"], epochs=int(FIT_SETTINGS["epochs"]), lr=FIT_SETTINGS["lr"])
        rewards = [tool_vote(r.next_state) if r.source == "tool" else 0 for r in rows]
        for i, p in zip(people, proba):
            rewards[i] = verdict(p, min_confidence)
        hint_list = [correction_hint(r.rendered) if hints and v < 0 else None for r, v in zip(rows, rewards)]
        return Verdicts(rewards, hint_list, [])

    return verdicts


def measure(contenders: Sequence[Contender], sets: dict[str, Sequence[FeedbackRow]], *,
            fitted_on: str = "dev", progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Scores of every contender on every set, keyed ``judge/set``."""
    results: dict[str, Any] = {}
    for contender in contenders:
        judge = contender.make()
        warm = next(iter(sets.values()))[:1]
        run(judge, warm)  # loads the model or encoder: a server pays that once, not per turn
        for set_name, rows in sets.items():
            used = stratified(rows, contender.subset)
            progress(f"{contender.name} on {set_name}: {len(used)} rows")
            timed = run(judge, used, progress if contender.subset else None)
            method = "as shipped"
            verdicts = timed
            if set_name == fitted_on and contender.cross_validate is not None:
                verdicts = contender.cross_validate(used)
                verdicts.seconds = timed.seconds  # what judging costs is the shipped judge's time
                method = "5-fold cross-validation"
            entry = score(used, verdicts)
            entry.update(judge=contender.name, set=set_name, method=method, of_rows=len(rows))
            results[f"{contender.name}/{set_name}"] = entry
    return results


def _pr(cls: dict[str, Any]) -> str:
    fmt = (lambda v: "—" if v is None else f"{v:.2f}")
    return f"{fmt(cls['precision'])} / {fmt(cls['recall'])}"


def table(results: dict[str, Any]) -> str:
    """The markdown table of :func:`measure`'s results, one row per judge and set."""
    head = ("| judge | set | rows | correction P / R | praise P / R | neutral P / R | tool acc | sign errors | "
            "hint F1 / contains (n) | s / judgement |\n|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for key in sorted(results, key=lambda k: (results[k]["set"], k)):
        r = results[key]
        c = r["classes"]
        rows = f"{r['rows']}" + (f" of {r['of_rows']}" if r["rows"] != r["of_rows"] else "")
        rows += " (CV)" if r["method"].endswith("cross-validation") else ""
        hints = r["hints"]
        if hints.get("given") == 0:
            hint = "— (no hints)"
        elif hints["f1"] is None:
            hint = "—"
        else:
            hint = f"{hints['f1']:.2f} / {hints['contains']:.2f} ({hints['n']})"
        tool = "—" if c["tool"]["accuracy"] is None else f"{c['tool']['accuracy']:.2f}"
        lines.append(f"| {r['judge']} | {r['set']} | {rows} | {_pr(c['correction'])} | {_pr(c['praise'])} | "
                     f"{_pr(c['neutral'])} | {tool} | {r['sign_errors']} ({r['sign_error_rate']:.1%}) | {hint} | "
                     f"{r['seconds_mean']:.3f} |")
    return head + "\n".join(lines) + "\n"


def classifier_contender(name: str, *, cues_only: bool, min_confidence: float) -> Contender:
    """The shipped classifier judge (or its cues-only fit) with its cross-validation on dev."""
    from ratchet.online.judge.classifier import CUES_PARAMS_PATH, PARAMS_PATH, FeedbackClassifier

    params = FeedbackClassifier.load(CUES_PARAMS_PATH if cues_only else PARAMS_PATH)
    encoder = None
    if params.encoder:
        from ratchet.models.embedding import SentenceEncoder

        encoder = SentenceEncoder.pulled(params.encoder)
    return Contender(name, lambda: ClassifierJudge(params, encoder=encoder, min_confidence=min_confidence),
                     classifier_cross_validation(encoder, min_confidence=min_confidence))


__all__ = ["CLASSES", "Contender", "classifier_contender", "classifier_cross_validation", "measure", "stratified",
           "table"]
