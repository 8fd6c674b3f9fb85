"""``contracts.Executor`` on Ray: each unit of work is a Ray task; long-lived loops are actors.

Workers only compute: every result travels back to the driver (through Ray's object store, so a
large one is not copied through the scheduler), and the driver alone writes the run store — no two
machines ever write one SQLite file. A task whose worker or node dies is submitted again, at most
``max_retries`` times; the lost attempt's result never existed for the driver, so nothing it did
is counted twice. Application errors are not retried: they are re-raised here, as the local
executor re-raises them.

``ray`` is imported when an executor or actor is made, not at module import: it is an optional
dependency (the ``ray`` extra) and takes seconds to import.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from ratchet.contracts import RatchetError
from ratchet.executors.config import ExecutorConfig
from ratchet.executors.gateway import ModelGateway
from ratchet.executors.local import Progress
from ratchet.executors.node_server import placement_for
from ratchet.executors.retries import ExecutorStats, OnLost, UnitLost
from ratchet.executors.units import UnitServer

log = logging.getLogger("ratchet.executors.ray")

T = TypeVar("T")
R = TypeVar("R")

#: Ray's errors that mean the attempt's worker, node or result is gone (not that the code failed).
_DEATHS = ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError", "ObjectLostError", "OutOfMemoryError",
           "ActorDiedError")


def import_ray() -> Any:
    try:
        import ray  # deferred: optional and slow to import
    except ImportError as exc:
        raise RatchetError("Ray is not installed", hint="pip install 'ratchet[ray]' (or run with --executor local)") from exc
    return ray


def connect(ray: Any, config: ExecutorConfig) -> bool:
    """Join the configured cluster (or start a private instance); True when this call started Ray
    and so should shut it down. A process already connected keeps its connection."""
    if ray.is_initialized():
        return False
    env = dict(config.runtime_env)
    pythonpath = os.environ.get("PYTHONPATH")
    if pythonpath:
        env["env_vars"] = {"PYTHONPATH": pythonpath, **env.get("env_vars", {})}
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "runtime_env": env or None}
    # "local", not None, for a private instance: with no address Ray joins the cluster named in
    # /tmp/ray/ray_current_cluster, which any `ray start` or test cluster on this machine (another
    # user's, or a stale one) writes, and the run would land there or fail to connect.
    kwargs["address"] = config.address or "local"
    if not config.address and config.local_cpus:
        kwargs["num_cpus"] = config.local_cpus
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RatchetError(f"cannot reach a Ray cluster at {config.address!r}: {exc}".splitlines()[0],
                           hint="start one with `ray start --head` (then --address auto), give its ray://HOST:10001 "
                                "address, or leave --address out for a private instance") from None
    return True


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    # Module level, so the task's process title reads ray::_call and its pickle is by reference.
    return fn(item)


@dataclass(frozen=True)
class _Failed:
    error: BaseException


class RayExecutor:
    """Runs ``fn`` over items as Ray tasks, at most ``workers`` in flight; results in input order.

    ``stats`` counts tasks, lost attempts and retries; ``on_lost(info)`` is called for every lost
    attempt (the engine logs it, ``status`` shows it).
    """

    in_process = False

    def __init__(self, config: ExecutorConfig | None = None, *, progress: Progress | None = None,
                 on_lost: OnLost | None = None) -> None:
        self.config = config or ExecutorConfig(kind="ray")
        self._ray = import_ray()
        self._owns = connect(self._ray, self.config)
        cpus = float(self._ray.cluster_resources().get("CPU", 1.0))
        self.workers = self.config.workers or max(1, int(cpus // self.config.num_cpus))
        self.progress = progress
        self.on_lost = on_lost
        self.stats = ExecutorStats()
        self._deaths = tuple(getattr(self._ray.exceptions, name) for name in _DEATHS if hasattr(self._ray.exceptions, name))
        self.gateways: list[ModelGateway] = []  # those serving now (their model servers' counts in tests)
        self._task = self._ray.remote(_call).options(num_cpus=self.config.num_cpus, num_gpus=self.config.num_gpus,
                                                     max_retries=0)  # retries are ours: counted and bounded

    def map(self, fn: Callable[[T], R], items: Iterable[T], *,
            given_up: Callable[[int, UnitLost], R] | None = None) -> Iterator[R]:
        """``fn`` over ``items``. A unit lost more than ``max_retries`` times raises its
        :class:`UnitLost` here, ending the map, unless ``given_up(index, error)`` is given: then what
        it returns stands in for that unit's result and the other units go on."""
        ray = self._ray
        items = list(items)
        total = len(items)
        if not total:
            return
        fn_ref = ray.put(fn)  # once, not once per task
        attempts = [0] * total
        pending: dict[Any, int] = {}
        results: dict[int, Any] = {}
        submitted = yielded = done = 0

        def submit(i: int) -> None:
            attempts[i] += 1
            pending[self._task.remote(fn_ref, items[i])] = i

        try:
            while yielded < total:
                while submitted < total and len(pending) < self.workers:
                    submit(submitted)
                    submitted += 1
                    self.stats.tasks += 1
                if yielded in results:
                    result = results.pop(yielded)
                    yielded += 1
                    if isinstance(result, _Failed):
                        raise result.error
                    yield result
                    continue
                [ref], _ = ray.wait(list(pending), num_returns=1)
                i = pending.pop(ref)
                try:
                    results[i] = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:  # the code failed: not retried
                    results[i] = _Failed(exc.as_instanceof_cause())
                except self._deaths as exc:
                    if self._lost(i, attempts[i], exc):
                        submit(i)
                        continue
                    lost = UnitLost(i, attempts[i], type(exc).__name__)
                    results[i] = _Failed(lost) if given_up is None else given_up(i, lost)
                done += 1
                self.stats.done += 1
                if self.progress:
                    self.progress(done, total)
        finally:
            for ref in pending:  # the caller stopped early (an error, a budget stop): stop the rest
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001 - already finished or gone
                    pass

    def _lost(self, index: int, attempt: int, exc: BaseException) -> bool:
        """Count a lost attempt; True when it is to be run again."""
        retry = attempt <= self.config.max_retries
        self.stats.lost += 1
        if retry:
            self.stats.retried += 1
        else:
            self.stats.given_up += 1
        log.warning("task %d attempt %d lost (%s)%s", index, attempt, type(exc).__name__, "; retrying" if retry else "")
        if self.on_lost:
            self.on_lost({"index": index, "attempt": attempt, "retried": retry, "error": type(exc).__name__})
        return retry

    def serve(self, server: UnitServer) -> ModelGateway:
        """Serve the driver's model to this executor's units while they run: hand the units the
        gateway's ``model``; close the gateway (or this executor) when done. With
        ``model_server: node`` (``auto``: where they can) the nodes' model servers start (and load the model) here, before
        any unit is submitted."""
        placement = placement_for(self.config, self._ray, server)
        threads = placement.threads(self._ray) or self.config.model_threads
        gateway = ModelGateway(self._ray, server, threads, placement)
        self.gateways.append(gateway)
        return gateway

    def close(self) -> None:
        for gateway in self.gateways:
            gateway.close()
        self.gateways = []
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Actors: long-lived loops (the online judge and trainer) with resource hints
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActorResources:
    """What an actor asks the scheduler for. A model-holding actor asks for its GPU here; a CPU
    trainer asks for as many CPUs as it runs threads, so two never share cores."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    max_concurrency: int = 2  # the loop's blocking ``run`` plus ``stop`` / ``pid`` calls beside it
    max_restarts: int = 0
    """Times Ray restarts the actor when its process dies; the call in flight (a loop's ``run``)
    is retried on the restarted actor as often, so a restarted loop runs again."""


class LoopWorker:
    """One loop inside a Ray actor. ``run`` blocks until ``stop`` is called (the actor is threaded)."""

    def __init__(self, name: str, threads: int) -> None:
        # Set before the loop imports torch or BLAS: OpenMP reads the variables once.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
            os.environ[var] = str(threads)
        logging.basicConfig(level=logging.INFO)
        self.name = name
        self._stop = threading.Event()

    def run(self, target: str, args: tuple[Any, ...]) -> Any:
        """Call ``module:function`` as fn(*args, stop_event); a name, not a function, so the
        actor imports the loop where it runs."""
        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name)(*args, self._stop)

    def stop(self) -> bool:
        self._stop.set()
        return True

    def pid(self) -> int:
        return os.getpid()


def actor_class(cls: type, resources: ActorResources) -> Any:
    """``cls`` as a Ray actor class that asks for ``resources`` (Ray must be connected)."""
    ray = import_ray()
    return ray.remote(max_concurrency=resources.max_concurrency)(cls).options(
        num_cpus=resources.num_cpus, num_gpus=resources.num_gpus, max_restarts=resources.max_restarts,
        max_task_retries=resources.max_restarts)
