"""``python -m bench [--list] [NAME ...]``: run every benchmark module (or the named ones).

Each benchmark runs in its own process so that one's threads, memory and loaded models never
skew the next one's numbers.
"""

from __future__ import annotations

import argparse
import pkgutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover() -> list[str]:
    """Names of the benchmark modules: every module of this package not starting with ``_``."""
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)]) if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    found = discover()
    if args.list:
        for name in found:
            doc = (__import__(f"bench.{name}", fromlist=["_"]).__doc__ or "").strip().splitlines()
            print(f"{name:32s} {doc[0] if doc else ''}")
        return 0
    unknown = sorted(set(args.names) - set(found))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(found)}", file=sys.stderr)
        return 2
    failures = []
    for name in args.names or found:
        print(f"==> bench.{name}", flush=True)
        start = time.monotonic()
        code = subprocess.call([sys.executable, "-m", f"bench.{name}"], cwd=HERE.parent)
        print(f"<== bench.{name}: exit {code} after {time.monotonic() - start:.0f} s", flush=True)
        if code != 0:
            failures.append(name)
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
