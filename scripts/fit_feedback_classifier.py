"""Fit the default judge's classifier on the development feedback set and write its parameters.

    python scripts/fit_feedback_classifier.py            # -> src/ratchet/online/judge/feedback_classifier.json
    python scripts/fit_feedback_classifier.py --no-encoder --out /tmp/cues_only.json

Reads the people's messages of ``tests/data/feedback/dev.jsonl`` (tool outputs are judged by rules),
embeds them with the catalog encoder (``ratchet models pull all-minilm-l6-v2``), fits the logistic
regression of ``ratchet.online.judge.classifier`` and records in the file which set (its SHA-256)
and which settings produced it. Deterministic: the same set gives the same file.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from ratchet.online.judge.classifier import CUE_SCALE, FIT_SETTINGS, PARAMS_PATH, features, fit
from ratchet.online.judge.scoring import load_feedback

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "tests" / "data" / "feedback" / "dev.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEV, help="the labelled feedback set to fit on")
    parser.add_argument("--out", type=Path, default=PARAMS_PATH, help="where the parameters go")
    parser.add_argument("--encoder", default="all-minilm-l6-v2", help="catalog name of the sentence encoder")
    parser.add_argument("--no-encoder", action="store_true", help="fit on the lexical cues alone")
    args = parser.parse_args()

    rows = [r for r in load_feedback(args.data) if r.source == "user"]
    encoder_name = None if args.no_encoder else args.encoder
    encoder = None
    if encoder_name:
        from ratchet.models.embedding import SentenceEncoder

        encoder = SentenceEncoder.pulled(encoder_name)
    x = features(encoder, [r.next_state for r in rows], CUE_SCALE)
    meta = {"data": args.data.name, "data_sha256": hashlib.sha256(args.data.read_bytes()).hexdigest(),
            "rows": len(rows), **FIT_SETTINGS}
    model = fit(x, [r.label for r in rows], epochs=int(FIT_SETTINGS["epochs"]), l2=FIT_SETTINGS["l2"],
                lr=FIT_SETTINGS["lr"], encoder=encoder_name, cue_scale=CUE_SCALE, meta=meta)
    model.save(args.out)
    print(f"fitted on {len(rows)} messages ({x.shape[1]} features) -> {args.out}")


if __name__ == "__main__":
    main()
