"""Fit the default judge's classifier on the development feedback sets and write its parameters.

    python scripts/fit_feedback_classifier.py            # -> src/ratchet/online/judge/feedback_classifier.json
    python scripts/fit_feedback_classifier.py --no-encoder --out src/ratchet/online/judge/feedback_classifier_cues.json
    python scripts/fit_feedback_classifier.py --sweep     # grouped CV over cue scales x min_confidence; writes nothing

Reads the people's messages of every set in ``DEV_SETS`` under ``tests/data/feedback/`` (tool
outputs are judged by rules; a set of ``UNTOUCHED_SETS`` is never among them), embeds them with the catalog
encoder (``ratchet models pull all-minilm-l6-v2``), fits the logistic regression of
``ratchet.online.judge.classifier`` and records in the file which sets (their SHA-256) and which
settings produced it. Deterministic: the same sets give the same file.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from ratchet.online.judge.classifier import (
    CUE_SCALE,
    DEV_SETS,
    FIT_SETTINGS,
    PARAMS_PATH,
    UNTOUCHED_SETS,
    cue_bearing,
    features,
    fit,
)
from ratchet.online.judge.cues import cue_matrix
from ratchet.online.judge.scoring import load_feedback

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "feedback"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[DATA / name for name in DEV_SETS],
                        help="the labelled feedback sets to fit on")
    parser.add_argument("--out", type=Path, default=PARAMS_PATH, help="where the parameters go")
    parser.add_argument("--encoder", default="all-minilm-l6-v2", help="catalog name of the sentence encoder")
    parser.add_argument("--no-encoder", action="store_true", help="fit on the lexical cues alone")
    parser.add_argument("--sweep", action="store_true",
                        help="print grouped cross-validation over cue scales x min_confidence instead of fitting")
    args = parser.parse_args()

    untouched = [path.name for path in args.data if path.name in UNTOUCHED_SETS]
    if untouched:
        parser.error(f"{', '.join(untouched)} is measured on once; fitting on it would void that number")
    encoder_name = None if args.no_encoder else args.encoder
    encoder = None
    if encoder_name:
        from ratchet.models.embedding import SentenceEncoder

        encoder = SentenceEncoder.pulled(encoder_name)
    if args.sweep:
        from ratchet.online.judge.comparison import sweep_abstention

        everything = [r for path in args.data for r in load_feedback(path)]
        print("| cue scale | min_confidence | correction recall | praise recall | sign errors (of rows) |\n|---|---|---|---|---|")
        for s in sweep_abstention(encoder, everything, (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8), cue_scales=(3.0, 4.0)):
            print(f"| {s['cue_scale']:g} | {s['min_confidence']:.2f} | {s['correction_recall']:.3f} | "
                  f"{s['praise_recall']:.3f} | {s['sign_errors']:.1f} ({s['sign_error_rate']:.2%} of {len(everything)}) |")
        return
    rows = [r for path in args.data for r in load_feedback(path) if r.source == "user"]
    left_out = 0
    if encoder is None:  # the cues-only fit learns from the messages that carry a cue (cue_bearing says why)
        keep = cue_bearing(cue_matrix([r.next_state for r in rows]))
        left_out = int((~keep).sum())
        rows = [r for r, k in zip(rows, keep) if k]
    x = features(encoder, [r.next_state for r in rows], CUE_SCALE)
    meta = {"data": [path.name for path in args.data],
            "data_sha256": {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in args.data},
            "rows": len(rows), "rows_without_a_cue_left_out": left_out, **FIT_SETTINGS}
    model = fit(x, [r.label for r in rows], epochs=int(FIT_SETTINGS["epochs"]), l2=FIT_SETTINGS["l2"],
                lr=FIT_SETTINGS["lr"], encoder=encoder_name, cue_scale=CUE_SCALE, meta=meta)
    model.save(args.out)
    print(f"fitted on {len(rows)} messages ({x.shape[1]} features) -> {args.out}")


if __name__ == "__main__":
    main()
