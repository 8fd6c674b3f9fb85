"""The learner's inner loop, without the server: which objective moves GENERATED text?

``bench/online_personalization.py`` measures learning through the whole system (minutes per
version). This bench calls :class:`~ratchet.online.trainer.Trainer` directly on the samples the
system would produce, so one setting costs a few minutes: the simulated user's conversations are
replayed against the trainer's own current policy (greedy replies in torch), each turn is judged by
the same rule judge the server uses (praise -> +1; a correction -> -1 with the correction as the
hint), and every batch of ``batch_size`` judged turns is one update. After every update it
measures, by greedy generation in torch:

* preference: fraction of the 12 held-out prompts whose reply satisfies the preference checker;
* guard: fraction of the 12 neutral tasks answered correctly (the base's level is the baseline);
* ``logp_pref``: mean log p(the preferred opening | held-out prompt), a continuous view of the same;
* ``kl``: KL(policy ‖ base) per token on the base's held-out replies.

Each ``--variant NAME:key=value,...`` is a set of TrainerConfig overrides run from the base model;
the base is measured once. Results merge into ``bench/results/online_inner_loop.{json,md}``.

    python -m bench.online_inner_loop --preference greeting --steps 4 \\
        --variant default --variant teacher:distill_target=teacher,w_rl=0
``--probe`` prints what the hinted teacher writes and checks that the trainer's chat template is
the one serving uses; ``--served-check`` converts the last variant's adapter to a GGUF LoRA and
compares llama.cpp's greedy replies with torch's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from ratchet.online.judge import RuleJudge
from ratchet.online.records import Sample, Turn
from ratchet.online.simulated_user import GUARD_TASKS, HELDOUT_PROMPTS, TRAIN_PROMPTS, SimulatedUser, preference

from bench._results import RESULTS, write_json, write_markdown
#: The prompts the personalization bench converses on (its last six feed the gate).
CONVERSATION_PROMPTS = TRAIN_PROMPTS[:-6]
#: Reply budget of the held-out check per preference: enough tokens for the checker to decide.
CHECK_TOKENS = {"greeting": 8, "caps": 16, "bullets": 40}


def _parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, _, body = text.partition(":")
    overrides: dict[str, Any] = {}
    for pair in filter(None, body.split(",")):
        key, _, value = pair.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return name, overrides


def _chat(trainer: Any, messages: list[dict[str, Any]]) -> list[int]:
    from ratchet.online.scoring import chat_ids as _chat_ids

    return _chat_ids(trainer.tokenizer, messages)


def _replies(trainer: Any, conversations: list[list[dict[str, Any]]], max_tokens: int, *, base: bool = False,
             chunk: int = 12) -> list[list[int]]:
    out: list[list[int]] = []
    for i in range(0, len(conversations), chunk):
        out += trainer.greedy_ids([_chat(trainer, m) for m in conversations[i : i + chunk]], max_tokens, base=base)
    return out


def measure(trainer: Any, pref: Any, *, base: bool = False, base_replies: dict[str, str] | None = None) -> dict:
    """Held-out preference, guard, log p of the preferred opening and KL to base, by the current policy."""
    started = time.perf_counter()
    dec = trainer.tokenizer.decode
    held = [[{"role": "user", "content": q}] for q in HELDOUT_PROMPTS]
    replies = [dec(r, skip_special_tokens=True) for r in _replies(trainer, held, CHECK_TOKENS[pref.name], base=base)]
    guard = [dec(r, skip_special_tokens=True)
             for r in _replies(trainer, [[{"role": "user", "content": q}] for q, _ in GUARD_TASKS], 16, base=base)]
    opening = trainer.tokenizer.encode(pref.example.rstrip(), add_special_tokens=False)
    prompts = [_chat(trainer, m) for m in held]
    logp = [float(lp.sum()) for lp in trainer.score([p + opening for p in prompts], [len(p) for p in prompts], base=base)]
    out = {
        "preference": sum(pref.check(r) for r in replies) / len(replies),
        "guard": sum(a in g.lower() for (_, a), g in zip(GUARD_TASKS, guard, strict=True)) / len(guard),
        "logp_pref": sum(logp) / len(logp),
        "replies": dict(zip(HELDOUT_PROMPTS, replies, strict=True)),
        "guard_replies": guard,
    }
    if base_replies is not None and not base:
        out["kl"] = trainer.response_kl_to_base([([{"role": "user", "content": q}], r) for q, r in base_replies.items()])
    out["measure_s"] = round(time.perf_counter() - started, 1)
    return out


def conversation_order(seed: int) -> list[str]:
    """The order the simulated user asks its questions in: as listed for 0, else a seeded shuffle
    (the same questions, so a repeat of a setting differs only in which ones each update sees)."""
    prompts = list(CONVERSATION_PROMPTS)
    if seed:
        random.Random(seed).shuffle(prompts)
    return prompts


class Replay:
    """The simulated user's conversations against the trainer's own policy, judged by the rule judge."""

    def __init__(self, trainer: Any, pref: Any, *, max_tokens: int, second_turns: bool, hint_style: str,
                 order_seed: int = 0) -> None:
        self.trainer, self.pref = trainer, pref
        self.prompts = conversation_order(order_seed)
        self.user = SimulatedUser(pref)
        self.judge = RuleJudge(hints=True, hint_style=hint_style)
        self.max_tokens = max_tokens
        self.second_turns = second_turns
        self.next_prompt = 0
        self.met_first: list[bool] = []
        self.left: list[Sample] = []

    def _turn(self, messages: list[dict[str, Any]], reply: list[int], logprobs: list[float]) -> Turn:
        trainer = self.trainer
        prompt = _chat(trainer, messages)
        return Turn(turn_id=f"c{self.next_prompt}-{len(messages)}", session_id="replay", session_inferred=False,
                    turn_type="main", messages=messages, response_text=trainer.tokenizer.decode(reply),
                    prompt_token_ids=prompt, response_token_ids=reply, response_logprobs=logprobs,
                    policy_version=trainer.version)

    def batch(self, size: int) -> list[Sample]:
        """``size`` judged turns: conversations decoded together (first replies, then the re-asks);
        turns beyond ``size`` wait for the next batch, a step behind, as queued turns do."""
        samples, self.left = self.left, []
        while len(samples) < size:
            prompts = [self.prompts[(self.next_prompt + i) % len(self.prompts)]
                       for i in range(max(size // 2, 1))]
            self.next_prompt += len(prompts)
            convs = [[{"role": "user", "content": p}] for p in prompts]
            for attempt in range(2 if self.second_turns else 1):
                if not convs:
                    break
                replies = _replies(self.trainer, convs, self.max_tokens)
                # The serving log-probs of the replies (one batched forward; empty replies score nothing).
                scored = [(_chat(self.trainer, m), r) for m, r in zip(convs, replies, strict=True) if r]
                scores = iter(self.trainer.score([p + r for p, r in scored], [len(p) for p, _ in scored])
                              if scored else [])
                again = []
                for messages, reply in zip(convs, replies, strict=True):
                    logprobs = next(scores).tolist() if reply else []
                    text = self.trainer.tokenizer.decode(reply, skip_special_tokens=True)
                    ok = self.pref.check(text)
                    if attempt == 0:
                        self.met_first.append(ok)
                    next_state = self.user.praise if ok else self.user.correction()
                    turn = self._turn(list(messages), reply, logprobs)
                    samples.append(Sample(turn, self.judge.judge(turn, next_state)))
                    if not ok:
                        again.append([*messages, {"role": "assistant", "content": text},
                                      {"role": "user", "content": next_state}])
                convs = again
        self.left = samples[size:]
        return samples[:size]


def run_variant(name: str, overrides: dict[str, Any], pref: Any, args: argparse.Namespace, base: dict,
                save: Any = None, previous: dict | None = None) -> dict:
    """``args.steps`` updates from the base model, measured after each; with ``args.store`` the
    LoRA, Adam state and replay position are checkpointed after every update, and a run whose
    checkpoint matches ``previous`` (its result so far, stopped or finished) continues from it
    instead of restarting: a finished run given more ``--steps`` goes on, and one given
    ``--served-check`` and no more steps only runs the check on its last update."""
    import torch

    from ratchet.online.trainer import Trainer, TrainerConfig

    settings = dict(overrides)
    hint_style = settings.pop("hint", "instruction")
    config = TrainerConfig(model=args.model, num_threads=args.threads, **settings)
    trainer = Trainer.from_config(config)
    replay = Replay(trainer, pref, max_tokens=args.max_tokens, second_turns=not args.first_turns_only,
                    hint_style=hint_style, order_seed=args.order_seed)
    curve = [{"step": 0, **{k: base[k] for k in ("preference", "guard", "logp_pref")}, "kl": 0.0}]
    checkpoint = Path(args.store) / f"{pref.name}-{name}.pt" if args.store else None
    if (checkpoint is not None and checkpoint.is_file() and previous and previous.get("overrides") == overrides
            and previous.get("order_seed", 0) == args.order_seed):
        state = torch.load(checkpoint, weights_only=False)
        if state["step"] == len(previous["curve"]) - 1:
            trainer.set_lora_state(state["lora"], state["step"])
            trainer.optimizer.load_state_dict(state["optimizer"])
            replay.next_prompt, replay.met_first = state["next_prompt"], state["met_first"]
            curve = previous["curve"]
            print(f"[{name}] resumed after step {state['step']}", flush=True)
    print(f"[{name}] {overrides}", flush=True)
    for step in range(len(curve), args.steps + 1):
        started = time.perf_counter()
        samples = replay.batch(config.batch_size)
        replay_s = time.perf_counter() - started
        started = time.perf_counter()
        metrics = trainer.step(samples)
        step_s = time.perf_counter() - started
        trainer.version += 1
        m = measure(trainer, pref, base_replies=base["base_replies"])
        row = {"step": step, "replay_s": round(replay_s, 1), "step_s": round(step_s, 1),
               "rewards": [s.judgement.reward for s in samples],
               **{k: m[k] for k in ("preference", "guard", "logp_pref", "kl", "measure_s")},
               "distill_kl": metrics.get("distill_kl"), "grad_norm": metrics.get("grad_norm"),
               "kl_penalty": metrics.get("kl_penalty"), "anchors": metrics.get("anchors"),
               "taught": metrics.get("taught"), "hold_kl": metrics.get("hold_kl"),
               "replies": list(m["replies"].values())[:4], "teacher_targets": metrics.get("teacher_targets", []),
               "teacher_targets_refused": metrics.get("teacher_targets_refused", []),
               "guard_replies": m["guard_replies"]}
        curve.append(row)
        if checkpoint is not None:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            tmp = checkpoint.with_name(checkpoint.name + ".tmp")
            torch.save({"step": step, "lora": trainer.lora_state(), "optimizer": trainer.optimizer.state_dict(),
                        "next_prompt": replay.next_prompt, "met_first": replay.met_first}, tmp)
            os.replace(tmp, checkpoint)
        def keep() -> None:  # a run stopped between updates (or in the check) keeps the steps it made
            if save is not None:
                save({"overrides": overrides, "curve": curve, "met_first": replay.met_first, "partial": True,
                      "order_seed": args.order_seed})

        keep()
        if step == args.served_check_at:
            row["served_check"] = served_check(trainer, pref, threads=args.threads)
            keep()
        print(f"[{name}] step {step}: pref {m['preference']:.2f} guard {m['guard']:.2f} "
              f"logp {m['logp_pref']:.2f} kl {m['kl']:.3f} replay {replay_s:.0f}s step {step_s:.0f}s "
              f"measure {m['measure_s']}s "
              f"rewards {row['rewards']} | {row['replies'][:2]} | taught {row['teacher_targets']}", flush=True)
    result = {"overrides": overrides, "curve": curve, "met_first": replay.met_first, "order_seed": args.order_seed}
    if args.served_check:
        result["served_check"] = served_check(trainer, pref, threads=args.threads)
    return result


def served_check(trainer: Any, pref: Any, tokens: int = 16, prompts: int = 6, threads: int = 1) -> dict[str, Any]:
    """The adapter as serving loads it (GGUF LoRA in llama.cpp) against the torch policy, greedy.

    The base model is compared the same way (llama.cpp without LoRA against torch with the adapter
    off): the served GGUF is quantized, the trainer fp32, so greedy text can part even with no
    adapter; the adapter's own disagreement is what it adds to that floor.
    """
    import tempfile

    from ratchet.online.llama_policy import LlamaPolicy
    from ratchet.online.lora_gguf import convert_adapter

    tmp = Path(tempfile.mkdtemp(prefix="inner-loop-"))
    adapter = trainer.save_adapter(tmp / "adapter")
    gguf = convert_adapter(adapter, trainer.base_gguf, tmp / "adapter.gguf")
    chats = [[{"role": "user", "content": q}] for q in HELDOUT_PROMPTS[:prompts]]
    out: dict[str, Any] = {"tokens": tokens, "step": trainer.version}
    for label, lora, base in (("base", None, True), ("adapter", gguf, False)):
        policy = LlamaPolicy(trainer.base_gguf, lora_path=lora, n_ctx=512, n_threads=threads)
        served = [policy.generate(m, max_tokens=tokens, temperature=0.0) for m in chats]
        policy.close()
        torch_ids = _replies(trainer, chats, tokens, base=base)
        agree = []
        for g, t in zip(served, torch_ids, strict=True):
            n = next((i for i, (a, b) in enumerate(zip(g.token_ids, t)) if a != b), min(len(g.token_ids), len(t)))
            agree.append(n)
        dec = trainer.tokenizer.decode
        out[label] = {
            "identical": sum(list(g.token_ids) == t for g, t in zip(served, torch_ids, strict=True)) / len(served),
            "mean_agreeing_prefix": sum(agree) / len(agree),
            "served_preference": sum(pref.check(g.text) for g in served) / len(served),
            "torch_preference": sum(pref.check(dec(t, skip_special_tokens=True)) for t in torch_ids) / len(served),
            "pairs": [[g.text, dec(t, skip_special_tokens=True)] for g, t in zip(served, torch_ids, strict=True)][:6],
        }
    return out


def probe(args: argparse.Namespace) -> None:
    """What the hinted teacher writes for each preference, and whether the chat templates agree."""
    from ratchet.online.llama_policy import LlamaPolicy
    from ratchet.online.preparation import with_hint
    from ratchet.online.trainer import Trainer, TrainerConfig

    trainer = Trainer.from_config(TrainerConfig(model=args.model, num_threads=args.threads))
    policy = LlamaPolicy(trainer.base_gguf, n_ctx=512, n_threads=1)
    messages = [{"role": "user", "content": CONVERSATION_PROMPTS[0]}]
    print("templates agree:", policy.prompt_tokens(messages) == _chat(trainer, messages), flush=True)
    policy.close()
    for name in args.probe_preferences:
        pref = preference(name)
        for style in ("instruction", "followup"):
            hint = RuleJudge(hints=True, hint_style=style).judge(
                Turn("p", "s", False, "main", messages, "", [], [], [], 0), SimulatedUser(pref).correction()).hint
            convs = [with_hint([{"role": "user", "content": q}], hint) for q in CONVERSATION_PROMPTS[:6]]
            for q, r in zip(CONVERSATION_PROMPTS, _replies(trainer, convs, 32, base=True), strict=False):
                text = trainer.tokenizer.decode(r, skip_special_tokens=True)
                print(f"[{name}/{style}] {pref.check(text)} {q!r} -> {text!r}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.online_inner_loop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--preference", default="greeting")
    parser.add_argument("--variant", action="append", default=[], help="NAME:key=value,... (TrainerConfig)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=40, help="reply budget of the replayed conversations")
    parser.add_argument("--order-seed", type=int, default=0,
                        help="shuffle the conversation questions with this seed (0: the listed order)")
    parser.add_argument("--first-turns-only", action="store_true", help="train on first replies only")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; more than the cores left free by other jobs slows it several-fold")
    parser.add_argument("--store", default=None,
                        help="checkpoint folder: an interrupted variant continues from its last update")
    parser.add_argument("--served-check", action="store_true", help="after the last update: llama.cpp vs torch")
    parser.add_argument("--served-check-at", type=int, default=0, help="the same check after this update")
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--probe-preferences", nargs="*", default=["greeting", "caps", "bullets"])
    args = parser.parse_args(argv)
    if args.probe:
        probe(args)
        if not args.variant:
            return 0
    pref = preference(args.preference)
    path = RESULTS / "online_inner_loop.json"
    data = json.loads(path.read_text()) if path.is_file() else {"runs": {}, "base": {}}
    base_key = f"{args.model}/{pref.name}"
    if base_key not in data["base"]:
        from ratchet.online.trainer import Trainer, TrainerConfig

        trainer = Trainer.from_config(TrainerConfig(model=args.model, num_threads=args.threads))
        m = measure(trainer, pref, base=True)
        base_replies = _replies(trainer, [[{"role": "user", "content": q}] for q in HELDOUT_PROMPTS], 24, base=True)
        m["base_replies"] = {q: trainer.tokenizer.decode(r, skip_special_tokens=True)
                             for q, r in zip(HELDOUT_PROMPTS, base_replies, strict=True)}
        data["base"][base_key] = m
        print(f"[base] pref {m['preference']:.2f} guard {m['guard']:.2f} logp {m['logp_pref']:.2f}", flush=True)
        _save(path, data)
        del trainer
    for text in args.variant:
        name, overrides = _parse_variant(text)
        key = f"{base_key}/{name}"

        def save(result: dict[str, Any], key: str = key) -> None:
            result["max_tokens"], result["second_turns"] = args.max_tokens, not args.first_turns_only
            data["runs"][key] = result
            _save(path, data)

        save(run_variant(name, overrides, pref, args, data["base"][base_key], save, data["runs"].get(key)))
    return 0


def _save(path: Path, data: dict[str, Any]) -> None:
    write_json(path.stem, data, out=path.parent, indent=1, default=str)
    write_markdown("online_inner_loop", markdown(data))


def markdown(data: dict[str, Any]) -> str:
    lines = ["# The learner's inner loop (bench/online_inner_loop.py)", "",
             "Trainer.step on replayed, rule-judged conversations of the simulated user (no server); after every "
             "update, greedy generation in torch: preference = held-out prompts whose reply meets the preference "
             "(of 12), guard = neutral tasks answered (of 12), logp = mean log p(preferred opening), KL to base per "
             "token on the base's held-out replies.", ""]
    for key, base in sorted(data["base"].items()):
        lines += [f"## {key}", "", f"base: preference {base['preference']:.2f}, guard {base['guard']:.2f}, "
                  f"logp {base['logp_pref']:.2f}", "",
                  "| variant | overrides | preference by step | guard by step | logp by step | KL by step |",
                  "|---|---|---|---|---|---|"]
        for rkey, r in sorted(data["runs"].items()):
            if not rkey.startswith(key + "/"):
                continue
            c = r["curve"]
            label = rkey[len(key) + 1:] + (" (stopped)" if r.get("partial") else "")
            if r.get("order_seed"):
                label += f"; questions shuffled (seed {r['order_seed']})"
            served = r.get("served_check") or next((x["served_check"] for x in c if x.get("served_check")), None)
            if served and "adapter" in served:
                a, b = served["adapter"], served["base"]
                label += (f"; llama.cpp vs torch after update {served.get('step')}, {served['tokens']} greedy tokens: "
                          f"identical {a['identical']:.2f} "
                          f"(base {b['identical']:.2f}), preference {a['served_preference']:.2f} vs "
                          f"{a['torch_preference']:.2f}")
            lines.append(f"| {label} | `{json.dumps(r['overrides'])}` | "
                         + " → ".join(f"{x['preference']:.2f}" for x in c) + " | "
                         + " → ".join(f"{x['guard']:.2f}" for x in c) + " | "
                         + " → ".join(f"{x['logp_pref']:.1f}" for x in c) + " | "
                         + " → ".join(f"{x['kl']:.2f}" for x in c) + " |")
        # What a person concluded from the rows (measured numbers only), kept in the JSON.
        lines += ["", *data.get("notes", {}).get(key, [])]
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
