"""``contracts.Executor`` over a local process pool.

Processes start with ``forkserver`` (``spawn`` where it is missing): a worker never inherits the
parent's threads, open model handles or half-written files, which ``fork`` would copy. With one
worker the function runs in this process, so an embedded model loaded here is reused rather than
loaded again per process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

from ratchet.executors.local_gateway import LocalGateway
from ratchet.executors.retries import ExecutorStats, UnitLost
from ratchet.executors.units import UnitServer

T = TypeVar("T")
R = TypeVar("R")

Progress = Callable[[int, int], None]


def default_workers() -> int:
    """Usable cores of this process (cgroup/affinity aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _init_worker() -> None:
    # One core per worker: numeric libraries must not spawn a thread per core in every worker.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


class LocalExecutor:
    """Runs ``fn`` over items in up to ``workers`` processes; results come back in input order.

    ``progress(done, total)`` is called in this process as results arrive (in completion order).
    Exceptions raised by ``fn`` are re-raised here when their result is reached. ``stats`` counts
    tasks run (a local worker that dies breaks the pool: there is no node to retry on).
    """

    def __init__(self, workers: int | None = None, *, start_method: str | None = None, progress: Progress | None = None) -> None:
        self.workers = workers or default_workers()
        methods = multiprocessing.get_all_start_methods()
        self.start_method = start_method or ("forkserver" if "forkserver" in methods else "spawn")
        self.progress = progress
        self.stats = ExecutorStats()
        self._pool: ProcessPoolExecutor | None = None
        self._gateways: list[LocalGateway] = []

    @property
    def in_process(self) -> bool:
        """True when work runs in this process (one worker): it may share this process's state."""
        return self.workers <= 1

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context(self.start_method),
                initializer=_init_worker,
            )
        return self._pool

    def map(self, fn: Callable[[T], R], items: Iterable[T], *,
            given_up: Callable[[int, UnitLost], R] | None = None) -> Iterator[R]:
        """``fn`` over ``items``. ``given_up`` is accepted for the Ray executor's sake and never
        called: nothing here is retried, so nothing is given up (a dead pool process is an error)."""
        items = list(items)
        total = len(items)
        self.stats.tasks += total
        if self.workers <= 1 or total <= 1:
            for done, item in enumerate(items, 1):
                result = fn(item)
                self.stats.done += 1
                if self.progress:
                    self.progress(done, total)
                yield result
            return
        pool = self._get_pool()
        futures: list[Future[R]] = [pool.submit(fn, item) for item in items]
        if self.progress:
            counter = {"done": 0}

            def tick(_: Future[R]) -> None:
                counter["done"] += 1
                self.progress(counter["done"], total)  # type: ignore[misc]

            for future in futures:
                future.add_done_callback(tick)
        try:
            for future in futures:
                result = future.result()
                self.stats.done += 1
                yield result
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    def serve(self, server: UnitServer) -> LocalGateway:
        """Serve the driver's model to this pool's units while they run: hand the units the
        gateway's ``model``; close the gateway (or this executor) when done."""
        gateway = LocalGateway(server)
        self._gateways.append(gateway)
        return gateway

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        for gateway in self._gateways:  # after the pool: its last units may still be asking
            gateway.close()
        self._gateways = []

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
