"""Which hinted teacher writes usable targets for the preferences the 0.5B never learned? The served
model's own base (``trainer.teacher_model`` unset) against a stronger model of the same tokenizer.

For each hint that failed through ``ratchet serve`` (German, the user's name, numbered lists;
``bench/results/online_personalization.md``) and the first ``--questions`` training questions of that
preference's pool, the teacher's greedy reply to the question with the hint appended, exactly as the
trainer asks it (:attr:`~ratchet.online.trainer.Trainer.teacher`, ``with_hint``, the student's chat
template). Counted per teacher, hint and length limit: replies that finished (stopped before the
limit), that meet the preference (the simulated user's checker, on the reply as written up to the
limit), both, and what the default trainer would teach (finished and kept by
``teacher_filter=answers``; ``teacher_unfinished=drop``) and how many of those meet the preference.
Each teacher writes once at the longest limit; a shorter limit reads the first tokens of the same
greedy replies (what a run at that limit writes: greedy decoding does not look ahead).

    nice -n 10 python -m bench.online_teacher_probe --teacher local:qwen2.5-coder-1.5b

``--compare-dtypes N,TOKENS`` instead measures ``trainer.teacher_dtype``: the teacher in float32 and
in bfloat16 on the first N of those prompts, greedy to TOKENS tokens and the top-16 along the
replies: time, weights, identical replies, agreement of the top token
(``online_teacher_probe_dtype``).
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Sequence
from typing import Any

from bench._results import machine, write_json, write_markdown
from ratchet.online.preparation import with_hint
from ratchet.online.scoring import chat_ids
from ratchet.online.simulated_user import pools, preference
from ratchet.online.targets import target_filter

#: (preference, hint): the hints whose preference stayed at 0.00 through ``ratchet serve``.
HINTS = (
    ("german", "Answer in German."),
    ("name", "Call me Noor."),
    ("name", "Use my name, Noor."),
    ("numbered", "Use a numbered list."),
)
#: ``--hints all`` adds hints of preferences the 0.5B did learn, so a frame chosen for the failing
#: hints is also seen not to break these (a hint written as the judge would extract it).
MORE_HINTS = (
    ("length", "Keep it to one sentence."),
    ("bullets", "Use a bullet list."),
    ("greeting", "Start your reply with 'Ahoy!'."),
    ("signoff", "End your answer with 'Happy coding!'."),
)


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run(model: str, teachers: list[str], questions: int, limits: list[int], threads: int,
        frames: Sequence[str] = ("append",), hints: Sequence[tuple[str, str]] = HINTS) -> dict[str, Any]:
    from ratchet.online.teacher import ModelTeacher, hinted_teacher
    from ratchet.online.trainer import Trainer, TrainerConfig

    config = TrainerConfig(model=model, convert_gguf=False, kl_samples=0, num_threads=threads)
    started = time.perf_counter()
    trainer = Trainer.from_config(config)
    out: dict[str, Any] = {"model": model, "questions": questions, "limits": limits, "hints": [list(h) for h in hints],
                           "frames": list(frames), "teacher_dtype": config.teacher_dtype,
                           "student_load_s": round(time.perf_counter() - started, 1),
                           "rss_gb_student": round(_rss_gb(), 2), "teachers": {}}
    cases = [(pref, hint, q) for pref, hint in hints for q in pools(pref).train_prompts[:questions]]
    keep = target_filter("answers")
    for spec in teachers:
        started = time.perf_counter()
        teacher = hinted_teacher(trainer, None if spec == "base" else spec, student_name=model,
                                 cache_dir=config.weights_cache_dir, dtype=config.teacher_dtype)
        load_s = time.perf_counter() - started
        # The weights a teacher adds to the trainer's process (the base adds none: it is the student's).
        extra_gb = sum(p.numel() * p.element_size() for p in teacher.model.parameters()) / 2**30 \
            if isinstance(teacher, ModelTeacher) else 0.0
        for frame in frames:
            prompts = [chat_ids(trainer.tokenizer, with_hint([{"role": "user", "content": q}], hint, frame))
                       for _, hint, q in cases]
            started = time.perf_counter()
            replies = teacher.replies(prompts, max(limits))
            write_s = time.perf_counter() - started
            rows = []
            for (pref, hint, q), reply in zip(cases, replies, strict=True):
                row: dict[str, Any] = {"preference": pref, "hint": hint, "question": q}
                ids = reply.ids
                for limit in limits:
                    # Finished within ``limit``: the stop token is the limit-th new token at the latest.
                    finished = reply.stop is not None and len(ids) < limit
                    text = str(trainer.tokenizer.decode(ids[:limit], skip_special_tokens=True))
                    met = preference(pref).check(text)
                    row[str(limit)] = {"finished": finished, "met": met, "answers": keep.keep(text), "text": text}
                rows.append(row)
            # One label per teacher and frame; the default frame keeps the teacher's bare name, as before.
            label = spec if frame == "append" else f"{spec} [{frame}]"
            out["teachers"][label] = {"load_s": round(load_s, 1), "write_s": round(write_s, 1),
                                      "weights_gb": round(extra_gb, 2), "rss_gb_after": round(_rss_gb(), 2),
                                      "replies": rows}
            print(label, f"load {load_s:.0f}s write {write_s:.0f}s rss {_rss_gb():.1f} GB", flush=True)
        del teacher
    out["machine"] = machine(threads=threads)
    return out


def compare_dtypes(model: str, spec: str, prompts_n: int, tokens: int, threads: int) -> dict[str, Any]:
    """The ``spec`` teacher in float32 and in bfloat16, through the trainer's loader, on the same prompts."""
    from ratchet.online.teacher import hinted_teacher
    from ratchet.online.trainer import Trainer, TrainerConfig

    config = TrainerConfig(model=model, convert_gguf=False, kl_samples=0, num_threads=threads)
    trainer = Trainer.from_config(config)
    cases = [(hint, q) for pref, hint in HINTS for q in pools(pref).train_prompts[:2]][:prompts_n]
    prompts = [chat_ids(trainer.tokenizer, with_hint([{"role": "user", "content": q}], h)) for h, q in cases]
    runs: dict[str, Any] = {}
    for dtype in ("float32", "bfloat16"):
        teacher = hinted_teacher(trainer, spec, student_name=model, dtype=dtype)
        started = time.perf_counter()
        replies = teacher.replies(prompts, tokens)
        greedy_s = time.perf_counter() - started
        started = time.perf_counter()
        topk = teacher.topk([p + r.ids for p, r in zip(prompts, replies, strict=True)], [len(p) for p in prompts], 16)
        runs[dtype] = {"weights_gb": round(sum(p.numel() * p.element_size() for p in teacher.model.parameters()) / 2**30, 2),
                       "greedy_s": round(greedy_s, 1), "topk_s": round(time.perf_counter() - started, 1),
                       "replies": [r.ids for r in replies], "topk": topk}
        del teacher
    a, b = runs["float32"], runs["bfloat16"]
    agree = total = 0
    worst = 0.0
    for ra, rb, (va, ia), (vb, ib) in zip(a["replies"], b["replies"], a["topk"], b["topk"], strict=True):
        # Positions are comparable up to where the two greedy replies part.
        same = next((i for i, (x, y) in enumerate(zip(ra, rb, strict=False)) if x != y), min(len(ra), len(rb)))
        agree += int((ia[:same, 0] == ib[:same, 0]).sum())
        total += same
        if same:
            worst = max(worst, float((va[:same, 0] - vb[:same, 0]).abs().max()))
    for run in runs.values():
        del run["topk"]
    return {"model": model, "teacher": spec, "prompts": len(prompts), "tokens": tokens,
            "identical_replies": sum(x == y for x, y in zip(a["replies"], b["replies"], strict=True)),
            "top1_agree": agree, "top1_positions": total, "top1_logprob_max_diff": round(worst, 3),
            "runs": runs, "machine": machine(threads=threads)}


def dtype_markdown(r: dict[str, Any], command: str) -> str:
    rows = "\n".join(f"| {dtype} | {run['weights_gb']} | {run['greedy_s']} | {run['topk_s']} |"
                      for dtype, run in r["runs"].items())
    return f"""# The teacher_model in float32 and in bfloat16 ({r['teacher']})

`{command}`

The first {r['prompts']} hinted prompts of the teacher probe, greedy to {r['tokens']} tokens, then the top-16 along
those replies (one forward), through the trainer's loader (`trainer.teacher_dtype`). bfloat16 against
float32: {r['identical_replies']} of {r['prompts']} greedy replies identical; the top token the same at
{r['top1_agree']} of {r['top1_positions']} positions (up to where the replies part); the top token's
log-prob differs by at most {r['top1_logprob_max_diff']}. One run, {r['machine']['threads']} torch thread(s), on a
machine shared with other jobs.

| dtype | weights GB | greedy s | top-k s |
|---|---|---|---|
{rows}
"""


def _counts(rows: list[dict[str, Any]], limit: int) -> tuple[int, ...]:
    """finished, meets, both; taught under ``teacher_unfinished=drop`` (finished and kept by
    ``teacher_filter=answers``) and of those meeting it; the same under ``prefix`` (kept, cut or not)."""
    cells = [r[str(limit)] for r in rows]
    drop = [c for c in cells if c["finished"] and c["answers"]]
    prefix = [c for c in cells if c["answers"]]
    return (sum(c["finished"] for c in cells), sum(c["met"] for c in cells),
            sum(c["met"] and c["finished"] for c in cells), len(drop), sum(c["met"] for c in drop),
            len(prefix), sum(c["met"] for c in prefix))


def markdown(r: dict[str, Any], command: str) -> str:
    n = r["questions"]
    lines = [
        "# The hinted teacher: the served 0.5B's own base against a stronger model of its tokenizer",
        "",
        f"`{command}`",
        "",
        (f"The teacher's greedy reply to each of the first {n} training questions of the preference's pool with "
         "the hint joined to the question (appended, or as the teacher's label says: `trainer.hint_frame`), as the trainer asks it (`Trainer.teacher`, `with_hint`, the student's "
         "chat template). Per teacher, hint and `teacher_max_tokens`: replies that **finished** before the limit, "
         "that **meet** the preference (the simulated user's checker, on the reply as written up to the limit), "
         "**both**; what the default trainer **teaches** (`teacher_unfinished=drop`: finished and kept by "
         "`teacher_filter=answers`) and how many of those meet it; the same under `teacher_unfinished=prefix` "
         "(kept by the filter, cut or not; a cut one is taught without an end). The 48 limit reads the first 48 "
         "tokens of the same greedy replies as 96. One run, greedy (no seed involved)."),
        "",
        ("| teacher | preference | hint | limit | finished | meets | both | drop: taught | drop: taught, meets "
         "| prefix: taught | prefix: taught, meets |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for spec, t in r["teachers"].items():
        for pref, hint in r["hints"]:
            rows = [x for x in t["replies"] if x["hint"] == hint]
            for limit in r["limits"]:
                cells = " | ".join(f"{c}/{n}" for c in _counts(rows, limit))
                lines.append(f"| {spec} | {pref} | {hint} | {limit} | {cells} |")
    lines += ["", f"Totals over the {len(r['hints'])} hints:", "",
              ("| teacher | limit | finished | meets | both | drop: taught | drop: taught, meets | prefix: taught "
               "| prefix: taught, meets | write s | weights added GB |"),
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    total = n * len(r["hints"])
    for spec, t in r["teachers"].items():
        for limit in r["limits"]:
            cells = " | ".join(f"{c}/{total}" for c in _counts(t["replies"], limit))
            lines.append(f"| {spec} | {limit} | {cells} | {t['write_s']} | {t['weights_gb']} |")
    peak = r["teachers"][list(r["teachers"])[-1]]["rss_gb_after"]
    lines += ["", (f"Write s: one greedy batch of {total} replies to {max(r['limits'])} tokens, "
                   f"{r['machine']['threads']} torch thread(s), on a machine shared with other jobs. Weights added: "
                   "the teacher's parameters in the trainer's process (fp32; the base adds none, it is the student's "
                   f"own). Peak RSS of the probe: {peak} GB (pages of the embedding table never read are not "
                   "resident)."), "",
              ("The name checker accepts any reply with the word Noor in it, so one that role-plays the hint "
               "(\"Noor is a Python list.\") meets it: read the name rows with the replies below."), "",
              "## The replies (first question of each hint, up to the longest limit)", ""]
    for spec, t in r["teachers"].items():
        for pref, hint in r["hints"]:
            x = next(x for x in t["replies"] if x["hint"] == hint)
            text = x[str(max(r["limits"]))]["text"].replace("\n", " / ").replace("|", "\\|")
            lines.append(f"- {spec}, \"{hint}\" — {x['question']!r}: {text[:300]!r}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="the served model (the student)")
    parser.add_argument("--teacher", action="append", default=None,
                        help="a trainer.teacher_model to compare with the base (repeatable)")
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--limits", default="48,96", help="teacher_max_tokens values, comma-separated")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--frames", default="append",
                        help="trainer.hint_frame values to compare, comma-separated: append, before, aside")
    parser.add_argument("--hints", choices=("failing", "all"), default="failing",
                        help="the hints of the preferences that failed, or those plus hints of learned ones")
    parser.add_argument("--no-base", action="store_true", help="leave the served model's own base out")
    parser.add_argument("--name", default="online_teacher_probe")
    parser.add_argument("--compare-dtypes", default=None, metavar="N,TOKENS",
                        help="measure the teacher in float32 against bfloat16 on N prompts, TOKENS tokens")
    args = parser.parse_args()
    parser_teachers = args.teacher or ["local:qwen2.5-coder-1.5b"]
    teachers = parser_teachers if args.no_base else ["base", *parser_teachers]
    if args.compare_dtypes:
        n, tokens = (int(x) for x in args.compare_dtypes.split(","))
        result = compare_dtypes(args.model, parser_teachers[0], n, tokens, args.threads)
        name = f"{args.name}_dtype"
        write_json(name, result)
        write_markdown(name, dtype_markdown(
            result, f"nice -n 10 python -m bench.online_teacher_probe --teacher {parser_teachers[0]} --compare-dtypes {n},{tokens}"))
        return
    limits = sorted(int(x) for x in args.limits.split(","))
    frames = args.frames.split(",")
    result = run(args.model, teachers, args.questions, limits, args.threads, frames,
                 HINTS + MORE_HINTS if args.hints == "all" else HINTS)
    write_json(args.name, result)
    command = "nice -n 10 python -m bench.online_teacher_probe " + " ".join(
        f"--teacher {t}" for t in parser_teachers) + f" --questions {args.questions} --limits {args.limits}" + (
        " --no-base" if args.no_base else "") + (
        f" --frames {args.frames} --hints {args.hints} --name {args.name}" if args.frames != "append" else "")
    write_markdown(args.name, markdown(result, command))


if __name__ == "__main__":
    main()
