"""How each tool-output reader reads the labelled tool outputs: accuracy, sign errors, abstentions.

Readers (``ratchet.online.judge.tools``): ``words`` (the first reading, one list of error words),
``rules`` (parsed facts before loose words, 0 on disagreement) and ``rules+model``
(``tool_outcome.py``: the rules checked against the stacked judge's label model reading "did this
call succeed"; its readings are cached under ``tests/data/feedback_labels/``). Sets: the tool rows
of the development sets under ``tests/data/feedback/``, ``dev_tools.jsonl`` (written for this reader
before it was) and ``dev_tools2.jsonl`` (written after, scored once before the rules saw it); ``test4``
to ``test6`` (scored once each, read since: test4's and test5's misses named the last rules); by name
only, ``test7`` (written apart from every reader and judge, to be scored once). Results
merge into ``bench/results/tool_reader.{json,md}`` under ``reader/set``.

    python -m bench.tool_reader --readers words rules
    nice -n 10 python -m bench.tool_reader --readers rules+model     # the 1.5B, seconds a row
    python -m bench.tool_reader --readers rules+model@0 rules+model@1 rules+model@4   # margins, from the cache
    python -m bench.tool_reader --readers rules+model-noaffirm   # a fact-less +1 kept without the model
    nice -n 10 python -m bench.tool_reader --readers words rules rules+model --sets test7   # once
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench._results import RESULTS, machine, write_json, write_markdown
from ratchet.online.judge.scoring import load_feedback
from ratchet.online.judge.tools import score_reader

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "feedback"
CACHE = ROOT / "tests" / "data" / "feedback_labels"
NAME = "tool_reader"
#: The line after which the markdown holds notes written by hand, which the bench keeps.
NOTES = "<!-- notes: kept by the bench -->"
#: test2 to test6 were each scored once as a judge's unseen set, development data since.
DEVELOPMENT = ("dev", "dev2", "heldout", "test", "dev3", "test2", "test3", "test4", "test5", "test6", "dev_tools",
               "dev_tools2")
#: The development sets, then the untouched one (scored once, never by default).
SETS = (*DEVELOPMENT, "test7")


_OUTCOME: dict[str, object] = {}


def reader(name: str, model: str):
    """``words``, ``rules``, ``rules+model`` (the shipped margin) or ``rules+model@M`` (margin M); a
    ``-noaffirm`` suffix keeps a fact-less +1 without the model's affirmation (the reader before it)."""
    from ratchet.online.judge import tool_outcome, tools

    if name == "words":
        return tools.WordToolReader()
    if name == "rules":
        return tools.RuleToolReader()
    if name.startswith("rules+model"):
        if model not in _OUTCOME:  # one model and one cache for every margin
            _OUTCOME[model] = tool_outcome.CachedOutcomeReader(tool_outcome.LlamaOutcomeReader(model), CACHE / f"tools-{model}.jsonl")
        base, affirm = name.removesuffix("-noaffirm"), None if name.endswith("-noaffirm") else \
            tool_outcome.ModelCheckedToolReader.AFFIRM
        margin = float(base.split("@", 1)[1]) if "@" in base else tool_outcome.ModelCheckedToolReader.MARGIN
        return tool_outcome.ModelCheckedToolReader(tools.RuleToolReader(), _OUTCOME[model], margin=margin, affirm=affirm)
    sys.exit(f"unknown reader {name!r}; known: words, rules, rules+model, rules+model@MARGIN, rules+model-noaffirm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", nargs="+", default=["words", "rules"])
    parser.add_argument("--sets", nargs="+", default=list(DEVELOPMENT), choices=list(SETS))
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="the label model of rules+model")
    parser.add_argument("--show", action="store_true", help="print each row read with the wrong sign or 0")
    args = parser.parse_args()
    path = RESULTS / f"{NAME}.json"
    results = json.loads(path.read_text())["results"] if path.exists() else {}
    for name in args.readers:
        r = reader(name, args.model)
        for set_name in args.sets:
            rows = [row for row in load_feedback(DATA / f"{set_name}.jsonl") if row.source == "tool"]
            result = score_reader(r, rows)
            results[f"{name}/{set_name}"] = result
            print(f"{name:12s} {set_name:10s} n={result['n']:3d} acc={result['accuracy']:.3f} "
                  f"sign={result['sign_errors']} abstain={result['abstentions']}", flush=True)
            if args.show:
                for row_id, label, vote, text in result["misread"]:
                    print(f"   {row_id} {label} -> {vote:+d}  {text[:110]!r}")
    write_json(NAME, {"machine": machine(), "results": results})
    intro = ("Written by `python -m bench.tool_reader` (see its docstring). Per reader and set: tool rows, accuracy "
             "(verdict equals the label), sign errors (a success read -1 or a failure read +1), abstentions (0: the "
             "turn left out), and the accuracy over the rows not left out.")
    lines = ["# Tool-output readers on the labelled tool outputs", "", intro, "",
             "| reader | set | rows | accuracy | sign errors | abstentions | accuracy when voting |",
             "|---|---|---|---|---|---|---|"]
    for key, res in results.items():
        name, set_name = key.split("/", 1)
        lines.append(f"| {name} | {set_name} | {res['n']} | {res['accuracy']:.3f} | {res['sign_errors']} | "
                     f"{res['abstentions']} | {res['voted_accuracy'] if res['voted_accuracy'] is not None else '-'} |")
    md = RESULTS / f"{NAME}.md"
    kept = md.read_text().split(NOTES, 1)[1] if md.exists() and NOTES in md.read_text() else "\n"
    write_markdown(NAME, "\n".join(lines) + "\n\n" + NOTES + kept)


if __name__ == "__main__":
    main()
