"""What it costs to bring the model calls of remote evaluations back to the driver (the gateway).

Sides, on the same work in the same run: ``inline`` — evaluations in this process, each model call
answered by the run's journaled model directly (the default executor); ``local-2`` — the same
evaluations on a local pool of two processes, each call sent over the local gateway's socket to
the driver (``executors/local_gateway.py``); ``ray-2-driver`` — as Ray tasks on a private two-CPU
instance, each call sent through the relay actor to the driver, which computes it
(``model_server: driver``); ``ray-2`` — the same with the default ``model_server: node``: the
driver's journal answers and accounts each call, and the node's model server (one CPU of the two,
so one task at a time) computes it, a second round trip from the driver. Every side's calls are
accounted and journaled by the same kind of journaled model, in the driver. The model is the scripted
one (no model time), so what is measured is the overhead: calls per second, the round trip a
worker sees per call, and the driver's own time per call (accounting + the fsynced journal
append), which bounds how many workers' calls one driver can answer: with calls of ``L`` ms of
model time spread over ``w`` workers, the driver keeps up while ``w · d < L``.

    python -m bench.model_gateway [--tasks 96]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._results import machine, write_json, write_markdown
from ratchet.contracts import Candidate, Task, TaskResult
from ratchet.evolve.cache import REPLIES, CachedEvaluator, JournaledModel
from ratchet.evolve.suites.synthetic import NoisyOptions, NoisySuite
from ratchet.executors import ExecutorConfig, LocalExecutor
from ratchet.executors.units import ScopedModel
from ratchet.models import ScriptedModel
from ratchet.models.budget import AccountedModel, Accountant
from ratchet.store import RunStore

NAME = "model_gateway"


class AskingSuite(NoisySuite):
    """One model call per task evaluation; the call's latency as the evaluation saw it is a metric."""

    def __init__(self, options: NoisyOptions, model: Any) -> None:
        super().__init__(options)
        self.model = model

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        results = []
        for task in tasks:
            t0 = time.perf_counter()
            reply = self.model.complete([{"role": "user", "content": f"{candidate.id} {task.id} {seed}"}], max_tokens=4)
            results.append(TaskResult(task.id, seed, float(len(reply.text) % 2), "", (),
                                      {"call_ms": (time.perf_counter() - t0) * 1e3}))
        return results


class TimedServer:
    """The journaled model, timing the driver's own work per call."""

    def __init__(self, journal: JournaledModel) -> None:
        self.journal = journal
        self.inner = journal  # what the nodes' model servers copy is found through it
        self.name = journal.name
        self.seconds: list[float] = []

    def complete_for(self, unit, index, messages, **params):
        t0 = time.perf_counter()
        try:
            return self.journal.complete_for(unit, index, messages, **params)
        finally:
            self.seconds.append(time.perf_counter() - t0)


def side(name: str, tasks: int, root: Path) -> dict[str, Any]:
    run = RunStore(root / name).create_run("evolve", {})
    server = TimedServer(JournaledModel(AccountedModel(ScriptedModel(lambda m: "ok"), Accountant()), run))
    executor, gateway, startup = None, None, 0.0
    if name.startswith("ray-2"):
        from ratchet.executors.ray import RayExecutor  # deferred: ray is optional and slow to import

        t0 = time.perf_counter()
        placement = "driver" if name == "ray-2-driver" else "node"
        executor = RayExecutor(ExecutorConfig(kind="ray", local_cpus=2, model_server=placement))
        gateway = executor.serve(server)
        startup = time.perf_counter() - t0
        model = gateway.model
    elif name == "local-2":
        t0 = time.perf_counter()
        executor = LocalExecutor(2)
        gateway = executor.serve(server)
        startup = time.perf_counter() - t0
        model = gateway.model
    else:
        model = ScopedModel(server)
    try:
        suite = AskingSuite(NoisyOptions(tasks=tasks), model)
        evaluator = CachedEvaluator(suite, run, executor=executor)
        evaluator.evaluate(Candidate("warm", "h", {"harness.json": "{}"}), suite.tasks()[:4], 0)  # workers and relay up
        server.seconds.clear()
        t0 = time.perf_counter()
        results = evaluator.evaluate(Candidate("c", "h", {"harness.json": "{}"}), suite.tasks(), 0)
        wall = time.perf_counter() - t0
    finally:
        if executor is not None:
            executor.close()
    journaled = [r for r in run.read_jsonl(REPLIES) if r.get("unit", "").startswith('["c"')]
    assert len(journaled) == tasks  # every call answered and journaled once, by the driver
    return {"startup_s": round(startup, 2), "evaluations_per_s": round(tasks / wall, 1),
            "call_ms_seen_by_evaluation": round(sum(r.metrics["call_ms"] for r in results) / tasks, 3),
            "driver_ms_per_call": round(sum(server.seconds) / len(server.seconds) * 1e3, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.model_gateway", description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=96)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONPATH", os.pathsep.join(sys.path))  # Ray workers import this module
    root = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    sides = {}
    for name in ("inline", "local-2", "ray-2-driver", "ray-2"):
        sides[name] = side(name, args.tasks, root)
        print(name, json.dumps(sides[name]), flush=True)
    base = sides["inline"]
    d = sides["ray-2"]["driver_ms_per_call"]
    out = {"machine": machine(platform=platform.platform()),
           "args": vars(args), "sides": sides,
           "ratio_vs_inline": {n: round(s["evaluations_per_s"] / base["evaluations_per_s"], 2) for n, s in sides.items()},
           "workers_before_the_driver_binds": {f"{latency_ms} ms calls": round(latency_ms / d) for latency_ms in (500, 5000)}}
    write_json(NAME, out)
    write_markdown(NAME, markdown(out))
    print(markdown(out))
    return 0


def markdown(out: dict[str, Any]) -> str:
    lines = [f"# Model calls of remote evaluations, accounted by the driver ({out['machine']['cpus']} CPUs)", "",
             f"{out['args']['tasks']} task evaluations, one scripted model call each (no model time: overhead only). "
             "Ratios against `inline` (in this process) in the same run.", "",
             "| side | start-up s | evaluations/s | × | ms per call seen by the evaluation | driver ms per call |",
             "|---|---|---|---|---|---|"]
    for name, s in out["sides"].items():
        lines.append(f"| {name} | {s['startup_s']} | {s['evaluations_per_s']} | {out['ratio_vs_inline'][name]} | "
                     f"{s['call_ms_seen_by_evaluation']} | {s['driver_ms_per_call']} |")
    w = out["workers_before_the_driver_binds"]
    lines += ["", "Driver ms per call: the driver's own time answering one call (accounting and the fsynced journal "
              "append; for `ray-2`, the wait for the node's model server too: its round trip, as the scripted model "
              "computes in no time, an upper bound on the driver's own work). `ray-2` runs one task at a time: its "
              "node's second CPU is the model server's. With calls of L ms model time, one driver answers the calls "
              "of about L / d workers (d of `ray-2`): "
              + ", ".join(f"{k}: ~{v}" for k, v in w.items())
              + " (extrapolated from this machine's d, not measured on a cluster; the model server binds first).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
