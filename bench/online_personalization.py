"""Personalization through the whole system: does `ratchet serve --learn` learn a user's preference?

A simulated user (``ratchet.online.simulated_user``) with one stable, checkable preference (one
sentence, a sign-off, German, the user's name, a numbered list, a greeting, bullets, capitals: none
of which the base model shows) talks to a real ``ratchet serve --learn {binary,opd,combine}``
process (a subprocess on a port; its run lives under ``--store``, so an interrupted run resumes)
through the stock ``openai`` client for N conversations: praise when the reply meets the
preference, a correction when not, then the question again. Each message is drawn, seeded, from
the preference's pool of phrasings (``src/ratchet/online/data/simulated_user.yaml``), most without
a judge keyword, so the run measures what the server hears of ordinary feedback. The server's own
loops judge the turns, train the LoRA, gate and hot-swap versions. Its judge is the default
(``judge.kind=auto``: the stacked judge where the 1.5B is pulled, else the classifier) unless
``--set judge.kind=…`` says otherwise; each result records which ran (``judge``: the server's
recorded choice and the judge names on its judgements), since the same command can run either.

Measured per weight version (every version the trainer published, served or refused), after the
conversations, with the very GGUF + LoRA file serving loads, greedy (temperature 0):

* preference score: the fraction of replies to held-out prompts (never asked in training) that
  satisfy the checker;
* guard score: the fraction of neutral tasks answered correctly (case-insensitive answer check);
  its noise band is 2 binomial standard errors of the base's score.

The base model (version 0) is measured in the same run, so every number has its baseline. Results
merge into ``bench/results/online_personalization.{json,md}`` under ``MODEL/PREFERENCE/SIGNAL/sSEED``;
the markdown adds, per ``MODEL/PREFERENCE/SIGNAL`` with several seeds, the spread between runs.
``--preference``, ``--learn`` and ``--seed`` take comma-separated lists: one run per combination,
one after another, each resuming from its own run directory under ``--store``.

    python -m bench.online_personalization --preference length,signoff --learn combine,binary \
        --seed 0,1,2 --conversations 24

``--learn context``: the same user through ``ratchet serve --learn off --set context.online=true``
(no trainer; the playbook the judge loop learns is in every served prompt), each pace point's
playbook snapshot measured as a version on the base weights (``bench/_personalization_context.py``).
Beside ``length/combine/s0/default_gate_paced`` (needs ``ratchet models pull all-minilm-l6-v2``):

    python -m bench.online_personalization --preference length --learn context --seed 0 \
        --conversations 24 --pace 4 --label paced

``--base-only`` measures only the base model on each preference's held-out prompts (no server, a
few minutes): where each preference starts, before half an hour of conversations is spent on it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal as signals
import sys
import time
from pathlib import Path
from typing import Any

from bench import _personalization_context as in_context
from bench._personalization_report import markdown, result_key, spread  # noqa: F401 (spread: re-exported)
from bench._results import RESULTS, write_json, write_markdown
from bench._serve_process import Server, free_port
from ratchet.online.simulated_user import (
    GUARD_TASKS,
    PREFERENCES,
    Pools,
    SimulatedUser,
    guard_cases,
    heldout_cases,
    pools,
    preference,
)
from ratchet.online.trainer_config import TrainerConfig
from ratchet.store.files import write_bytes_atomic

#: How many training prompts feed the promotion gate's preference cases: the last ones, never asked
#: in the conversations, so the gate never scores a reply it was trained on, nor the held-out set.
GATE_COUNT = 6
GATE_GUARD = GUARD_TASKS[:6]
SIGNALS = ("binary", "opd", "combine", in_context.SIGNAL)


def gate_prompts(pool: Pools) -> list[str]:
    return list(pool.train_prompts[-GATE_COUNT:])


def conversation_prompts(pool: Pools, seed: int) -> list[str]:
    """The prompts the user converses on, in the seed's order (the order is part of a run's luck)."""
    prompts = list(pool.train_prompts[:-GATE_COUNT])
    random.Random(f"prompts/{seed}").shuffle(prompts)
    return prompts


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    write_bytes_atomic(path, "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8"))


class Generator:
    """Greedy replies of one weight version, through the serving policy class and its GGUF + LoRA."""

    def __init__(self, gguf: Path, lora: Path | None, threads: int) -> None:
        from ratchet.online.llama_policy import LlamaPolicy

        self.policy = LlamaPolicy(gguf, lora_path=lora, n_ctx=1024, n_threads=threads)

    def reply(self, prompt: str, max_tokens: int) -> str:
        return self.chat([{"role": "user", "content": prompt}], max_tokens)

    def chat(self, messages: list[dict[str, Any]], max_tokens: int) -> str:
        return self.policy.generate(messages, max_tokens=max_tokens, temperature=0.0).text

    def close(self) -> None:
        self.policy.close()


def evaluate_version(gguf: Path, lora: Path | None, pref: Any, *, threads: int, max_tokens: int) -> dict[str, Any]:
    """Held-out preference score and guard score of one version, by greedy generated text."""
    gen = Generator(gguf, lora, threads)
    try:
        replies = {q: gen.reply(q, max_tokens) for q in pools(pref.name).heldout_prompts}
        guard = {q: gen.reply(q, 24) for q, _ in GUARD_TASKS}
    finally:
        gen.close()
    met = [pref.check(r) for r in replies.values()]
    correct = [answer in guard[q].lower() for q, answer in GUARD_TASKS]
    return {
        "preference": sum(met) / len(met), "guard": sum(correct) / len(correct),
        "heldout_replies": replies, "guard_replies": guard,
    }


def noise_band(p: float, n: int) -> float:
    """Two binomial standard errors (at least one case's worth)."""
    return max(2 * math.sqrt(p * (1 - p) / n), 1 / n)


def _versions(versions_dir: Path) -> list[Any]:
    from ratchet.online.versions import VersionStore

    return [v for v in VersionStore(versions_dir).list() if v.number > 0]


def _names(text: str, known: Any, flag: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise SystemExit(f"{flag}: unknown {', '.join(unknown) or 'empty list'}; name one or more of: "
                         f"{', '.join(known)} (comma-separated)")
    return names


def _seeds(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()] or [0]
    except ValueError:
        raise SystemExit(f"--seed: {text!r} is not a comma-separated list of integers (e.g. 0,1,2)") from None


def plan(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """The runs the arguments ask for: (preference, signal, seed) per combination, in order."""
    prefs = _names(args.preference, PREFERENCES, "--preference")
    signals_ = _names(args.learn, SIGNALS, "--learn")
    seeds = _seeds(args.seed)
    runs = [(p, s, seed) for p in prefs for s in signals_ for seed in seeds]
    if args.run and len(runs) > 1:
        raise SystemExit("--run names one run; drop it to run several preferences, signals or seeds "
                         "(each gets MODEL-PREFERENCE-SIGNAL-sSEED)")
    return runs


#: Reply length (``max_tokens``) of every served and measured reply, per preference, when
#: ``--max-tokens`` is not given. A preference checked at the end of a reply needs replies that
#: reach their end: at 40 tokens the 0.5B's answers were cut before any sign-off (0.00 at every
#: version, 3 of 24 second answers met it, all short replies to a correction).
MAX_TOKENS = 40
MAX_TOKENS_FOR = {"signoff": 160}


def max_tokens_for(args: argparse.Namespace, pref_name: str) -> int:
    return args.max_tokens or MAX_TOKENS_FOR.get(pref_name, MAX_TOKENS)


def run(args: argparse.Namespace, pref_name: str, signal: str, seed: int) -> dict[str, Any]:
    from openai import OpenAI

    from ratchet.models.registry import model_path
    from ratchet.online.status import QUEUE_NAME, VERSIONS_NAME, online_dir

    pref = preference(pref_name)
    pool = pools(pref_name)
    gguf = model_path(args.model)
    store = Path(args.store).resolve()
    run_name = args.run or f"{args.model}-{pref_name}-{signal}-s{seed}"
    run_dir = store / run_name
    bench_dir = run_dir / "bench"
    bench_dir.mkdir(parents=True, exist_ok=True)
    state_path = bench_dir / "state.json"
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    args = argparse.Namespace(**{**vars(args), "max_tokens": max_tokens_for(args, pref_name)})
    # A run measured at one reply length cannot go on at another (older runs: the default, 40).
    started = state.setdefault("max_tokens", args.max_tokens if "base" not in state else MAX_TOKENS)
    if started != args.max_tokens:
        raise SystemExit(f"[{run_name}] was started with --max-tokens {started}, not {args.max_tokens}: "
                         f"resume it with --max-tokens {started}, or start another run (--run NAME or --store)")

    if "base" not in state:
        print(f"[{run_name}] measuring the base model", flush=True)
        state["base"] = evaluate_version(gguf, None, pref, threads=args.threads, max_tokens=args.max_tokens)
        gen = Generator(gguf, None, args.threads)
        state["gate_replies"] = {q: gen.reply(q, args.max_tokens) for q in gate_prompts(pool)}
        state["gate_guard"] = {q: gen.reply(q, 24) for q, _ in GATE_GUARD}
        gen.close()
        _save(state_path, state)
    heldout = bench_dir / "gate_heldout.jsonl"
    guard = bench_dir / "gate_guard.jsonl"
    _write_jsonl(heldout, heldout_cases(pref, state["gate_replies"]))
    _write_jsonl(guard, guard_cases(state["gate_guard"], pref))
    tasks = bench_dir / "gate_tasks.jsonl"
    _write_jsonl(tasks, [{"messages": [{"role": "user", "content": q}], "answer": a} for q, a in GATE_GUARD])

    port = args.port or free_port()
    context = signal == in_context.SIGNAL  # no trainer: the playbook learned and served, no gate
    serve_args = [
        "--model", f"local:{args.model}", *(in_context.SERVE_ARGS if context else ["--learn", signal]), "--run", run_name,
        "--set", f"runs_root={store}",
        "--set", f"max_tokens={args.max_tokens}",
        "--set", "status_every_s=5",
    ]
    if args.gate == "bench" and not context:  # the preference's own gate cases; "default": the server's, nothing set
        serve_args += ["--set", f"trainer.heldout_path={heldout}", "--set", f"trainer.gate.guard_path={guard}",
                       "--set", f"trainer.gate.tasks_path={tasks}"]
    for override in args.set:
        serve_args += ["--set", override]
    state["serve_args"] = serve_args
    server = Server(serve_args, port, bench_dir / "serve.log")
    conversations = state.setdefault("conversations", [])
    seen = state.setdefault("versions_seen", {})
    try:
        server.wait_ready()
        client = OpenAI(base_url=server.url, api_key="none", max_retries=0, timeout=600)
        user = SimulatedUser(pref, max_retries=args.retries, seed=seed)
        prompts = conversation_prompts(pool, seed)
        started = time.time() - state.get("elapsed_s", 0.0)
        versions_dir = online_dir(run_dir) / VERSIONS_NAME
        for i in range(len(conversations), args.conversations):
            prompt = prompts[i % len(prompts)]
            conv = user.converse(client, f"local:{args.model}", prompt, session=f"{run_name}-c{i}", max_tokens=args.max_tokens,
                                 temperature=args.temperature, seed=100_000 * seed + 1000 + i)
            conversations.append({"prompt": prompt, "met": conv.met, "versions": conv.versions,
                                  "replies": [r[:200] for r in conv.replies], "said": conv.said})
            state["elapsed_s"] = time.time() - started
            _note_versions(versions_dir, seen, i + 1, state["elapsed_s"])
            _save(state_path, state)
            print(f"[{run_name}] conversation {i + 1}/{args.conversations}: met={conv.met} "
                  f"served v{conv.versions} · {len(seen)} versions · {state['elapsed_s']:.0f}s", flush=True)
            if context and args.pace and (i + 1) % args.pace == 0:
                in_context.pace_point(state, online_dir(run_dir), bench_dir, i + 1, started, args.pace_timeout_s)
                _save(state_path, state)
            elif args.pace and (i + 1) % args.pace == 0 and i + 1 < args.conversations:
                # The user comes back once what it said has been learned from: nothing judged is
                # waiting for the trainer (its version published, served or refused), or the timeout.
                deadline = time.monotonic() + args.pace_timeout_s
                while time.monotonic() < deadline and _waiting(online_dir(run_dir) / QUEUE_NAME):
                    time.sleep(5)
                state["elapsed_s"] = time.time() - started
                _note_versions(versions_dir, seen, i + 1, state["elapsed_s"])
                _save(state_path, state)
        if context:  # what the last conversations taught, then the playbook as it ends
            in_context.pace_point(state, online_dir(run_dir), bench_dir, len(conversations), started,
                                  args.pace_timeout_s if args.pace else args.drain_s)
        # Let the trainer work through what is judged and waiting (it trains while we wait).
        deadline = time.monotonic() + args.drain_s
        while not context and time.monotonic() < deadline and _waiting(online_dir(run_dir) / QUEUE_NAME):
            time.sleep(5)
            _note_versions(versions_dir, seen, len(conversations), time.time() - started)
        _note_versions(versions_dir, seen, len(conversations), time.time() - started)
        _save(state_path, state)
    finally:
        server.stop()

    rows = [{"version": 0, "promoted": True, "conversations": 0, "elapsed_s": 0.0,
             **{k: state["base"][k] for k in ("preference", "guard")}}]
    cache = state.setdefault("evaluated", {})
    if context:  # the snapshots, measured on the base weights
        rows = in_context.rows(state, bench_dir, online_dir(run_dir), pref, lambda: Generator(gguf, None, args.threads),
                               args.max_tokens, lambda: _save(state_path, state))
    for v in [] if context else _versions(online_dir(run_dir) / VERSIONS_NAME):
        key = str(v.number)
        if key not in cache:
            print(f"[{run_name}] evaluating v{v.number}", flush=True)
            if v.lora_gguf is None:
                continue
            cache[key] = evaluate_version(gguf, v.lora_gguf, pref, threads=args.threads, max_tokens=args.max_tokens)
            _save(state_path, state)
        evaluation = v.metrics.get("evaluation") or {}
        rows.append({
            "version": v.number, "promoted": v.promoted, "conversations": seen.get(key, {}).get("conversations"),
            "elapsed_s": seen.get(key, {}).get("elapsed_s"), "preference": cache[key]["preference"],
            "guard": cache[key]["guard"], "kl_to_base": v.metrics.get("kl_to_base"),
            "gate_failed": evaluation.get("failed"), "gate_checks": evaluation.get("checks"),
            "parent": v.metrics.get("parent_version"), "loss": v.metrics.get("loss"),
            "distill_kl": v.metrics.get("distill_kl"), "samples": v.metrics.get("samples"),
        })
    base = state["base"]
    band = noise_band(base["preference"], len(pool.heldout_prompts))
    guard_band = noise_band(base["guard"], len(GUARD_TASKS))
    first = next((r for r in rows[1:] if r["promoted"] and r["preference"] > base["preference"] + band), None)
    served = [r for r in rows if r["promoted"]]
    result = {
        "model": args.model, "preference": pref.name, "signal": signal, "seed": seed, "run": run_name,
        "label": args.label, "gate": None if context else args.gate,
        "pace": args.pace,
        # The run store's location is this machine's, not the result's.
        "conversations": len(conversations), "serve_args": [a.replace(str(store), "<store>") for a in serve_args],
        "base_preference": base["preference"], "preference_noise_band": band,
        "base_guard": base["guard"], "guard_noise_band": guard_band,
        "best_served_preference": max(r["preference"] for r in served),
        "final_served_preference": served[-1]["preference"], "final_served_guard": served[-1]["guard"],
        "guard_within_band": all(r["guard"] >= base["guard"] - guard_band for r in served),
        "first_improvement": None if first is None else {k: first[k] for k in ("version", "conversations",
                                                                                "elapsed_s")},
        "conversation_met_fraction": [sum(c["met"][:1]) for c in conversations],
        "versions": rows,
        "heldout_replies": {"base": base["heldout_replies"],
                            "final": cache[in_context.snapshot_key(served[-1]["version"]) if context else
                                           str(served[-1]["version"])]["heldout_replies"] if len(served) > 1 else None},
        "wall_s": state.get("elapsed_s"),
        "cpu": {"cores": os.cpu_count(), "load": os.getloadavg()},
        "judge": judge_ran(online_dir(run_dir)),
    }
    _merge(result)
    return result


def _waiting(queue_path: Path, min_batch: int = TrainerConfig().min_batch) -> int:
    """Turns served but not yet trained on (waiting for a next state, the judge or the trainer).

    Fewer claimed turns than the trainer's ``min_batch``, with nothing else waiting, are a partial
    batch the trainer holds until more samples come: the user does not wait for those (it would be
    waiting for itself — a run whose held-out share took part of four conversations' turns sat out
    the whole pace timeout).
    """
    import sqlite3

    with sqlite3.connect(queue_path, timeout=30) as db:
        counts = dict(db.execute("SELECT state, COUNT(*) FROM turns WHERE state IN ('ready', 'judged', 'claimed') "
                                 "GROUP BY state").fetchall())
    pending, claimed = counts.get("ready", 0) + counts.get("judged", 0), counts.get("claimed", 0)
    return 0 if not pending and claimed < min_batch else int(pending + claimed)


def judge_ran(base: Path) -> dict[str, Any]:
    """Which judge the server ran: its recorded choice (with nothing configured, ``judge.kind=auto``
    runs the stacked judge where the 1.5B is pulled and the classifier elsewhere, so the same command
    measures different judges on different machines) and the judge names its judgements carry."""
    import sqlite3
    from collections import Counter

    from ratchet.online.judge.choice import JudgeChoice
    from ratchet.online.status import QUEUE_NAME

    choice = JudgeChoice.load(base)
    names: Counter[str] = Counter()
    if (base / QUEUE_NAME).is_file():
        with sqlite3.connect(f"file:{base / QUEUE_NAME}?mode=ro", uri=True, timeout=30) as db:
            names.update(str(json.loads(data).get("judge")) for (data,) in db.execute("SELECT data FROM judgements"))
    return {"choice": None if choice is None else choice.to_dict(), "judgements_by": dict(names.most_common())}


def _note_versions(versions_dir: Path, seen: dict[str, Any], conversations: int, elapsed: float) -> None:
    if not versions_dir.is_dir():
        return
    for v in _versions(versions_dir):
        seen.setdefault(str(v.number), {"conversations": conversations, "elapsed_s": round(elapsed, 1)})


def _save(path: Path, state: dict[str, Any]) -> None:
    write_bytes_atomic(path, json.dumps(state, indent=1, default=str).encode("utf-8"))


def measure_base(model: str, prefs: list[str], *, threads: int, max_tokens: int) -> dict[str, Any]:
    """The base model's held-out preference score per preference, and its guard score: how far each
    preference is from what the model does by itself, before a run of conversations is spent on it.

    One greedy reply per prompt, shared between the preferences that ask it and kept with the
    results: each preference's row is written as soon as it is measured, and a rerun reuses the
    replies already there (same model and reply budget), so an interrupted measurement resumes.
    """
    from ratchet.models.registry import model_path

    data = _load()
    rows = data.setdefault("base", {})
    replies: dict[str, str] = {}
    for row in rows.values():
        if row["model"] == model and row["max_tokens"] == max_tokens:
            replies.update(row["replies"])
    guard_replies = next((r["guard_replies"] for r in rows.values() if r["model"] == model
                          and r.get("guard_replies")), None)
    gen: Generator | None = None
    try:
        for name in prefs:
            pref, prompts = preference(name), pools(name).heldout_prompts
            for q in prompts:
                if q not in replies:
                    gen = gen or Generator(model_path(model), None, threads)
                    replies[q] = gen.reply(q, max_tokens)
            met = [pref.check(replies[q]) for q in prompts]
            rows[f"{model}/{name}"] = {"model": model, "preference": name, "max_tokens": max_tokens,
                                       "score": sum(met) / len(met), "met": sum(met), "prompts": len(met),
                                       "guard": None, "replies": {q: replies[q] for q in prompts}}
            _write(data)
            print(f"[base] {model} {name}: {sum(met)}/{len(met)}", flush=True)
        if guard_replies is None:
            gen = gen or Generator(model_path(model), None, threads)
            guard_replies = {q: gen.reply(q, 24) for q, _ in GUARD_TASKS}
    finally:
        if gen is not None:
            gen.close()
    guard = sum(answer in guard_replies[q].lower() for q, answer in GUARD_TASKS) / len(GUARD_TASKS)
    for row in rows.values():
        if row["model"] == model:
            row["guard"], row["guard_replies"] = guard, guard_replies
    _write(data)
    return {k: v for k, v in rows.items() if v["model"] == model and v["preference"] in prefs}


def _load() -> dict[str, Any]:
    path = RESULTS / "online_personalization.json"
    return json.loads(path.read_text()) if path.is_file() else {"runs": {}}


def _write(data: dict[str, Any]) -> None:
    write_json("online_personalization", data, out=RESULTS, indent=1, default=str)
    write_markdown("online_personalization", markdown(data), out=RESULTS)


def _merge(result: dict[str, Any]) -> None:
    data = _load()
    data["runs"][result_key(result)] = result
    _write(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.online_personalization", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--preference", default="length",
                        help=f"comma-separated, one run each: {', '.join(PREFERENCES)}")
    parser.add_argument("--learn", "--signal", dest="learn", default="combine",
                        help="comma-separated `ratchet serve --learn` modes, one run each: " + " | ".join(SIGNALS)
                        + " (context: --learn off with the playbook online, a snapshot per pace point)")
    parser.add_argument("--seed", default="0",
                        help="comma-separated seeds, one run each: the user's phrasings, the prompt order and the "
                             "sampling of the conversations")
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--retries", type=int, default=1, help="re-asks after a correction, per conversation")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help=f"reply length of every served and measured reply (default {MAX_TOKENS}; "
                             f"{', '.join(f'{k} {v}' for k, v in MAX_TOKENS_FOR.items())}: checked at the reply's end)")
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling of the conversations (seeded)")
    parser.add_argument("--pace", type=int, default=0,
                        help="after every N conversations wait until the trainer has taken all that is judged "
                             "(0: no pause, conversations back to back)")
    parser.add_argument("--pace-timeout-s", type=float, default=900.0, help="longest such wait")
    parser.add_argument("--label", default=None,
                        help="results key suffix (MODEL/PREFERENCE/SIGNAL/sSEED/LABEL), so a rerun keeps earlier rows")
    parser.add_argument("--gate", choices=("bench", "default"), default="bench",
                        help="the promotion gate's cases: 'bench' gives the server the preference's held-out and "
                             "guard cases (trainer.heldout_path, trainer.gate.*); 'default' sets nothing, so the "
                             "server gates on the share of its own conversations it holds out, as a user's would")
    parser.add_argument("--drain-s", type=float, default=0.0, help="wait this long after the last conversation")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads of the evaluation")
    parser.add_argument("--store", default="bench/runs", help="run store root (a rerun resumes its run)")
    parser.add_argument("--run", default=None, help="run directory name (one run only; default "
                        "MODEL-PREFERENCE-SIGNAL-sSEED)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="extra `ratchet serve --set` overrides")
    parser.add_argument("--base-only", action="store_true",
                        help="only measure the base model on each preference's held-out prompts (no server, "
                             "minutes): how far each preference is from what the model does by itself")
    args = parser.parse_args(argv)
    runs = plan(args)
    if args.base_only:
        for name in dict.fromkeys(p for p, _, _ in runs):
            measure_base(args.model, [name], threads=args.threads, max_tokens=max_tokens_for(args, name))
        return 0
    # A timeout's SIGTERM must still stop the server (the `finally` in run); the run resumes later.
    signals.signal(signals.SIGTERM, lambda *_: sys.exit(143))
    for pref_name, signal, seed in runs:
        result = run(args, pref_name, signal, seed)
        print(json.dumps({k: result[k] for k in ("run", "base_preference", "best_served_preference",
                                                 "final_served_preference", "base_guard", "final_served_guard",
                                                 "first_improvement")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
