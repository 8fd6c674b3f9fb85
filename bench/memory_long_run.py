"""Memory of a long scripted run: RSS sampled over a long AutoHarness search and over a long stream
of run-store writes, with the slope of a least-squares line through the samples after warm-up.

The search is the real one, on the engine (TextArena TicTacToe, every candidate in its own bubblewrap sandbox,
every candidate and evaluation written to a run store) with a scripted refiner that never
solves the game, so it runs every iteration. The store part appends trajectory and step records
(the writers buffer nothing). The baseline is the RSS right after warm-up in the same run; the
report gives the slope per unit of work and the final RSS as a ratio of that baseline.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

from bench._results import write_json, write_markdown
from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import game_description, run_on_engine
from ratchet.models import ScriptedModel
from ratchet.sandbox import isolation_report
from ratchet.store import RunStore

WARMUP = 0.2  # the first fifth of the samples is warm-up (imports, caches, the first workers)


def rss_kib() -> int:
    """Resident set size of this process, from /proc (KiB)."""
    text = Path("/proc/self/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", text, re.MULTILINE).group(1))


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def harness(n: int) -> str:
    """A harness that is legal-ish but never perfect: it proposes cell n % 9 and accepts anything."""
    return (f"```python\n# v{n}\ndef propose_action(board):\n    return '[{n % 9}]'\n\n"
            "def is_legal_action(board, action):\n    return True\n```")


def search_part(iterations: int, root: Path) -> dict:
    counter = iter(range(1, 10**9))
    model = ScriptedModel(lambda messages: harness(next(counter)))
    cfg = AutoHarnessConfig(method="faithful", iterations=iterations, eval_steps=20, search_seeds=[0, 1],
                            heldout_seeds=[50], rng_seed=1, library_dir=str(root / "library"),
                            budget={"max_calls": iterations + 10, "max_tokens": 10**9, "max_wall_s": 10**6})
    run = RunStore(root / "runs").create_run("autoharness", cfg.model_dump(), "memory")
    samples: list[tuple[float, float]] = []

    def progress(event: dict) -> None:
        if event.get("kind") == "step":
            samples.append((float(len(samples) + 1), float(rss_kib())))

    started = time.perf_counter()
    summary = run_on_engine(cfg, model, run, description=game_description(cfg.env), on_event=progress)
    return _summary(samples, "iteration", time.perf_counter() - started,
                    {"iterations": len(samples), "stop": summary["state"], "nodes": len(run.candidates())})


def store_part(records: int, root: Path) -> dict:
    run = RunStore(root / "store").create_run("serve", {}, "memory-store")
    trajectories = run.trajectory_writer("chat")
    messages = [{"role": "user", "content": "a question " * 20}, {"role": "assistant", "content": "an answer " * 40}]
    samples: list[tuple[float, float]] = []
    started = time.perf_counter()
    for i in range(records):
        trajectories.write(messages, turn=i, session_id=f"s-{i % 50}")
        if i % max(1, records // 200) == 0:
            samples.append((float(i), float(rss_kib())))
    return _summary(samples, "record", time.perf_counter() - started, {"records": records})


def _summary(samples: list[tuple[float, float]], unit: str, wall_s: float, extra: dict) -> dict:
    steady = samples[int(len(samples) * WARMUP):]
    baseline = steady[0][1]
    per_unit = slope(steady)
    return {
        **extra,
        "unit": unit,
        "samples": len(samples),
        "wall_s": round(wall_s, 1),
        "rss_start_kib": samples[0][1],
        "rss_baseline_kib": baseline,
        "rss_final_kib": samples[-1][1],
        "final_over_baseline": round(samples[-1][1] / baseline, 3),
        f"slope_kib_per_{unit}": round(per_unit, 3),
        f"slope_kib_per_1000_{unit}s": round(per_unit * 1000, 1),
        "rss_trace": [(int(x), int(y)) for x, y in samples[:: max(1, len(samples) // 40)]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_long_run", description=__doc__)
    parser.add_argument("--iterations", type=int, default=300, help="search iterations (one candidate each)")
    parser.add_argument("--records", type=int, default=5000, help="trajectory records written (each one fsynced)")
    parser.add_argument("--out", default="memory_long_run")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ratchet-memory-", dir="/var/tmp") as tmp:
        search = search_part(args.iterations, Path(tmp))
        store = store_part(args.records, Path(tmp))
    results = {"machine": platform.machine(), "python": sys.version.split()[0],
               "sandbox": isolation_report()["mechanism"], "search": search, "store": store}
    write_json(args.out, results)
    s, w = search, store
    md = [
        "# Memory over a long scripted run",
        "",
        f"`python -m bench.memory_long_run --iterations {args.iterations} --records {args.records}` "
        f"(sandbox: {results['sandbox']}). RSS of the process running the search (the sandbox workers are "
        "separate processes); slope of a least-squares line after the first fifth of the samples; "
        "baseline = RSS right after that warm-up.",
        "",
        "| part | work | wall s | RSS baseline MiB | RSS final MiB | final / baseline | slope |",
        "|---|---|---|---|---|---|---|",
        f"| AutoHarness search | {s['iterations']} iterations, {s['nodes']} nodes | {s['wall_s']} | "
        f"{s['rss_baseline_kib'] / 1024:.1f} | {s['rss_final_kib'] / 1024:.1f} | {s['final_over_baseline']} | "
        f"{s['slope_kib_per_iteration']} KiB / iteration |",
        f"| trajectory writes | {w['records']} records | {w['wall_s']} | {w['rss_baseline_kib'] / 1024:.1f} | "
        f"{w['rss_final_kib'] / 1024:.1f} | {w['final_over_baseline']} | {w['slope_kib_per_1000_records']} KiB / 1000 records |",
    ]
    text = "\n".join(md) + "\n"
    write_markdown(args.out, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
