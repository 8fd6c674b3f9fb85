"""Judges side by side on labelled feedback sets: the library call behind ``bench/online_judge.py``.

A fitted judge is never scored on the rows it was fitted on: on its fitting sets it is scored by
grouped k-fold cross-validation over all of them together (each row judged by a classifier fitted
on the other folds; near-duplicate messages share a fold), on any other set as shipped. Slow judges (a chat model per turn) may be scored on a stratified subset of a set;
the table says how many rows each number rests on.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ratchet.online.judge.classifier import (
    CLASSES,
    CUE_SCALE,
    DEV_SETS,
    FIT_SETTINGS,
    Abstention,
    ClassifierJudge,
    cross_validated_proba,
    cue_bearing,
    features,
    near_duplicate_groups,
)
from ratchet.online.judge.cues import cue_matrix
from ratchet.online.judge.rules import correction_hint
from ratchet.online.judge.scoring import FeedbackRow, Verdicts, run, score
from ratchet.online.judge.tools import RuleToolReader


@dataclass
class Contender:
    """One judge to measure: how to build it as served, and, for a fitted one, how to cross-validate it."""

    name: str
    make: Callable[[], Any]
    cross_validate: Callable[[dict[str, Sequence[FeedbackRow]]], dict[str, Verdicts]] | None = None
    """For a fitted judge: its verdicts on each of its fitting sets by cross-validation over all of them."""
    subset: int | None = None
    """Rows per set (stratified by label) for a slow judge; None judges every row."""
    seconds: Callable[[Sequence[FeedbackRow]], list[float]] | None = None
    """For a judge whose slow part is cached between runs: the seconds each row took when it was
    really computed (the table's time per judgement is that, not the cache's)."""


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


def classifier_cross_validation(encoder: Any, *, abstention: Abstention, folds: int = 5, seed: int = 0,
                                hints: bool = True) -> Callable[[dict[str, Sequence[FeedbackRow]]], dict[str, Verdicts]]:
    """Verdicts of the classifier judge on its fitting sets by grouped ``folds``-fold cross-validation.

    The people's messages of all the sets are pooled (the shipped classifier is fitted on the pool),
    grouped by :func:`near_duplicate_groups` and dealt to folds by group; each set gets back its own
    rows' verdicts. Tool outputs are judged by the rules (nothing is fitted on them); ``encoder``
    None is the cues-only classifier.
    """

    def verdicts(sets: dict[str, Sequence[FeedbackRow]]) -> dict[str, Verdicts]:
        pooled = [(name, i) for name, rows in sets.items() for i, r in enumerate(rows) if r.source == "user"]
        texts = [sets[name][i].next_state for name, i in pooled]
        cues = cue_matrix(texts)
        x = features(encoder, texts, CUE_SCALE, cues)
        width = x.shape[1] - cues.shape[1]
        groups = near_duplicate_groups(texts, x[:, :width] if width else None)
        proba = cross_validated_proba(x, [sets[name][i].label for name, i in pooled], folds=folds, seed=seed,
                                      groups=groups, encoder=getattr(encoder, "name", None), cue_scale=CUE_SCALE,
                                      l2=FIT_SETTINGS["l2"], epochs=int(FIT_SETTINGS["epochs"]), lr=FIT_SETTINGS["lr"],
                                      fit_on=cue_bearing(cues) if encoder is None else None)
        rewards = {name: [RuleToolReader().read(r.next_state, r.reply).vote if r.source == "tool" else 0 for r in rows]
                   for name, rows in sets.items()}
        for (name, i), v in zip(pooled, abstention.verdicts(proba, cues)):
            rewards[name][i] = v
        out = {}
        for name, rows in sets.items():
            hint_list = [correction_hint(r.rendered) if hints and v < 0 else None for r, v in zip(rows, rewards[name])]
            out[name] = Verdicts(rewards[name], hint_list, [])
        return out

    return verdicts


def sweep_abstention(encoder: Any, rows: Sequence[FeedbackRow], thresholds: Sequence[float], *,
                     cue_scales: Sequence[float] = (CUE_SCALE,), seeds: Sequence[int] = (0, 1, 2),
                     folds: int = 5) -> list[dict[str, Any]]:
    """Recall and sign errors of the classifier judge per cue scale and ``min_confidence``, by grouped CV.

    The people's messages of ``rows`` are cross-validated as :func:`classifier_cross_validation` does,
    once per seed (fold assignment), and each threshold's verdicts are counted; tool outputs count
    in the rate's denominator with the tool rules' sign errors. Means over the seeds.
    """
    people = [r for r in rows if r.source == "user"]
    tools = RuleToolReader()
    tool_signs = sum(1 for r in rows if r.source == "tool" and tools.read(r.next_state, r.reply).vote * r.reward == -1)
    texts = [r.next_state for r in people]
    cues = cue_matrix(texts)
    gold = [r.reward for r in people]
    out = []
    for scale in cue_scales:
        x = features(encoder, texts, scale, cues)
        width = x.shape[1] - cues.shape[1]
        groups = near_duplicate_groups(texts, x[:, :width] if width else None)
        probas = [cross_validated_proba(x, [r.label for r in people], folds=folds, seed=seed, groups=groups,
                                        encoder=getattr(encoder, "name", None), cue_scale=scale,
                                        l2=FIT_SETTINGS["l2"], epochs=int(FIT_SETTINGS["epochs"]), lr=FIT_SETTINGS["lr"],
                                        fit_on=cue_bearing(cues) if encoder is None else None)
                  for seed in seeds]
        for threshold in thresholds:
            heard = {-1: 0.0, 1: 0.0}
            signs = 0.0
            for proba in probas:
                votes = Abstention(threshold).verdicts(proba, cues)
                for sign in heard:
                    heard[sign] += sum(1 for g, v in zip(gold, votes) if g == sign and v == sign) / max(1, gold.count(sign))
                signs += sum(1 for g, v in zip(gold, votes) if g * v == -1)
            n = len(probas)
            out.append({"cue_scale": scale, "min_confidence": threshold, "correction_recall": round(heard[-1] / n, 3),
                        "praise_recall": round(heard[1] / n, 3), "sign_errors": round(signs / n + tool_signs, 1),
                        "sign_error_rate": round((signs / n + tool_signs) / len(rows), 4)})
    return out


def measure(contenders: Sequence[Contender], sets: dict[str, Sequence[FeedbackRow]], *,
            fitted_on: Sequence[str] = tuple(name.removesuffix(".jsonl") for name in DEV_SETS),
            progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Scores of every contender on every set, keyed ``judge/set``.

    A contender that can be cross-validated is, on the sets of ``fitted_on`` that are given, scored
    by cross-validation over those sets together (its time per judgement is still the shipped
    judge's); on every other set as shipped.
    """
    results: dict[str, Any] = {}
    for contender in contenders:
        judge = contender.make()
        warm = next(iter(sets.values()))[:1]
        run(judge, warm)  # loads the model or encoder: a server pays that once, not per turn
        used = {name: stratified(rows, contender.subset) for name, rows in sets.items()}
        fitting = {name: rows for name, rows in used.items() if name in fitted_on}
        crossed = contender.cross_validate(fitting) if contender.cross_validate and fitting else {}
        for set_name, rows in used.items():
            progress(f"{contender.name} on {set_name}: {len(rows)} rows")
            timed = run(judge, rows, progress if contender.subset else None)
            method = "as shipped"
            verdicts = timed
            if set_name in crossed:
                verdicts = crossed[set_name]
                verdicts.seconds = timed.seconds  # what judging costs is the shipped judge's time
                method = f"grouped 5-fold cross-validation over {' + '.join(fitting)}"
            if contender.seconds is not None:
                verdicts.seconds = contender.seconds(rows)
            entry = score(rows, verdicts)
            entry.update(judge=contender.name, set=set_name, method=method, of_rows=len(sets[set_name]))
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
        rows += " (CV)" if "cross-validation" in r["method"] else ""
        hints = r["hints"]
        if hints.get("given") == 0:
            hint = "— (no hints)"
        elif hints["f1"] is None:
            hint = "—"
        else:
            hint = f"{hints['f1']:.2f} / {hints['contains']:.2f} ({hints['n']})"
        tool = "—" if c["tool"]["accuracy"] is None else f"{c['tool']['accuracy']:.2f}"
        tool_signs = f", {r['sign_errors_tool']} tool" if r.get("sign_errors_tool") else ""
        lines.append(f"| {r['judge']} | {r['set']} | {rows} | {_pr(c['correction'])} | {_pr(c['praise'])} | "
                     f"{_pr(c['neutral'])} | {tool} | {r['sign_errors']} ({r['sign_error_rate']:.1%}){tool_signs} | {hint} | "
                     f"{r['seconds_mean']:.3f} |")
    return head + "\n".join(lines) + "\n"


def classifier_contender(name: str, *, cues_only: bool, min_confidence: float) -> Contender:
    """The shipped classifier judge (or its cues-only fit) with its cross-validation on the fitting sets."""
    from ratchet.online.judge.classifier import CUES_PARAMS_PATH, PARAMS_PATH, FeedbackClassifier

    params = FeedbackClassifier.load(CUES_PARAMS_PATH if cues_only else PARAMS_PATH)
    encoder = None
    if params.encoder:
        from ratchet.models.embedding import SentenceEncoder

        encoder = SentenceEncoder.pulled(params.encoder)
    abstention = Abstention(min_confidence)
    return Contender(name, lambda: ClassifierJudge(params, encoder=encoder, abstention=abstention),
                     classifier_cross_validation(encoder, abstention=abstention))


def stacked_contender(name: str, cache: Any, *, model: str | None = None) -> Contender:
    """The shipped stacked judge, its label model's readings cached in ``cache`` (a JSON-lines file:
    a reading is made once, then reused by every run), cross-validated on its fitting sets as it was
    fitted: the classifier's out-of-fold probabilities, then grouped CV of the stacker over them. Tool
    outputs are read as the served judge reads them: the rules checked by the label model, whose
    readings are cached beside ``cache`` (``tools-MODEL.jsonl``)."""
    from ratchet.models.embedding import SentenceEncoder
    from ratchet.online.judge.labels import CachedLabelReader, LlamaLabelReader
    from ratchet.online.judge.stacked import (
        StackedJudge,
        Stacker,
        cross_validated_stack,
        out_of_fold_classifier,
    )
    from ratchet.online.judge.tool_outcome import (
        CachedOutcomeReader,
        LlamaOutcomeReader,
        ModelCheckedToolReader,
    )

    stacker = Stacker.load()
    labels = LlamaLabelReader(model or stacker.model)
    reader = CachedLabelReader(labels, cache)
    outcomes = CachedOutcomeReader(LlamaOutcomeReader(labels), Path(cache).with_name(f"tools-{labels.name}.jsonl"))
    tools = ModelCheckedToolReader(RuleToolReader(), outcomes)
    make = lambda: StackedJudge(ClassifierJudge.default(), reader, stacker, tools=tools)

    def verdicts(sets: dict[str, Sequence[FeedbackRow]]) -> dict[str, Verdicts]:
        pooled = [(set_name, i) for set_name, rows in sets.items() for i, r in enumerate(rows) if r.source == "user"]
        people = [sets[set_name][i] for set_name, i in pooled]
        texts, labels = [r.next_state for r in people], [r.label for r in people]
        pc, cues, groups = out_of_fold_classifier(texts, labels, SentenceEncoder.pulled())
        pl = np.array([reader.logprobs(r.reply, r.next_state, r.request) for r in people])
        proba = cross_validated_stack(pc, pl, labels, groups, weighing=stacker.meta.get("weighing", "fitted"))
        abstention = stacker.abstention()
        rewards = {set_name: [tools.read(r.next_state, r.reply).vote if r.source == "tool" else 0 for r in rows]
                   for set_name, rows in sets.items()}
        for (set_name, i), v in zip(pooled, abstention.verdicts(proba, cues)):
            rewards[set_name][i] = v
        return {set_name: Verdicts(rewards[set_name], [correction_hint(r.rendered) if v < 0 else None
                                                       for r, v in zip(rows, rewards[set_name])], [])
                for set_name, rows in sets.items()}

    def seconds(rows: Sequence[FeedbackRow]) -> list[float]:
        # the model's seconds when each reading was made (tool outputs and unread rows cost ~0)
        return [next(iter(reader.seconds([(r.reply, r.next_state, r.request)])), 0.0) if r.source == "user" else 0.0 for r in rows]

    return Contender(name, make, verdicts, seconds=seconds)


__all__ = [
    "CLASSES",
    "Contender",
    "classifier_contender",
    "classifier_cross_validation",
    "measure",
    "stacked_contender",
    "stratified",
    "sweep_abstention",
    "table",
]
