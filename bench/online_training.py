"""Online training speed: tokens/s through Ratchet's trainer step vs a bare peft step (target >= 0.9).

Both sides train the SAME peft LoRA model (same weights, rank, target modules, threads) on the SAME
batch of sequences (real chat-template prompts + replies from the model's tokenizer):

* bare: one padded forward with labels on the reply tokens (cross-entropy), backward, gradient
  clipping, Adam step: the least a LoRA training step can do;
* ratchet: ``Trainer.step`` on the same sequences as judged samples (Binary RL signal): filtering,
  staleness check, importance weights against the recorded serving log-probs, the clipped PPO
  objective, backward, clipping, Adam step, and its metrics. Ratchet projects only reply positions
  onto the vocabulary (the bare step, like any causal-LM loss call, projects all of them).

Tokens/s counts every sequence token (prompt + reply) over the wall time of the call. One warm-up
step each is not counted; the sides alternate order each round; the headline ratio is the median
of per-round ratios (the machine is shared and its load drifts between rounds). A
second ratio times the combined signal (Binary RL + hindsight-hint distillation), which adds one
no-grad teacher forward per hinted sample: reported, not part of the target.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

from bench._results import write_json, write_markdown
QUESTIONS = [
    "What is a Python list?", "How do I reverse a string in Python?", "What does git commit do?",
    "What is a for loop?", "What is JSON?", "How do I read a file in Python?", "What is recursion?",
    "What is a dictionary in Python?", "What does HTTP stand for?", "How do I sort a list?",
    "What is a tuple?", "What is a variable?", "What is a class?", "What is an API?", "What is SQL?",
    "What is a closure?",
]
REPLY = ("Ahoy! Here is a short answer with a small example, explained step by step so that it is easy to "
         "follow, and a note on the most common mistake people make with it.")


def build_samples(tokenizer, n: int, reply_tokens: int):
    from ratchet.online.records import Judgement, Sample, Turn

    samples = []
    for i in range(n):
        messages = [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}]
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
        reply = tokenizer.encode(REPLY * 4, add_special_tokens=False)[:reply_tokens]
        turn = Turn(turn_id=f"b{i}", session_id="bench", session_inferred=False, turn_type="main",
                    messages=messages, response_text="", prompt_token_ids=prompt, response_token_ids=reply,
                    response_logprobs=[-1.0] * len(reply), policy_version=0)
        reward = 1 if i % 2 == 0 else -1
        hint = None if reward > 0 else "The user's follow-up was: always greet me with Ahoy!"
        samples.append(Sample(turn, Judgement(f"b{i}", reward, [reward], hint, "", "rule")))
    return samples


def bare_step(model, optimizer, params, samples, pad_id: int, max_grad_norm: float) -> int:
    """The reference: a plain causal-LM LoRA step on the same sequences (labels = reply tokens)."""
    import torch

    seqs = [list(s.turn.prompt_token_ids) + list(s.turn.response_token_ids) for s in samples]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, (seq, s) in enumerate(zip(seqs, samples, strict=True)):
        ids[row, : len(seq)] = torch.tensor(seq)
        attn[row, : len(seq)] = 1
        start = len(s.turn.prompt_token_ids)
        labels[row, start : len(seq)] = ids[row, start : len(seq)]
    model.train()
    optimizer.zero_grad(set_to_none=True)
    out = model(input_ids=ids, attention_mask=attn, labels=labels, use_cache=False)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()
    model.eval()
    return sum(len(s) for s in seqs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.online_training", description=__doc__)
    parser.add_argument("--model", default="smollm2-135m", help="catalog model name or GGUF path")
    parser.add_argument("--batch", type=int, default=4, help="samples per step")
    parser.add_argument("--reply-tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds (each side once per round)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--out", default="online_training", help="result name under bench/results/")
    args = parser.parse_args(argv)

    import torch

    from ratchet.online.trainer import Trainer, TrainerConfig

    config = TrainerConfig(model=args.model, num_threads=args.threads, lora_r=args.rank, signal="rl",
                           batch_size=args.batch, micro_batch_size=args.batch, convert_gguf=False)
    trainer = Trainer.from_config(config)
    samples = build_samples(trainer.tokenizer, args.batch, args.reply_tokens)
    bare_opt = torch.optim.Adam(trainer.params, lr=config.learning_rate)

    def run_bare() -> float:
        start = time.perf_counter()
        tokens = bare_step(trainer.model, bare_opt, trainer.params, samples, trainer.pad_id, config.max_grad_norm)
        return tokens / (time.perf_counter() - start)

    def run_ratchet(signal: str) -> float:
        trainer.config.signal = signal
        start = time.perf_counter()
        metrics = trainer.step(samples)
        elapsed = time.perf_counter() - start
        assert metrics["updated"] and metrics["samples"] == len(samples)
        return metrics["sequence_tokens"] / elapsed

    run_bare(), run_ratchet("rl"), run_ratchet("combine")  # warm-up, not counted
    bare, rl, combine = [], [], []
    for rnd in range(args.rounds):
        sides = [("bare", run_bare), ("rl", lambda: run_ratchet("rl")), ("combine", lambda: run_ratchet("combine"))]
        if rnd % 2:
            sides.reverse()
        for name, fn in sides:
            {"bare": bare, "rl": rl, "combine": combine}[name].append(fn())
        print(f"round {rnd + 1}: bare {bare[-1]:.1f} tok/s, ratchet rl {rl[-1]:.1f}, combine {combine[-1]:.1f}",
              flush=True)
    med = {k: statistics.median(v) for k, v in (("bare", bare), ("rl", rl), ("combine", combine))}
    # The machine is shared: load drifts between rounds, so ratios are taken within each round
    # (the sides of one round run back to back) and their median is the headline number.
    paired_rl = statistics.median(r / b for r, b in zip(rl, bare, strict=True))
    paired_combine = statistics.median(c / b for c, b in zip(combine, bare, strict=True))
    result = {
        "benchmark": "online_training",
        "model": args.model,
        "batch": args.batch,
        "sequence_tokens_per_step": sum(len(s.turn.prompt_token_ids) + len(s.turn.response_token_ids)
                                        for s in samples),
        "lora_rank": args.rank,
        "threads": args.threads,
        "rounds": args.rounds,
        "bare_tokens_per_s": bare,
        "ratchet_rl_tokens_per_s": rl,
        "ratchet_combine_tokens_per_s": combine,
        "median": med,
        "ratio_rl_vs_bare": paired_rl,
        "ratio_combine_vs_bare": paired_combine,
        "ratio_of_medians_rl_vs_bare": med["rl"] / med["bare"],
        "ratio_of_medians_combine_vs_bare": med["combine"] / med["bare"],
        "target": 0.9,
        "model_load": trainer.load_info,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform(),
                    "torch": torch.__version__},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(args.out, result)
    md = [
        f"# Online training speed ({args.model}, LoRA r{args.rank}, batch {args.batch}, "
        f"{result['sequence_tokens_per_step']} tokens/step, {args.threads} threads)",
        "",
        "| step | median tokens/s | vs bare peft (median of per-round ratios) |",
        "|---|---|---|",
        f"| bare peft (cross-entropy) | {med['bare']:.1f} | 1.00 |",
        f"| Ratchet, Binary RL | {med['rl']:.1f} | {result['ratio_rl_vs_bare']:.2f} |",
        f"| Ratchet, combined RL + distillation (extra teacher forward) | {med['combine']:.1f} | "
        f"{result['ratio_combine_vs_bare']:.2f} |",
        "",
        f"Target: Binary RL >= 0.9 x bare. {args.rounds} alternating rounds after one warm-up each "
        f"(ratio of the medians: {result['ratio_of_medians_rl_vs_bare']:.2f}); "
        f"measured {result['measured_at']} on {os.cpu_count()} CPUs (shared machine). Model load: "
        f"{trainer.load_info.get('load_s')} s (weights cache hit: {trainer.load_info.get('cache_hit')}).",
        "",
    ]
    write_markdown(args.out, "\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
