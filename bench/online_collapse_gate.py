"""The old settings' collapse, and the promotion gate refusing it (old margin rule vs the new checks).

Reproduces the collapse of the former defaults' learning rate 2e-3 (sampled-token signals only, no
top-k distillation, no KL penalty) on the 0.5B: the simulated greeting user's conversations (the
base model's replies, corrected with the preference as the hint, plus the re-asked replies it
praised) are trained on for several updates. After every update both gates judge the weights:

* the old rule: the held-out margin ``log p(preferred) − log p(dispreferred)`` not below the
  current version's by more than the tolerance;
* the new gate (``online/evaluation.py``): the same margin AND the preferred replies' per-token
  floor AND the guard AND KL to base.

The held-out cases are the personalization bench's gate cases. Greedy replies of the last version
(served through llama.cpp with the converted LoRA) show what the collapse looks like. Writes
``bench/results/online_collapse_gate.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench._results import write_json, write_markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.online_collapse_gate", description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    from ratchet.models.registry import model_path
    from ratchet.online.evaluation import EvaluationHook, GateConfig, GuardCase, HeldOutCase
    from ratchet.online.judge import RuleJudge
    from ratchet.online.lora_gguf import convert_adapter
    from ratchet.online.llama_policy import LlamaPolicy
    from ratchet.online.records import Sample, Turn
    from ratchet.online.simulated_user import GUARD_TASKS, HELDOUT_PROMPTS, TRAIN_PROMPTS, Greeting, SimulatedUser
    from ratchet.online.trainer import Trainer, TrainerConfig

    started = time.perf_counter()
    gguf = model_path(args.model)
    pref, judge = Greeting(), RuleJudge(hint_style="followup")  # the old settings: the whole correction
    user = SimulatedUser(pref)
    policy = LlamaPolicy(gguf, n_ctx=1024, n_threads=args.threads)
    samples = []
    for i, q in enumerate(TRAIN_PROMPTS[:8]):
        messages = [{"role": "user", "content": q}]
        for attempt in range(2):
            g = policy.generate(messages, max_tokens=40, temperature=0.8, seed=1000 + i + attempt)
            turn = Turn(f"c{i}-{attempt}", f"c{i}", False, "main", list(messages), g.text, g.prompt_token_ids,
                        g.token_ids, g.logprobs, 0)
            ok = pref.check(g.text)
            samples.append(Sample(turn, judge.judge(turn, user.praise if ok else user.correction())))
            messages += [{"role": "assistant", "content": g.text},
                         {"role": "user", "content": user.praise if ok else user.correction()}]
            if ok:
                break
    gate_replies = {q: policy.generate([{"role": "user", "content": q}], max_tokens=40).text
                    for q in TRAIN_PROMPTS[-6:]}
    guard_refs = {q: policy.generate([{"role": "user", "content": q}], max_tokens=24).text for q, _ in GUARD_TASKS[:6]}
    base_heldout = {q: policy.generate([{"role": "user", "content": q}], max_tokens=24).text for q in HELDOUT_PROMPTS[:6]}
    policy.close()
    cases = [HeldOutCase([{"role": "user", "content": q}], pref.example + r, r) for q, r in gate_replies.items()]
    guard = [GuardCase([{"role": "user", "content": q}], r) for q, r in guard_refs.items()]
    old_gate = EvaluationHook(cases, tolerance=0.5)
    new_gate = EvaluationHook(cases, tolerance=0.5, guard=guard, gate=GateConfig())

    config = TrainerConfig(model=str(gguf), num_threads=args.threads, signal="combine",
                           learning_rate=args.learning_rate, opd_topk=0, kl_coef=0.0, batch_size=len(samples))
    trainer = Trainer.from_config(config)
    current = old_gate.score(trainer)
    rows = []
    for update in range(1, args.updates + 1):
        metrics = trainer.step(samples)
        verdict = new_gate.evaluate(trainer, current)
        old_promote = verdict["score"] >= current - old_gate.tolerance
        rows.append({"update": update, "margin": verdict["score"], "current_margin": current,
                     "old_rule_promotes": old_promote, "new_gate_promotes": verdict["promote"],
                     "failed": verdict["failed"], "checks": verdict["checks"], "loss": metrics["loss"]})
        print(json.dumps({k: rows[-1][k] for k in ("update", "margin", "old_rule_promotes", "new_gate_promotes",
                                                    "failed")}), flush=True)
        if old_promote:
            current = verdict["score"]  # the old rule would have served it: it becomes the current one
    with tempfile.TemporaryDirectory() as tmp:
        adapter = trainer.save_adapter(Path(tmp) / "adapter")
        lora = convert_adapter(adapter, gguf, Path(tmp) / "adapter.gguf")
        policy = LlamaPolicy(gguf, lora_path=lora, n_ctx=1024, n_threads=args.threads)
        after = {q: policy.generate([{"role": "user", "content": q}], max_tokens=24).text for q in base_heldout}
        policy.close()
    result = {"model": args.model, "learning_rate": args.learning_rate, "samples": len(samples),
              "rewards": [s.judgement.reward for s in samples], "updates": rows,
              "heldout_base": base_heldout, "heldout_last": after, "wall_s": round(time.perf_counter() - started, 1)}
    write_json("online_collapse_gate", result, indent=1, default=float)
    lines = ["# The old settings' collapse and the promotion gate (bench/online_collapse_gate.py)", "",
             f"{args.model}, lr {args.learning_rate}, sampled-token signals only (no top-k distillation, no KL "
             f"penalty), {len(samples)} samples of the simulated greeting user, {args.updates} updates.", "",
             "| update | margin | old rule | new gate | failed checks | KL to base | preferred per-token (floor) | "
             "guard change (band) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["checks"]
        lines.append(f"| {r['update']} | {r['margin']:+.2f} | {'serve' if r['old_rule_promotes'] else 'refuse'} | "
                     f"{'serve' if r['new_gate_promotes'] else 'refuse'} | {', '.join(r['failed']) or '—'} | "
                     f"{c['kl']['value']:.2f} | {c['preferred_floor']['value']:.2f} ({c['preferred_floor']['limit']:.2f}) | "
                     f"{c['guard']['change']:+.2f} (±{c['guard']['band']:.2f}) |")
    lines += ["", "Greedy held-out replies, base → last update (served through llama.cpp + the converted LoRA):", ""]
    lines += [f"- {base_heldout[q][:60]!r} → {after[q][:60]!r}" for q in base_heldout]
    write_markdown("online_collapse_gate", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
