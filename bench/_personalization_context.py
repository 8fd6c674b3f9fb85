"""The personalization bench's ``--learn context`` mode: the same simulated user through
``ratchet serve --learn off --set context.online=true`` (no trainer; the judge loop's learner keeps
a playbook that every served prompt gets), measured like the weight versions.

At each pace point (and after the last conversation) the served playbook is copied as a snapshot
with its item count, its tokens and the learning cost so far (the reflector/curator calls and
seconds the learner wrote beside the playbook, ``<playbook>.steps.jsonl``). After the
conversations every snapshot is measured as a version is: held-out preference share and guard,
greedy, base weights, each prompt passed through ``served_messages`` with the server's own
context config (read from the config the server wrote) and encoder, so the prompt measured is the
prompt the server would serve with that playbook. Snapshot 0 is the empty playbook: the base.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ratchet.context.online import ServeContext, playbook_path, served_messages, steps_path
from ratchet.context.playbook import Playbook
from ratchet.context.roles import playbook_tokens
from ratchet.online.simulated_user import GUARD_TASKS, pools

SIGNAL = "context"
PLAYBOOKS = "playbooks"
"""The snapshots' folder under the run's ``bench/`` directory."""
SERVE_ARGS = ["--learn", "off", "--set", "context.online=true"]
"""What ``--learn context`` asks the server: training off, the playbook learned and served."""

#: A reply of the measured model to one prompt's messages, at a reply budget (greedy).
Reply = Callable[[list[dict[str, Any]], int], str]


class Generator(Protocol):
    """The greedy base-weights generator (the bench's ``Generator``; a fake in tests)."""

    def chat(self, messages: list[dict[str, Any]], max_tokens: int) -> str: ...

    def close(self) -> None: ...


def serve_context(online_dir: Path) -> tuple[ServeContext, Path]:
    """The context config the server ran with (its ``config.json``) and its playbook file."""
    from ratchet.online.config import OnlineConfig

    config = OnlineConfig.model_validate_json((online_dir / "config.json").read_text())
    return config.context, playbook_path(config.context, online_dir)


def steps(playbook: Path) -> list[dict[str, Any]]:
    """The learner's lines so far, one per learning step (its cost; ``error`` on a failed one)."""
    path = steps_path(playbook)
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def unlearned(queue_path: Path, playbook: Path) -> int:
    """Turns the judge and its learner still owe: turns with their next state not yet judged, and
    decided judgements of the judge loop (the only ones its learner sees) with no step line yet."""
    with sqlite3.connect(f"file:{queue_path}?mode=ro", uri=True, timeout=30) as db:
        ready = db.execute("SELECT COUNT(*) FROM turns WHERE state='ready'").fetchone()[0]
        decided = db.execute("SELECT COUNT(*) FROM judgements WHERE reward != 0 AND "
                             "COALESCE(json_extract(data, '$.source'), 'judge') = 'judge'").fetchone()[0]
    return int(ready + max(0, decided - len(steps(playbook))))


def wait_learned(online_dir: Path, timeout_s: float, poll_s: float = 5.0) -> None:
    """The user comes back once what it said is in the playbook (or at the timeout)."""
    from ratchet.online.status import QUEUE_NAME

    queue_path, (_, playbook) = online_dir / QUEUE_NAME, serve_context(online_dir)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and queue_path.is_file() and unlearned(queue_path, playbook):
        time.sleep(poll_s)


def snapshot(playbook: Path, into: Path, conversations: int, elapsed_s: float) -> dict[str, Any]:
    """Copy the served playbook to ``into/NNN.md`` (NNN: the conversations so far) with its size and
    the learning cost so far; the file is rewritten from its parse, so a copy never holds half a write."""
    book = Playbook.load(playbook)
    into.mkdir(parents=True, exist_ok=True)
    dest = into / f"{conversations:03d}.md"
    book.save(dest)
    done = steps(playbook)
    return {"file": dest.name, "conversations": conversations, "elapsed_s": round(elapsed_s, 1),
            "items": len(book), "tokens": playbook_tokens(book), "steps": sum(s.get("taught", True) for s in done),
            "failed_steps": sum(bool(s.get("error")) for s in done),
            "calls": sum(s.get("calls", 0) for s in done), "model_s": round(sum(s.get("model_s", 0.0) for s in done), 2),
            "learn_wall_s": round(sum(s.get("wall_s", 0.0) for s in done), 2)}


def measure_snapshot(reply: Reply, pref: Any, playbook: Path, config: ServeContext, embedder: Any,
                     max_tokens: int) -> dict[str, Any]:
    """Held-out preference share and guard with ``playbook`` served, as :func:`evaluate_version`
    measures a weight version: the same prompts and budgets, each through ``served_messages``."""
    def served(q: str) -> list[dict[str, Any]]:
        return served_messages([{"role": "user", "content": q}], playbook, config, embedder)

    heldout = {q: reply(served(q), max_tokens) for q in pools(pref.name).heldout_prompts}
    guard = {q: reply(served(q), 24) for q, _ in GUARD_TASKS}
    met = [pref.check(r) for r in heldout.values()]
    correct = [answer in guard[q].lower() for q, answer in GUARD_TASKS]
    return {"preference": sum(met) / len(met), "guard": sum(correct) / len(correct),
            "heldout_replies": heldout, "guard_replies": guard}


def rows(state: dict[str, Any], bench_dir: Path, online_dir: Path, pref: Any, generator: Callable[[], Generator],
         max_tokens: int, save: Callable[[], None]) -> list[dict[str, Any]]:
    """One row per snapshot (``version``: its index, 0 the empty playbook = the base), each measured
    once (``state["evaluated"]["pN"]``, saved after each: a killed measurement resumes).
    ``generator()`` loads the model when the first unmeasured snapshot needs it."""
    config, _ = serve_context(online_dir)
    embedder = None
    cache = state.setdefault("evaluated", {})
    out = [{"version": 0, "promoted": True, "conversations": 0, "elapsed_s": 0.0, "items": 0, "tokens": 0,
            "calls": 0, "model_s": 0.0, "learn_wall_s": 0.0, **{k: state["base"][k] for k in ("preference", "guard")}}]
    gen: Generator | None = None
    try:
        for n, snap in enumerate(state.get("snapshots", []), 1):
            key = snapshot_key(n)
            if key not in cache:
                if snap["items"] == 0:  # nothing to serve: the prompt is the base's
                    cache[key] = {k: state["base"][k] for k in ("preference", "guard", "heldout_replies",
                                                                 "guard_replies")}
                else:
                    if embedder is None:
                        from ratchet.context.online import serve_embedder

                        embedder = serve_embedder(config)
                    gen = gen or generator()
                    print(f"measuring playbook snapshot {n} ({snap['items']} items)", flush=True)
                    cache[key] = measure_snapshot(gen.chat, pref, bench_dir / PLAYBOOKS / snap["file"], config,
                                                  embedder, max_tokens)
                save()
            out.append({"version": n, "promoted": True, **{k: v for k, v in snap.items() if k != "file"},
                        "playbook": snap["file"], "preference": cache[key]["preference"], "guard": cache[key]["guard"]})
    finally:
        if gen is not None:
            gen.close()
    return out


def snapshot_key(n: int) -> str:
    """Snapshot ``n``'s key in the run state's measurements (apart from the weight versions' numbers)."""
    return f"p{n}"


def note(state: dict[str, Any], online_dir: Path, bench_dir: Path, conversations: int, elapsed_s: float) -> None:
    """Snapshot the served playbook at ``conversations`` unless one was taken there already."""
    snaps = state.setdefault("snapshots", [])
    if not snaps or snaps[-1]["conversations"] != conversations:
        _, playbook = serve_context(online_dir)
        snaps.append(snapshot(playbook, bench_dir / PLAYBOOKS, conversations, elapsed_s))


def pace_point(state: dict[str, Any], online_dir: Path, bench_dir: Path, conversations: int, started: float,
               timeout_s: float) -> None:
    """Wait until what the user said is learned (or ``timeout_s``), then snapshot the playbook;
    ``state["elapsed_s"]`` counts the wait, as the weight runs' pace does."""
    wait_learned(online_dir, timeout_s)
    state["elapsed_s"] = time.time() - started
    note(state, online_dir, bench_dir, conversations, state["elapsed_s"])
