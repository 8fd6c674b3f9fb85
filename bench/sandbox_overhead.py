"""Per-call overhead of the sandbox vs a direct in-process call (target: p50 overhead <= 100 us).

The same trivial ``is_legal_action(board, action)`` is called directly in this process and through
a warm sandbox worker (one round trip per call), alternating in blocks so that load from other
processes on the machine hits both sides alike. Also measured: the per-item cost of ``call_many``
(one round trip for a whole batch) and the time to start a worker and load the code, under
bubblewrap and under the weaker fallbacks. Overhead is the difference of the medians.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings

from bench._results import write_json, write_markdown

HARNESS = """
def is_legal_action(board, action):
    return action in board.split()
"""
HARNESS_NUMPY = "import numpy\n" + HARNESS
BOARD = " ".join(f"[{c}{r}]" for c in "abcdefgh" for r in range(1, 9))  # 64 moves, like a chess list
ACTION = "[h8]"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def time_calls(fn, n: int) -> list[float]:
    out = []
    clock = time.perf_counter_ns
    for _ in range(n):
        start = clock()
        fn()
        out.append((clock() - start) / 1000.0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox_overhead", description=__doc__)
    parser.add_argument("--calls", type=int, default=20000, help="timed single calls per side")
    parser.add_argument("--batch", type=int, default=1000, help="items per call_many batch")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--starts", type=int, default=10, help="worker starts per mechanism")
    parser.add_argument("--out", default="sandbox_overhead")
    args = parser.parse_args(argv)

    from ratchet.sandbox import Sandbox, SandboxConfig, isolation_report

    namespace: dict = {}
    exec(HARNESS, namespace)  # noqa: S102 - our own constant source, the text the sandbox loads
    direct_fn = namespace["is_legal_action"]
    report = isolation_report()
    mechanism = report["mechanism"]

    direct: list[float] = []
    sandboxed: list[float] = []
    with Sandbox({"harness.py": HARNESS}) as sb:
        assert sb.call("is_legal_action", BOARD, ACTION) is True
        block = 500
        for _ in range(200):  # warm-up both paths
            sb.call("is_legal_action", BOARD, ACTION)
            direct_fn(BOARD, ACTION)
        for _ in range(max(1, args.calls // block)):
            direct += time_calls(lambda: direct_fn(BOARD, ACTION), block)
            sandboxed += time_calls(lambda: sb.call("is_legal_action", BOARD, ACTION), block)
        per_item = []
        items = [(BOARD, ACTION)] * args.batch
        for _ in range(args.batches):
            start = time.perf_counter()
            out = sb.call_many("is_legal_action", items)
            per_item.append((time.perf_counter() - start) / args.batch * 1e6)
            assert all(status == "ok" and value is True for status, value in out)

    starts: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("bwrap", "unshare", "none"):
            for label, code in (("plain", HARNESS), ("numpy", HARNESS_NUMPY)):
                try:
                    times = []
                    for _ in range(args.starts):
                        start = time.perf_counter()
                        with Sandbox({"harness.py": code}, config=SandboxConfig(isolation=mode)) as sb:
                            sb.start()
                            times.append((time.perf_counter() - start) * 1000.0)
                except Exception as exc:  # noqa: BLE001 - a missing mechanism is reported, not fatal
                    starts[f"{mode}/{label}"] = {"error": str(exc)}
                    continue
                starts[f"{mode}/{label}"] = {
                    "p50_ms": round(statistics.median(times), 2),
                    "max_ms": round(max(times), 2),
                }

    d50, d99 = percentile(direct, 0.5), percentile(direct, 0.99)
    s50, s99 = percentile(sandboxed, 0.5), percentile(sandboxed, 0.99)
    result = {
        "benchmark": "sandbox_overhead",
        "mechanism": mechanism,
        "calls_per_side": len(direct),
        "direct_us": {"p50": round(d50, 2), "p99": round(d99, 2)},
        "sandbox_us": {"p50": round(s50, 2), "p99": round(s99, 2)},
        "overhead_p50_us": round(s50 - d50, 2),
        "overhead_p99_us": round(s99 - d99, 2),
        "target_overhead_p50_us": 100,
        "meets_target": (s50 - d50) <= 100,
        "call_many_us_per_item": {"p50": round(statistics.median(per_item), 2), "batch": args.batch},
        "worker_start_ms": starts,
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2),
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(args.out, result)
    lines = [
        "# Sandbox per-call overhead",
        "",
        (
            f"Isolation: **{mechanism}**; {len(direct)} calls per side; trivial `is_legal_action` on a "
            f"64-move board; load average {result['machine']['loadavg_1m']} on {os.cpu_count()} CPUs."
        ),
        "",
        "| path | p50 (µs) | p99 (µs) |",
        "|---|---|---|",
        f"| direct in-process call | {d50:.2f} | {d99:.2f} |",
        f"| warm sandbox worker, `call` | {s50:.2f} | {s99:.2f} |",
        f"| **overhead** (difference) | **{s50 - d50:.2f}** | {s99 - d99:.2f} |",
        f"| `call_many`, per item (batch {args.batch}) | {statistics.median(per_item):.2f} | |",
        "",
        f"Target p50 overhead <= 100 µs: {'met' if result['meets_target'] else 'NOT met'}.",
        "",
        "| worker start (construct + start + load) | p50 (ms) | max (ms) |",
        "|---|---|---|",
    ]
    for key, row in starts.items():
        if "error" in row:
            lines.append(f"| {key} | unavailable: {row['error'][:60]} | |")
        else:
            lines.append(f"| {key} | {row['p50_ms']} | {row['max_ms']} |")
    write_markdown(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
