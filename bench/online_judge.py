"""How well each judge hears natural feedback: precision / recall per class, sign errors, hints, time.

Judges: ``rule`` (keywords), ``classifier`` (the default: embedding + cues, fitted on the
development sets), ``classifier-cues`` (its fallback without the encoder), ``model-1.5b`` and
``model-0.5b`` (the ``ModelJudge`` prompt, one greedy vote, on a stratified subset: a chat model per
turn is slow here). Sets under ``tests/data/feedback/``: the development sets ``dev``, ``dev2``,
``heldout``, ``test``, ``dev3``, ``test2``, ``test3``, ``dev4``, ``test4``, ``test5`` and ``test6`` (the
classifier is fitted on all of them, so there it is scored by grouped cross-validation over them together;
``test2`` to ``test6`` were each scored once as a judge's unseen set before they joined) and the tool
outputs of ``dev_tools`` and ``dev_tools2``; ``test7``, written apart, is the next judge's unseen set.
``stacked`` (the classifier weighed with the 1.5B's label reading) reuses the readings cached under ``tests/data/feedback_labels/``. Results merge into
``bench/results/online_judge.{json,md}`` under ``judge/set``, so judges and sets can be run apart;
the markdown's notes below its ``NOTES`` marker are kept as they are.

    python -m bench.online_judge --judges rule classifier classifier-cues
    python -m bench.online_judge --judges rule classifier classifier-cues --sets test2   # once, at the end
    nice -n 10 python -m bench.online_judge --judges stacked classifier   # CV on the development sets
    nice -n 10 python -m bench.online_judge --judges stacked classifier rule --sets test7   # once
    nice -n 10 python -m bench.online_judge --judges model-1.5b --model-subset 40 --sets dev
    python -m bench.online_judge --judges --cost    # the 0.5B's speed alone and beside a 1.5B judge
    python -m bench.online_judge --judges --cost stacked   # ... beside the stacked judge's 1.5B reading
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench._results import RESULTS, machine, write_json, write_markdown
from ratchet.online.judge import ModelJudge, RuleJudge
from ratchet.online.judge.comparison import Contender, classifier_contender, measure, stacked_contender, table
from ratchet.online.judge.scoring import load_feedback

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "feedback"
NAME = "online_judge"
#: The label model's readings of the sets' messages, made once (seconds each) and reused.
LABELS = ROOT / "tests" / "data" / "feedback_labels"
#: The feedback sets the bench knows: the development sets, then the set measured once.
SETS = ("dev", "dev2", "heldout", "test", "dev3", "test2", "test3", "dev4", "test4", "test5", "test6", "dev_tools",
        "dev_tools2", "test7")
#: test2 to test6 were each scored once, then became development data
#: (tests/data/feedback/README.md); dev_tools and dev_tools2 hold tool outputs only (nothing is fitted
#: on them: scored as shipped).
DEVELOPMENT = ("dev", "dev2", "heldout", "test", "dev3", "test2", "test3", "dev4", "test4", "test5", "test6",
               "dev_tools", "dev_tools2")
#: The line after which the markdown holds notes written by hand, which the bench keeps.
NOTES = "<!-- notes: kept by the bench -->"


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
        "stacked": lambda: stacked_contender("stacked", LABELS / "qwen2.5-coder-1.5b.jsonl"),
    }
    unknown = [n for n in names if n not in table_of]
    if unknown:
        sys.exit(f"unknown judge(s) {unknown}; known: {', '.join(table_of)}")
    return [table_of[n]() for n in names]


#: A 1.5B judge judging the dev set over and over in its own process (one thread, as serve runs it):
#: ``model``, the ModelJudge generating its verdict; ``stacked``, the stacked judge's one-evaluation reading.
_JUDGE_PROCESS = """
import sys
from ratchet.online.judge.scoring import load_feedback
rows = [r for r in load_feedback(sys.argv[1]) if r.source == "user"]
if sys.argv[2] == "stacked":
    from ratchet.online.judge.stacked import StackedJudge
    judge = StackedJudge.default()
else:
    from ratchet.models import load_model
    from ratchet.online.judge import ModelJudge
    judge = ModelJudge(load_model("local:qwen2.5-coder-1.5b", n_threads=1), votes=1, temperature=0.0, hints=False)
judge.judge(rows[0].turn(), rows[0].rendered)
print("ready", flush=True)
while True:
    for row in rows:
        judge.judge(row.turn(), row.rendered)
        print("judged", flush=True)
"""
PREAMBLE = """# Judges on labelled feedback

Written by `python -m bench.online_judge` (see its docstring). Per judge and set: precision / recall
of a person's corrections (-1), praise (+1) and neutral messages (0); accuracy on tool outputs; sign
errors (a -1 row judged +1 or a +1 row judged -1, over all rows); hint agreement on the corrections
with a labelled hint that the judge heard (word-overlap F1 / share holding every labelled word);
mean seconds per judgement on this machine (2 cores shared with other work: see the load in the
JSON). `model-*` is the `ModelJudge` prompt, one greedy vote, on a stratified subset ("n of N").

`classifier` is the classifier judge (`auto`'s fallback), `classifier-cues` its fallback without the
encoder, both fitted on dev + dev2 + heldout + test + dev3 + test2 + test3 + dev4 + test4 + test5 +
test6 (2,474 people's messages; 940 before test2, test3 and dev4 joined, 1,604 before test4 and test5,
2,184 before test6); on
those sets they are scored by grouped 5-fold cross-validation over all of them together (CV:
near-duplicate messages share a fold). Their cues and settings were refined on those
cross-validation errors, so the CV rows flatter them; rows of a set scored once, before it was read
(earlier `test2` to `test6`; next `test7`), are the ones to believe. `-fit1` rows are the first fit (dev alone),
`-fit2` rows the second (dev + dev2 + heldout; its `test` rows were that fit's one unseen score),
`classifier-fit3`, `classifier-cues-fit3` and `stacked-fit1` the judges before test2, test3 and dev4
joined the fit, on the sets each was scored on once (test2, test3, test4), as measured then;
`classifier-fit4` and `stacked-fit2` the judges before test4 and test5 joined, on those two sets (scored
once each, before they were read); `classifier-fit5` and `stacked-fit3` the judges before test6 joined
(and, for the stacked one, before its label model read the request and worked examples), on test6
(scored once) and on test7 (scored after the judge that replaced them, as its baseline). Sign errors count tool outputs too ("k tool": how many of them were tool outputs,
read by the rules every judge shares).

"""
PROMPTS = ["Write a Python function that checks whether a string is a palindrome.",
           "Explain what a hash map is in two sentences.", "How do I undo the last git commit?"]


def serving_cost(dev: Path, kind: str = "model", tokens: int = 48) -> dict:
    """Tokens/s of the served 0.5B (one thread, greedy) alone, then while a 1.5B judge of ``kind`` runs beside it."""
    from ratchet.models import load_model

    served = load_model("local:qwen2.5-coder-0.5b", n_threads=1)

    def speed() -> float:
        made, start = 0, time.perf_counter()
        for prompt in PROMPTS:
            made += served.complete([{"role": "user", "content": prompt}], temperature=0.0,
                                    max_tokens=tokens).usage.completion_tokens
        return made / (time.perf_counter() - start)

    speed()
    alone = speed()
    judge = subprocess.Popen([sys.executable, "-c", _JUDGE_PROCESS, str(dev), kind], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        assert judge.stdout is not None
        while judge.stdout.readline().strip() != "ready":
            if judge.poll() is not None:
                raise RuntimeError("the 1.5B judge process exited before it was ready")
        os.set_blocking(judge.stdout.fileno(), False)
        start = time.perf_counter()
        beside = speed()
        elapsed = time.perf_counter() - start
        judged = (judge.stdout.read() or "").count("judged")
    finally:
        judge.terminate()
        judge.wait(30)
    return {"served_tok_s_alone": round(alone, 2), "served_tok_s_beside_1_5b_judge": round(beside, 2),
            "slowdown": round(alone / beside, 2) if beside else None, "judge_turns_meanwhile": judged,
            "window_s": round(elapsed, 1), "load": os.getloadavg(), "judge": kind}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", nargs="*", default=["rule", "classifier", "classifier-cues"])
    parser.add_argument("--cost", choices=("model", "stacked"), nargs="?", const="model", default=None,
                        help="measure the served 0.5B's speed beside a 1.5B judge: the generating model judge "
                             "(default) or the stacked judge's reading")
    parser.add_argument("--sets", nargs="+", default=list(DEVELOPMENT), choices=list(SETS))
    for name in SETS:
        parser.add_argument(f"--{name}", type=Path, default=DATA / f"{name}.jsonl", help=f"path of the {name} set")
    parser.add_argument("--model-subset", type=int, default=40, help="rows per set for the chat-model judges")
    parser.add_argument("--min-confidence", type=float, default=0.6, help="the classifier judge's min_confidence")
    args = parser.parse_args()

    missing = [name for name in args.sets if not getattr(args, name).exists()]
    for name in missing:
        print(f"no {name} set at {getattr(args, name)}: skipping it (pass --{name} PATH)", file=sys.stderr)
    sets = {name: load_feedback(getattr(args, name)) for name in args.sets if name not in missing}
    results = measure(contenders(args.judges, args.model_subset, args.min_confidence), sets,
                      progress=lambda line: print(line, file=sys.stderr, flush=True))
    for entry in results.values():  # the machine is shared: each entry keeps the load it was timed under
        entry["load"] = [round(x, 1) for x in os.getloadavg()]
    path = RESULTS / f"{NAME}.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    data = {"machine": machine(load=os.getloadavg()), "results": {**previous.get("results", {}), **results},
            "sets": {**previous.get("sets", {}), **{name: {"rows": len(sets[name]), "sha256": hashlib.sha256(
                getattr(args, name).read_bytes()).hexdigest()} for name in sets}},
            "cost": serving_cost(args.dev) if args.cost == "model" else previous.get("cost"),
            "cost_stacked": serving_cost(args.dev, "stacked") if args.cost == "stacked" else previous.get("cost_stacked")}
    write_json(NAME, data)
    text = PREAMBLE + table(data["results"])
    if data["cost"]:
        c = data["cost"]
        text += (f"\nThe served 0.5B (one thread, greedy): {c['served_tok_s_alone']} tok/s alone, "
                 f"{c['served_tok_s_beside_1_5b_judge']} tok/s while a 1.5B judge runs beside it "
                 f"({c['slowdown']}x slower; the judge did {c['judge_turns_meanwhile']} turns in {c['window_s']} s; "
                 f"load {', '.join(f'{x:.1f}' for x in c['load'])}).\n")
    if data.get("cost_stacked"):
        c = data["cost_stacked"]
        text += (f"\nBeside the stacked judge's 1.5B reading instead: {c['served_tok_s_alone']} tok/s alone, "
                 f"{c['served_tok_s_beside_1_5b_judge']} tok/s beside it ({c['slowdown']}x slower; it judged "
                 f"{c['judge_turns_meanwhile']} messages in {c['window_s']} s; load "
                 f"{', '.join(f'{x:.1f}' for x in c['load'])}).\n")
    previous_md = RESULTS / f"{NAME}.md"
    if previous_md.exists() and NOTES in previous_md.read_text():
        text += "\n" + NOTES + previous_md.read_text().split(NOTES, 1)[1]
    write_markdown(NAME, text)
    print(text)


if __name__ == "__main__":
    main()
