"""The gate with nothing configured, on the real 0.5B: what it costs per update and what it decides.

A user who wants one-sentence answers. Their held-out conversations (the default gate's share):
five first sentences of the base's replies praised, five of the base's whole (long) replies
corrected with "Too long. Just one short sentence, please.". The conversations that train: the base's
long replies to eight other prompts, heard two ways —

* ``wrong way``: praised (+1), as a judge that misreads "Meh. Not helpful." would pass them on;
* ``right way``: corrected (−1, no hint), as the user meant them.

Each arm is one update of the trainer with its defaults (``combine``, lr 3e-4) from the base,
gated by :class:`~ratchet.online.gate.SelfHeldOutGate` built the way the training loop builds it
(``EvaluationHook.from_config`` with the queue, every gate setting at its default). The table
gives every check's numbers and the seconds the gate took: measuring the current version
(``score``, done once per version) and the candidate (``evaluate``). Writes
``bench/results/online_default_gate.{json,md}`` (``--name`` another stem).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

from bench._results import RESULTS, write_json, write_markdown
CORRECTION = "Too long. Just one short sentence, please."


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(\s|$)", text.strip(), re.DOTALL)
    return (match.group(1) if match else text.strip()).strip()


def _num(value) -> str:
    return "" if value is None else f"{value:.3f}"


def render(result: dict) -> str:
    """The results file's table: every check of each arm, then the seconds."""
    lines = ["# The gate with nothing configured on the real model (bench/online_default_gate.py)", "",
             (f"{result['model']}, {result['threads']} torch thread(s), one update per arm from the base (trainer "
             f"defaults); held out: 5 praised first sentences ({result['heldout_words']['praised']} words), 5 "
             f"corrected whole replies ({result['heldout_words']['corrected']} words, \"{CORRECTION}\")."), "",
             "| arm | check | candidate | current | limit | p (wrong way) | passed |", "|---|---|---|---|---|---|---|"]
    if "heldout_finish" in result:  # runs since turns record why generation stopped
        finish = result["heldout_finish"]
        lines[3:3] = ["", (f"Held-out replies scored with their end-of-turn token when they stopped: praised "
                           f"{finish['praised']}, corrected {finish['corrected']}.")]
    for a in result["arms"]:
        for name, check in a["verdict"]["checks"].items():
            lines.append(f"| {a['arm']} | {name} | {_num(check.get('value'))} | "
                         f"{_num(check.get('current', check.get('base')))} | "
                         f"{_num(check.get('limit', -check['tolerance'] if 'tolerance' in check else None))} | "
                         f"{_num(check.get('p_wrong_way'))} | {'yes' if check['passed'] else '**no**'} |")
        lines.append(f"| {a['arm']} | **promote** | {a['verdict']['promote']} | | | | |")
    lines += ["", "| arm | gate: current version (s) | update (s) | gate: candidate (s) |", "|---|---|---|---|"]
    lines += [f"| {a['arm']} | {a['score_s']} | {a['step_s']} | {a['evaluate_s']} |" for a in result["arms"]]
    lines += ["", ("`heldout*` values: mean change of the per-token log p(served reply), candidate − current, signed + "
              "for praised and − for corrected turns (limit: −tolerance). The current version's numbers are cached "
              "per version: the second arm starts from the same base, so its `score` reads them from the cache.")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.online_default_gate", description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reply-tokens", type=int, default=64)
    parser.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    parser.add_argument("--name", default="online_default_gate", help="the results files' name in bench/results")
    args = parser.parse_args(argv)
    if args.render:
        text = render(json.loads((RESULTS / f"{args.name}.json").read_text()))
        write_markdown(args.name, text)
        print(text)
        return 0

    from ratchet.models.registry import model_path
    from ratchet.online.evaluation import EvaluationHook, GateConfig
    from ratchet.online.llama_policy import LlamaPolicy
    from ratchet.online.queue import TurnQueue
    from ratchet.online.records import Judgement, Sample, Turn, holds_out
    from ratchet.online.simulated_user import TRAIN_PROMPTS
    from ratchet.online.trainer import Trainer, TrainerConfig

    started = time.perf_counter()
    gguf = model_path(args.model)
    policy = LlamaPolicy(gguf, n_ctx=1024, n_threads=args.threads)
    served = {}
    for q in TRAIN_PROMPTS[:18]:
        messages = [{"role": "user", "content": q}]
        served[q] = (messages, policy.generate(messages, max_tokens=args.reply_tokens))
    policy.close()
    generated_s = time.perf_counter() - started

    gate_config = GateConfig()
    share = gate_config.heldout.share
    held_sessions = [s for s in (f"conv-{i}" for i in range(500)) if holds_out(s, share)][:10]
    train_sessions = [s for s in (f"conv-{i}" for i in range(500)) if not holds_out(s, share)][:8]
    tmp = Path(tempfile.mkdtemp(prefix="ratchet-default-gate-"))
    queue = TurnQueue(tmp / "queue.sqlite")
    hook = EvaluationHook.from_config(None, gate=gate_config, queue=queue)
    for i, q in enumerate(TRAIN_PROMPTS[8:18]):
        messages, g = served[q]
        praised = i < 5
        text = first_sentence(g.text) if praised else g.text
        # A praised first sentence is a reply that stopped there (its end-of-turn is part of it);
        # a corrected whole reply stopped or was cut as the model served it.
        turn = Turn(f"h{i}", held_sessions[i], False, "main", messages, text, g.prompt_token_ids,
                    [] if praised else g.token_ids, [] if praised else g.logprobs, 0,
                    finish_reason="stop" if praised else g.finish_reason)
        queue.add_turn(turn)
        next_state = "Thanks, that's exactly what I wanted." if praised else CORRECTION
        queue.set_next_state(turn.turn_id, next_state)
        queue.add_judgement(Judgement(turn.turn_id, 1 if praised else -1, [1 if praised else -1], None, next_state,
                                      "bench"))

    config = TrainerConfig(model=str(gguf), num_threads=args.threads, convert_gguf=False, kl_samples=0)
    loaded = time.perf_counter()
    trainer = Trainer.from_config(config)
    load_s = time.perf_counter() - loaded
    arms = []
    for arm, reward in (("wrong way", 1), ("right way", -1)):
        batch = []
        for i, q in enumerate(TRAIN_PROMPTS[:8]):
            messages, g = served[q]
            turn = Turn(f"{arm[0]}{i}", train_sessions[i], False, "main", messages, g.text, g.prompt_token_ids,
                        g.token_ids, g.logprobs, 0)
            batch.append(Sample(turn, Judgement(turn.turn_id, reward, [reward], None, "…", "bench")))
        before = trainer.snapshot()
        t0 = time.perf_counter()
        baseline = hook.score(trainer)
        t1 = time.perf_counter()
        metrics = trainer.step(batch)
        t2 = time.perf_counter()
        verdict = hook.evaluate(trainer, baseline)
        t3 = time.perf_counter()
        trainer.restore(before)
        arms.append({"arm": arm, "train_reward": reward, "score_s": round(t1 - t0, 1), "step_s": round(t2 - t1, 1),
                     "evaluate_s": round(t3 - t2, 1), "loss": metrics.get("loss"), "verdict": verdict})
        print(arm, json.dumps({k: v for k, v in arms[-1].items() if k != "verdict"}), verdict["failed"], flush=True)

    result = {"model": args.model, "threads": args.threads, "reply_tokens": args.reply_tokens,
              "generate_s": round(generated_s, 1), "load_s": round(load_s, 1),
              "heldout_finish": {"praised": "stop",
                                 "corrected": [served[q][1].finish_reason for q in TRAIN_PROMPTS[13:18]]},
              "heldout_words": {"praised": [len(first_sentence(served[q][1].text).split()) for q in TRAIN_PROMPTS[8:13]],
                                "corrected": [len(served[q][1].text.split()) for q in TRAIN_PROMPTS[13:18]]},
              "arms": arms}
    write_json(args.name, result, indent=1, default=float)
    text = render(result)
    write_markdown(args.name, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
