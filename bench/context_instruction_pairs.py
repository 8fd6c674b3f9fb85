"""Can the encoder tell a user's change of mind from a second preference? (``docs/context.md``,
"Learning while serving".)

Served playbooks file each stated instruction as an item, folded into an earlier one only above
``dedup_threshold`` (0.85, all-MiniLM-L6-v2 cosine). A lower threshold would fold a later
instruction that *replaces* an earlier one ("answer in German" -> "answer in English again") only
if every pair of instructions that must both stay ("call me Sam" / "end with 'Cheers, Sam'") scored
below every replacing pair. Twenty hand-written pairs, ten of each kind (written for this check,
not drawn from the personalization bench's simulated users); the table gives each kind's cosine
range and the best single threshold's errors. Seconds on one thread; needs
``ratchet models pull all-minilm-l6-v2``.
"""

from __future__ import annotations

import argparse
import sys

from bench._results import machine, write_json, write_markdown

#: (earlier instruction, later one that replaces it)
REPLACING = [
    ("Keep your answers short.", "Even shorter, one line max."),
    ("Please answer in German.", "Actually, answer in English again."),
    ("Use bullet points.", "No more bullet points, plain prose please."),
    ("Call me Sam.", "My name is Samantha, not Sam."),
    ("End with 'Cheers'.", "Stop signing off with Cheers."),
    ("Give me the code only.", "Explain the code a bit too."),
    ("Use metric units.", "Use imperial units instead."),
    ("Be more formal.", "You can be casual with me."),
    ("Answer in one sentence.", "Two or three sentences is fine."),
    ("Use Python for examples.", "Show examples in Rust from now on."),
]
#: (one instruction, another that must stay beside it)
BOTH_STAY = [
    ("Keep your answers short.", "Call me Sam."),
    ("Please answer in German.", "Use bullet points."),
    ("Call me Sam.", "End with 'Cheers'."),
    ("End with 'Cheers, Sam'.", "Call me Sam."),
    ("Use metric units.", "Answer in one sentence."),
    ("Give me the code only.", "Use Python for examples."),
    ("Be more formal.", "Please answer in German."),
    ("Use bullet points.", "Answer in one sentence."),
    ("Number the steps.", "Use bullet points."),
    ("Keep your answers short.", "Give me the code only."),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.context_instruction_pairs", description=__doc__)
    parser.add_argument("--encoder", default="all-minilm-l6-v2")
    args = parser.parse_args(argv)
    from ratchet.context.similarity import SentenceEmbedder

    embedder = SentenceEmbedder(args.encoder).load()  # unit-length rows: a dot product is the cosine
    score = {kind: [round(float(embedder.embed([a])[0] @ embedder.embed([b])[0]), 3) for a, b in pairs]
             for kind, pairs in (("replacing", REPLACING), ("both_stay", BOTH_STAY))}
    # folding at t: a replacing pair at or above t is folded (right), a both-stay pair at or above t is lost (wrong)
    errors = {t: sum(s < t for s in score["replacing"]) + sum(s >= t for s in score["both_stay"])
              for t in sorted(set(score["replacing"] + score["both_stay"]))}
    best = min(errors, key=lambda t: (errors[t], t))
    write_json("context_instruction_pairs", {"encoder": args.encoder, "cosine": score, "best_threshold": best,
                                             "best_errors": errors[best], "machine": machine()})
    lines = ["# Change of mind or a second preference, by the encoder's cosine", "",
             f"`python -m bench.context_instruction_pairs` ({args.encoder}; its docstring). 10 pairs of each kind.", "",
             "| pairs | min | max |", "|---|---|---|"]
    lines += [f"| {kind.replace('_', ' ')} | {min(s):.2f} | {max(s):.2f} |" for kind, s in score.items()]
    lines += ["", f"Best single threshold {best:.2f}: {errors[best]} of 20 pairs on the wrong side "
              f"(a replacing pair kept beside the old one, or a pair that must stay folded into one)."]
    write_markdown("context_instruction_pairs", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
