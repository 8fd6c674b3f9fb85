"""An engine run on a Ray cluster driven from its own process, so that a test can SIGKILL the driver.

usage: python ray_driver.py ADDRESS STORE WORKSPACE ID_FILE PAID_LOG ITERATIONS
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE), str(HERE.parent / "evolve")]  # calling_run, slow_suite; doubles

import calling_run  # noqa: E402

from ratchet.evolve.loop import Engine  # noqa: E402
from ratchet.executors import ExecutorConfig  # noqa: E402
from ratchet.executors.ray import RayExecutor  # noqa: E402
from ratchet.store import RunStore  # noqa: E402


def main() -> None:
    address, store, ws, id_file, paid_log, iterations = sys.argv[1:]
    cfg = calling_run.config(Path(ws), iterations=int(iterations))
    run = RunStore(store).create_run("evolve", cfg)
    Path(id_file).write_text(run.id)
    executor = RayExecutor(ExecutorConfig(kind="ray", address=address))
    Engine(cfg, run, calling_run.model(Path(paid_log)), executor=executor).execute()


if __name__ == "__main__":
    main()
