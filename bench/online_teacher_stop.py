"""Does a correction asking for shorter answers teach the student to stop? The trainer before and
after the hinted teacher's reply carried its end (``distill_target=teacher``).

One batch of corrected turns, each the base model's own greedy reply to a training prompt, judged
−1 with the hint "One sentence only, please."; one update per trainer from the same base weights:
``before``, the trainer as it was (its module loaded from git at ``--before-rev``), and ``after``,
this tree's. Measured:

* of the hinted teacher's own replies (greedy, ``teacher_max_tokens``): how many ended, their length;
* ``eos_gain``: the change of the student's log p(end-of-turn | prompt, the teacher's finished
  reply), mean over the finished ones: does the update teach the stop where the teacher stopped?
* held-out: mean greedy reply length (tokens, cut at ``--reply-tokens``) and the share that ended,
  on held-out prompts that never state the preference, before and after the update.

    nice -n 10 python -m bench.online_teacher_stop --model smollm2-135m
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._results import machine, write_json, write_markdown
from ratchet.online.records import Judgement, Sample, Turn
from ratchet.online.simulated_user import HELDOUT_PROMPTS, TRAIN_PROMPTS

HINT = "One sentence only, please."


def _old_trainer_module(rev: str) -> Any:
    """The trainer module as it was at ``rev`` (self-contained before the split)."""
    source = subprocess.run(["git", "show", f"{rev}:src/ratchet/online/trainer.py"], check=True, capture_output=True,
                            text=True, cwd=Path(__file__).resolve().parents[1]).stdout
    path = Path(tempfile.mkdtemp()) / "trainer_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ratchet.online._trainer_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _replies(trainer: Any, prompts: list[list[int]], tokens: int, *, base: bool = False) -> list[Any]:
    return trainer.greedy_replies(prompts, tokens, base=base)


def _chat(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    from ratchet.online.scoring import chat_ids

    return chat_ids(tokenizer, messages)


def run(model: str, train: int, heldout: int, teacher_tokens: int, reply_tokens: int, rev: str) -> dict[str, Any]:
    from ratchet.online import trainer as after_module
    from ratchet.online.weights import load_policy, resolve_gguf

    gguf = resolve_gguf(model)
    settings = {"model": model, "convert_gguf": False, "kl_samples": 0, "num_threads": 1, "batch_size": train,
                "teacher_max_tokens": teacher_tokens, "teacher_length": "fixed"}
    modules = {"before": _old_trainer_module(rev), "after": after_module}
    out: dict[str, Any] = {"model": model, "hint": HINT, "train_prompts": train, "heldout_prompts": heldout,
                           "teacher_max_tokens": teacher_tokens, "reply_tokens": reply_tokens, "before_rev": rev}
    samples: list[Sample] = []
    # Always measured with this tree's generation: the old module has no greedy_replies.
    probe = after_module.Trainer.greedy_replies
    for name, module in modules.items():
        started = time.perf_counter()
        policy, tokenizer, _ = load_policy(gguf)
        trainer = module.Trainer(module.TrainerConfig(**settings), policy, tokenizer)
        plain = [_chat(tokenizer, [{"role": "user", "content": q}]) for q in TRAIN_PROMPTS[:train]]
        hinted = [_chat(tokenizer, [{"role": "user", "content": f"{q}\n\n{HINT}"}]) for q in TRAIN_PROMPTS[:train]]
        held = [_chat(tokenizer, [{"role": "user", "content": q}]) for q in HELDOUT_PROMPTS[:heldout]]
        if not samples:
            served = probe(trainer, plain, reply_tokens)
            logps = trainer.score([p + r.ids for p, r in zip(plain, served, strict=True)], [len(p) for p in plain])
            for i, (q, p, r, lp) in enumerate(zip(TRAIN_PROMPTS, plain, served, logps, strict=False)):
                turn = Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": q}],
                            str(tokenizer.decode(r.ids, skip_special_tokens=True)), p, r.ids,
                            [float(x) for x in lp], 0)
                samples.append(Sample(turn, Judgement(f"t{i}", -1, [-1], HINT, "Too long.", "rule")))
            teacher = probe(trainer, hinted, teacher_tokens, base=True)
            finished = [(p, r) for p, r in zip(plain, teacher, strict=True) if r.stop is not None]
            out["served_len"] = sum(len(r.ids) for r in served) / len(served)
            out["teacher_finished"] = len(finished)
            out["teacher_len"] = sum(len(r.ids) for r in teacher) / len(teacher)
            out["teacher_replies"] = [str(tokenizer.decode(r.ids, skip_special_tokens=True)) for r in teacher]
            out["teacher_ended"] = [r.stop is not None for r in teacher]

        def eos_logprob(trainer: Any = trainer, finished: list = finished) -> float:
            if not finished:
                return float("nan")
            seqs = [p + r.ids + [r.stop] for p, r in finished]
            rows = trainer.score(seqs, [len(s) - 1 for s in seqs])
            return sum(float(row[-1]) for row in rows) / len(rows)

        def heldout_lengths(trainer: Any = trainer, held: list = held) -> tuple[float, float]:
            replies = probe(trainer, held, reply_tokens)
            return sum(len(r.ids) for r in replies) / len(replies), sum(r.stop is not None for r in replies) / len(replies)

        eos0, (len0, ended0) = eos_logprob(), heldout_lengths()
        metrics = trainer.step(samples)
        eos1, (len1, ended1) = eos_logprob(), heldout_lengths()
        out[name] = {"eos_logprob": [eos0, eos1], "eos_gain": eos1 - eos0, "heldout_len": [len0, len1],
                     "heldout_ended": [ended0, ended1], "taught": len(metrics.get("teacher_targets", [])),
                     "unfinished": len(metrics.get("teacher_targets_unfinished", [])),
                     "rl_tokens": metrics.get("rl_tokens"), "seconds": round(time.perf_counter() - started, 1)}
        print(name, out[name], flush=True)
    out["machine"] = machine()
    return out


def markdown(r: dict[str, Any]) -> str:
    rows = "\n".join(
        f"| {name} | {r[name]['taught']} | {r[name]['unfinished']} | {r[name]['rl_tokens']} | "
        f"{r[name]['eos_logprob'][0]:.2f} → {r[name]['eos_logprob'][1]:.2f} ({r[name]['eos_gain']:+.2f}) | "
        f"{r[name]['heldout_len'][0]:.1f} → {r[name]['heldout_len'][1]:.1f} | "
        f"{r[name]['heldout_ended'][0]:.2f} → {r[name]['heldout_ended'][1]:.2f} |"
        for name in ("before", "after"))
    return f"""# A correction asking for shorter answers: is the stop taught? ({r['model']})

`python -m bench.online_teacher_stop --model {r['model']}`: one update on {r['train_prompts']} corrected
turns (the base's own greedy replies, mean {r['served_len']:.1f} tokens, judged −1 with the hint
"{r['hint']}"), from the base weights, by the trainer before (git `{r['before_rev']}`) and after the
hinted teacher's reply carried its end. The hinted teacher (greedy, limit {r['teacher_max_tokens']} tokens)
ended {r['teacher_finished']} of {r['train_prompts']} replies (mean {r['teacher_len']:.1f} tokens).
`eos` is the student's log p(end-of-turn | prompt, the teacher's finished reply), mean over those;
held-out: {r['heldout_prompts']} prompts, greedy, cut at {r['reply_tokens']} tokens. One run, one seed.

| trainer | targets taught | cut, not taught | RL tokens | eos before → after | held-out length | held-out ended |
|---|---|---|---|---|---|---|
{rows}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--train", type=int, default=8)
    parser.add_argument("--heldout", type=int, default=6)
    parser.add_argument("--teacher-tokens", type=int, default=48)
    parser.add_argument("--reply-tokens", type=int, default=96)
    parser.add_argument("--before-rev", default="a7075dc")
    parser.add_argument("--name", default=None, help="results name (default: online_teacher_stop_MODEL)")
    args = parser.parse_args()
    result = run(args.model, args.train, args.heldout, args.teacher_tokens, args.reply_tokens, args.before_rev)
    name = args.name or f"online_teacher_stop_{args.model.replace('.', '_').replace('-', '_')}"
    write_json(name, result)
    write_markdown(name, markdown(result))


if __name__ == "__main__":
    main()
