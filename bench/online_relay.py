"""What a call of the online loops costs when it goes through the relay to the serving process.

The judge and trainer actors of ``ratchet serve --learn … --executor ray`` reach the session queue
through the serving process (``online/relayed.py``): a call goes from the actor to the relay
actor, from there to a thread of the serving process, which answers it on its own SQLite queue,
and back. Two sides on the same work, in the same run:

- ``in-process``: the calls made directly on a :class:`TurnQueue` in this process (what a loop
  of the default ``executor=process`` does, on the queue file);
- ``relayed``: the same calls made by a Ray task on a private two-CPU instance through a
  :class:`RelayedQueue` (what a loop on a Ray actor does).

The work is the loops' own calls: ``stats`` (a read), a judging cycle (``turns_to_judge`` of one
turn, then ``add_judgement``: a claim and a write) and a training claim (``take_batch`` of 8, then
``mark_trained``). Also timed: a file of ``--mb`` MiB sent in chunks through the relay (how the
trainer's model reaches a node without it) against the same chunked copy in process. The judge is
the rule judge (no model): what is measured is the relay's overhead, not judging.

    python -m bench.online_relay [--turns 96] [--stats 200] [--mb 64]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ratchet.executors.files import FileServer, receive
from ratchet.online.judge import build_judge
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Turn

from bench._results import write_json, write_markdown
NAME = "online_relay"


def filled_queue(path: Path, turns: int) -> TurnQueue:
    queue = TurnQueue(path)
    for i in range(turns):
        queue.add_turn(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": f"question {i}"}], f"answer {i}",
                            [1, 2, 3], [4, 5], [-0.3, -0.2], 0, created_at=1000.0 + i))
        queue.set_next_state(f"t{i}", "thanks!" if i % 2 else "no, that's wrong")
    return queue


def work(queue: Any, turns: int, stats: int) -> dict[str, list[float]]:
    """The loops' calls on ``queue`` (a TurnQueue or a RelayedQueue), each timed, in ms."""
    judge = build_judge("rule", learn="binary")
    times: dict[str, list[float]] = {"stats": [], "judging cycle": [], "training claim": []}  # 1, 2 and 2 calls

    def timed(kind: str, fn: Any) -> Any:
        t0 = time.perf_counter()
        out = fn()
        times[kind].append((time.perf_counter() - t0) * 1e3)
        return out

    for _ in range(stats):
        timed("stats", queue.stats)
    for _ in range(turns):
        def cycle() -> None:
            for turn, next_state in queue.turns_to_judge(1):
                queue.add_judgement(judge.judge(turn, next_state))
        timed("judging cycle", cycle)
    for _ in range(turns // 8):
        def claim() -> None:
            batch = queue.take_batch(8)
            queue.mark_trained([s.turn.turn_id for s in batch], 1)
        timed("training claim", claim)
    assert queue.stats()["trained"] == turns // 8 * 8  # the work was done, on whichever side
    return times


def warm_up(queue: Any) -> None:
    for _ in range(5):
        queue.stats()


def receive_timed(sent: Any, read: Any, root: str) -> float:
    t0 = time.perf_counter()
    path = receive(sent, read, Path(root))
    seconds = time.perf_counter() - t0
    assert path.stat().st_size == sent.size
    return seconds


def relayed_receive(sent: Any, relay: Any, root: str) -> float:
    from ratchet.online.relayed import SentInputs  # the trainer's own reader: chunks through the relay

    return receive_timed(sent, SentInputs(relay)._read, root)


def summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    out = {}
    for kind, values in times.items():
        ordered = sorted(values)
        out[kind] = {"calls": len(values), "mean_ms": round(sum(values) / len(values), 3),
                     "median_ms": round(ordered[len(ordered) // 2], 3)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.online_relay", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=96)
    parser.add_argument("--stats", type=int, default=200)
    parser.add_argument("--mb", type=int, default=64)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-relay-"))
    blob = root / "model.gguf"
    blob.write_bytes(os.urandom(args.mb << 20))

    here = summary(work(filled_queue(root / "here.db", args.turns), args.turns, args.stats))
    server = FileServer()
    sent = server.offer(blob)
    copy_here_s = receive_timed(sent, server.chunk, str(root / "cache-here"))

    import ray  # deferred: optional and slow to import

    from ratchet.online.relayed import StoreGateway

    t0 = time.perf_counter()
    path = os.pathsep.join(p for p in (str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")) if p)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        filled_queue(root / "relayed.db", args.turns).close()
        stores = StoreGateway(ray, root / "relayed.db", root / "v")
        startup = time.perf_counter() - t0
        ray.get(ray.remote(warm_up).remote(stores.queue))  # the worker and the relay up
        relayed = summary(ray.get(ray.remote(work).remote(stores.queue, args.turns, args.stats)))
        sent_there = stores.files.offer(blob)
        copy_relayed_s = ray.get(ray.remote(relayed_receive).remote(sent_there, stores.relay, str(root / "cache-there")))
        stores.close()
    finally:
        ray.shutdown()
    out = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                       "load_avg": [round(x, 2) for x in os.getloadavg()]},
           "args": vars(args), "ray_startup_s": round(startup, 1), "in_process": here, "relayed": relayed,
           "ratio_relayed_vs_in_process": {k: round(relayed[k]["mean_ms"] / here[k]["mean_ms"], 1) for k in here},
           "relay_overhead_ms": {k: round(relayed[k]["mean_ms"] - here[k]["mean_ms"], 2) for k in here},
           "file": {"mib": args.mb, "in_process_mib_per_s": round(args.mb / copy_here_s, 1),
                    "relayed_mib_per_s": round(args.mb / copy_relayed_s, 1),
                    "ratio": round(copy_here_s / copy_relayed_s, 3)}}
    write_json(NAME, out)
    write_markdown(NAME, markdown(out))
    print(markdown(out))
    return 0


def markdown(out: dict[str, Any]) -> str:
    a = out["args"]
    lines = [f"# The online loops' queue calls through the relay ({out['machine']['cpus']} CPUs, "
             f"load average {out['machine']['load_avg'][0]} at the end)", "",
             f"{a['stats']} `stats`, {a['turns']} judging cycles, {a['turns'] // 8} training claims of 8, on a queue of "
             f"{a['turns']} answered turns; the rule judge (no model). `relayed`: a Ray task on a private two-CPU "
             f"instance (start-up {out['ray_startup_s']} s) through the relay to this process. Same run, same work.", "",
             "A judging cycle and a training claim are two calls each (take, then write back).", "",
             "| work | in process, ms | relayed, ms | × | relay's cost per unit of work, ms |", "|---|---|---|---|---|"]
    for kind, here in out["in_process"].items():
        there = out["relayed"][kind]
        lines.append(f"| {kind} | {here['mean_ms']} (median {here['median_ms']}) | {there['mean_ms']} "
                     f"(median {there['median_ms']}) | {out['ratio_relayed_vs_in_process'][kind]} | "
                     f"{out['relay_overhead_ms'][kind]} |")
    f = out["file"]
    lines += ["", f"A {f['mib']} MiB file in 8 MiB chunks (how the trainer's model reaches a node without it): "
              f"{f['relayed_mib_per_s']} MiB/s through the relay, {f['in_process_mib_per_s']} MiB/s copied in "
              f"process with the same chunked, hashed code ({f['ratio']}× of it).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
