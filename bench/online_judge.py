"""How well each judge hears natural feedback: precision / recall per class, sign errors, hints, time.

Judges: ``rule`` (keywords), ``classifier`` (the default: embedding + cues, fitted on dev),
``classifier-cues`` (its fallback without the encoder), ``model-1.5b`` and ``model-0.5b`` (the
``ModelJudge`` prompt, one greedy vote, on a stratified subset: a chat model per turn is slow here).
Sets: ``tests/data/feedback/dev.jsonl`` (the fitted judges cross-validated) and the held-out set
(``--heldout``, written apart and never used to develop a judge). Results merge into
``bench/results/online_judge.{json,md}`` under ``judge/set``, so judges and sets can be run apart.

    python -m bench.online_judge --judges rule classifier classifier-cues
    nice -n 10 python -m bench.online_judge --judges model-1.5b --model-subset 40 --sets dev
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench._results import RESULTS, machine, write_json, write_markdown
from ratchet.online.judge import ModelJudge, RuleJudge
from ratchet.online.judge.comparison import Contender, classifier_contender, measure, table
from ratchet.online.judge.scoring import load_feedback

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "feedback"
NAME = "online_judge"


def _model_judge(model: str):
    def make():
        from ratchet.models import load_model

        return ModelJudge(load_model(f"local:{model}", n_threads=1), votes=1, temperature=0.0, hints=False)
    return make


def contenders(names: list[str], subset: int, min_confidence: float) -> list[Contender]:
    table_of = {
        "rule": lambda: Contender("rule", lambda: RuleJudge(hints=True)),
        "classifier": lambda: classifier_contender("classifier", cues_only=False, min_confidence=min_confidence),
        "classifier-cues": lambda: classifier_contender("classifier-cues", cues_only=True,
                                                        min_confidence=min_confidence),
        "model-1.5b": lambda: Contender("model-1.5b", _model_judge("qwen2.5-coder-1.5b"), subset=subset),
        "model-0.5b": lambda: Contender("model-0.5b", _model_judge("qwen2.5-coder-0.5b"), subset=subset),
    }
    unknown = [n for n in names if n not in table_of]
    if unknown:
        sys.exit(f"unknown judge(s) {unknown}; known: {', '.join(table_of)}")
    return [table_of[n]() for n in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", nargs="+", default=["rule", "classifier", "classifier-cues"])
    parser.add_argument("--sets", nargs="+", default=["dev", "heldout"], choices=["dev", "heldout"])
    parser.add_argument("--dev", type=Path, default=DATA / "dev.jsonl")
    parser.add_argument("--heldout", type=Path, default=DATA / "heldout.jsonl")
    parser.add_argument("--model-subset", type=int, default=40, help="rows per set for the chat-model judges")
    parser.add_argument("--min-confidence", type=float, default=0.6, help="the classifier judge's min_confidence")
    args = parser.parse_args()

    sets = {name: load_feedback(getattr(args, name)) for name in args.sets}
    results = measure(contenders(args.judges, args.model_subset, args.min_confidence), sets,
                      progress=lambda line: print(line, file=sys.stderr, flush=True))
    path = RESULTS / f"{NAME}.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    merged = {**previous.get("results", {}), **results}
    data = {"machine": machine(load=os.getloadavg()), "results": merged}
    write_json(NAME, data)
    write_markdown(NAME, "# Judges on labelled feedback\n\n" + table(merged))
    print(table(merged))


if __name__ == "__main__":
    main()
