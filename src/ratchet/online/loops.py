"""Starting and stopping the loops: judging and training beside the serving process.

The loops share only the queue and the version store, so each can run anywhere that reaches them:
as local processes on the two paths (``spawn``, each with its own pinned thread count, the
default) or as Ray actors (``executor=ray``; the same loop functions, one actor each), which reach
them through the serving process (:mod:`ratchet.online.relayed`) and so need no shared disk.
Serving stays in the process that runs uvicorn. A stop signal ends each loop between two units of
work; Ctrl-C in the terminal reaches the parent only (children ignore SIGINT) so shutdown is always
orderly. Local processes are supervised (:mod:`ratchet.online.supervision`): restarted when they
die, stopped when the server dies, never waited on forever.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing as mp
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ratchet.executors.ray import ActorResources, LoopWorker, actor_class
from ratchet.online.config import OnlineConfig
from ratchet.online.queue import open_queue
from ratchet.online.relayed import SentInputs, StoreGateway
from ratchet.online.status import LOOPS_NAME
from ratchet.online.supervision import RestartPolicy, StopSignal, Supervisor, die_with_parent

log = logging.getLogger("ratchet.online.loops")

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS")


def pin_threads(n: int) -> None:
    """Limit this process to ``n`` compute threads (BLAS/OpenMP now, torch if already imported).

    Call before heavy imports: OpenMP reads the variables once. On two cores two processes with
    two threads each slowed decoding about eight-fold.
    """
    for name in THREAD_ENV:
        os.environ[name] = str(n)
    torch = __import__("sys").modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)


def resolve(target: str) -> Callable[..., Any]:
    """``package.module:function`` -> the function."""
    module, _, name = target.partition(":")
    if not name:
        raise ValueError(f"expected module:function, got {target!r}")
    return getattr(importlib.import_module(module), name)


# ---------------------------------------------------------------------------------------------
# The judging loop
# ---------------------------------------------------------------------------------------------


def make_judge(config: OnlineConfig):
    """The judge the config asks for; a model judge's calls go through an accountant."""
    from ratchet.online.judge import build_judge

    jc = config.judge
    model = None
    if jc.kind == "model":
        from ratchet.models import Accountant, AccountedModel, load_model

        spec = jc.model or config.model
        overrides: dict[str, Any] = {"n_threads": jc.threads} if spec.startswith("local:") else {}
        try:
            inner = load_model(spec, **overrides)
        except Exception:  # the backend's settings may not take n_threads; the env pin still holds
            inner = load_model(spec)
        model = AccountedModel(inner, Accountant(), purpose="judge")
    label_model = label_model_of(config)
    # The stacked judge's threshold was fitted with its weights: only an explicit setting overrides
    # it (auto may choose the stacked judge; build_judge gives the classifier its own 0.6).
    explicit = "min_confidence" in jc.model_fields_set or jc.kind not in ("stacked", "auto")
    return build_judge(jc.kind, learn=config.learn, model=model, votes=jc.votes, temperature=jc.temperature,
                       max_tokens=jc.max_tokens, hint_style=jc.hint_style,
                       min_confidence=jc.min_confidence if explicit else None, label_model=label_model,
                       threads=jc.threads, hints=judge_hints(config))


def judge_hints(config: OnlineConfig) -> bool:
    """Whether the judge hints corrected turns: for distillation (opd, combine) and for a served
    playbook that learns what corrections state (``context.lessons: stated``)."""
    return config.learn in ("opd", "combine") or (config.context.online and config.context.lessons == "stated")


def label_model_of(config: OnlineConfig) -> str | None:
    """kind=stacked or auto: the label model ``judge.model`` names (None: the stacked judge's own)."""
    jc = config.judge
    if jc.kind not in ("stacked", "auto") or not jc.model:
        return None
    if not jc.model.startswith("local:"):
        raise ValueError(f"judge.model {jc.model!r}: the stacked judge (judge.kind={jc.kind}) reads an embedded "
                         f"model, give local:NAME")
    return jc.model.removeprefix("local:")


def make_turn_learner(config: OnlineConfig, queue_path: Any):
    """The learner of ``context.online``: its model (``context.model``, else the judge's, else the
    served one) through an accountant, its playbook beside the queue unless the config names one."""
    from ratchet.context.online import TurnLearner, playbook_path, serve_embedder
    from ratchet.models import Accountant, AccountedModel, load_model

    spec = config.context.model or config.judge.model or config.model
    accountant = Accountant()
    model = AccountedModel(load_model(spec), accountant, purpose="context")
    run_dir = Path(queue_path).parent if isinstance(queue_path, (str, Path)) else None
    return TurnLearner(playbook_path(config.context, run_dir), model, config.context, serve_embedder(config.context),
                       usage=accountant.snapshot)


def run_judge_loop(config: OnlineConfig, queue_path: Any, stop_event: Any, judge: Any = None,
                   observer: Any = None) -> int:
    """Judge turns as their next states arrive until ``stop_event`` is set; returns turns judged.

    ``observer(turn, judgement)`` learns from each stored judgement (``context.online`` builds a
    :class:`~ratchet.context.online.TurnLearner`); its failure is logged and costs no judgement.

    ``queue_path``: the queue file, or the serving machine's queue relayed to this one. A turn
    whose judging raises is logged and left to its lease expiring, so a flaky judge never loses
    turns nor stops the loop.
    """
    queue = open_queue(queue_path)
    judge = judge or make_judge(config)
    if observer is None and config.context.online:
        observer = make_turn_learner(config, queue_path)
    done = 0
    while not stop_event.is_set():
        work = queue.turns_to_judge(config.judge.batch)
        if not work:
            stop_event.wait(config.judge.poll_s)
            continue
        for turn, next_state in work:
            if stop_event.is_set():
                break
            try:
                judgement = judge.judge(turn, next_state)
                queue.add_judgement(judgement)
                done += 1
            except Exception:
                log.exception("judging turn %s failed; it returns to the queue when its lease ends", turn.turn_id)
                continue
            if observer is not None:
                try:
                    observer(turn, judgement)
                except Exception:
                    log.exception("learning the playbook from turn %s failed", turn.turn_id)
    return done


def run_trainer(config: OnlineConfig, queue_path: Any, versions_dir: Any, stop_event: Any) -> None:
    """The configured training loop with its settings filled in from the served model (on the two
    paths, or on the serving machine's stores relayed)."""
    fn = resolve(config.trainer_loop)
    fn(config.resolved_trainer(), queue_path, versions_dir, stop_event)


# ---------------------------------------------------------------------------------------------
# Local processes
# ---------------------------------------------------------------------------------------------


def _child_main(name: str, target: str, args: tuple[Any, ...], threads: int, stop: StopSignal) -> None:
    die_with_parent(stop.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    pin_threads(threads)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s")
    # Before the loop's imports and model load: a stop sent while it starts ends it promptly.
    stop.guard_startup(name)
    try:
        resolve(target)(*args, stop)
    except Exception:
        logging.getLogger(f"ratchet.online.{name}").exception("the %s loop crashed", name)
        raise


class LocalLoops:
    """The judging and training loops as ``spawn``-ed, supervised processes of this machine.

    ``state_dir`` (default: ``loops/`` beside the queue) holds a pid file per loop and
    ``loops.json``, the supervision state ``ratchet serve status`` shows.
    """

    def __init__(self, config: OnlineConfig, queue_path: Path, versions_dir: Path, *, judge: bool = True,
                 trainer: bool = True, state_dir: Path | None = None) -> None:
        self.config = config
        self._ctx = mp.get_context("spawn")
        self.specs: dict[str, tuple[str, tuple[Any, ...], int]] = {}
        if judge:
            self.specs["judge"] = ("ratchet.online.loops:run_judge_loop", (config, str(queue_path)),
                                   config.judge.threads)
        if trainer and config.learn != "off":
            self.specs["trainer"] = ("ratchet.online.loops:run_trainer",
                                     (config, str(queue_path), str(versions_dir)), config.trainer.num_threads)
        lc = config.loops
        policy = RestartPolicy(lc.max_restarts, lc.restart_window_s, lc.restart_backoff_s, lc.restart_backoff_max_s)
        self.supervisor = Supervisor(list(self.specs), self._spawn, policy,
                                     state_dir or Path(queue_path).parent / LOOPS_NAME, watch_s=lc.watch_s,
                                     ctx=self._ctx)

    def _spawn(self, name: str, stop: StopSignal) -> mp.process.BaseProcess:
        target, args, threads = self.specs[name]
        proc = self._ctx.Process(target=_child_main, args=(name, target, args, threads, stop), name=f"ratchet-{name}",
                                 daemon=False)
        proc.start()
        return proc

    @property
    def processes(self) -> dict[str, mp.process.BaseProcess]:
        """Each loop's current process (a restarted loop's new one)."""
        return {name: child.proc for name, child in self.supervisor.children.items() if child.proc is not None}

    def start(self) -> LocalLoops:
        self.supervisor.start()
        return self

    def alive(self) -> dict[str, bool]:
        return {name: proc.is_alive() for name, proc in self.processes.items()}

    def status(self) -> dict[str, Any]:
        return self.supervisor.status()

    def stop(self, timeout_s: float | None = None) -> dict[str, int | None]:
        """Ask every loop to stop, wait for them, terminate what does not stop in time."""
        return self.supervisor.stop(self.config.loops.stop_timeout_s if timeout_s is None else timeout_s)


# ---------------------------------------------------------------------------------------------
# Ray actors (the actor itself, LoopWorker, lives in ratchet.executors.ray)
# ---------------------------------------------------------------------------------------------


class RayLoops:
    """The same loops as Ray actors: locally (``ray.init``) or on a cluster (``address``, default
    ``config.address``). Ray restarts an actor whose process dies, up to ``loops.max_restarts``
    times in all, and runs its loop again; stopping never waits on one that stays dead.

    The actors get no path: they reach the queue and the version store through a
    :class:`~ratchet.online.relayed.StoreGateway` answered in this process, the one that serves
    and owns the run directory. So an actor may land on any node, with or without the run
    directory's disk; turns, judgements and batches travel as actor calls, adapters through Ray's
    object store, and the trainer's input files and model in chunks through the relay
    (:class:`~ratchet.online.relayed.SentInputs`: once per node and content).
    """

    def __init__(self, config: OnlineConfig, queue_path: Path, versions_dir: Path, *, judge: bool = True,
                 trainer: bool = True, address: str | None = None, num_cpus: int | None = None,
                 trainer_target: str = "ratchet.online.loops:run_trainer") -> None:
        try:
            import ray
        except ImportError as exc:
            from ratchet.contracts import RatchetError

            raise RatchetError("Ray is not installed", hint="pip install 'ratchet[ray]'") from exc
        self._ray = ray
        self.config = config
        self._owns_ray = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
            # "local" for a private instance: without an address Ray joins whatever cluster
            # /tmp/ray/ray_current_cluster names (see executors.ray.connect).
            kwargs["address"] = address or config.address or "local"
            if kwargs["address"] == "local":
                kwargs["num_cpus"] = num_cpus or 2
            ray.init(**kwargs)
            self._owns_ray = True
        self.stores = StoreGateway(ray, queue_path, versions_dir)
        trainer = trainer and config.learn != "off"
        if trainer:
            # Its input files and model go to its node (unless there already): it may see no disk of ours.
            try:
                self.inputs = SentInputs.offer(config, self.stores)
            except Exception:  # a setting names a missing file: nothing of ours is left running
                self.stores.close()
                if self._owns_ray:
                    ray.shutdown()
                raise
        self.specs: dict[str, tuple[str, tuple[Any, ...]]] = {}
        self.actors: dict[str, Any] = {}
        # Each loop asks for the cores it runs threads on, so the scheduler never stacks two on one.
        if judge:
            self.specs["judge"] = ("ratchet.online.loops:run_judge_loop", (config, self.stores.queue))
            self.actors["judge"] = actor_class(LoopWorker, ActorResources(
                num_cpus=config.judge.threads, max_restarts=config.loops.max_restarts)).remote("judge", config.judge.threads)
        if trainer:
            self.specs["trainer"] = ("ratchet.online.relayed:run_with_inputs",
                                     (trainer_target, config, self.inputs, self.stores.queue, self.stores.versions))
            self.actors["trainer"] = actor_class(LoopWorker, ActorResources(
                num_cpus=config.trainer.num_threads, max_restarts=config.loops.max_restarts)).remote(
                "trainer", config.trainer.num_threads)
        self.refs: dict[str, Any] = {}

    def start(self) -> RayLoops:
        for name, actor in self.actors.items():
            target, args = self.specs[name]
            self.refs[name] = actor.run.remote(target, args)
            log.info("started the %s loop as a Ray actor", name)
        return self

    def pids(self) -> dict[str, int]:
        return {name: self._ray.get(actor.pid.remote()) for name, actor in self.actors.items()}

    def stop(self, timeout_s: float = 60.0) -> dict[str, Any]:
        ray = self._ray
        for name, actor in self.actors.items():
            try:
                ray.get(actor.stop.remote(), timeout=timeout_s)
            except Exception as exc:  # dead past its restarts, or hung: it is killed below either way
                log.warning("the %s loop's actor did not take the stop signal (%s); killing it", name,
                            type(exc).__name__)
        results: dict[str, Any] = {}
        for name, ref in self.refs.items():
            try:
                results[name] = ray.get(ref, timeout=timeout_s)
            except Exception as exc:  # a loop that crashed reports its error here
                results[name] = exc
        for actor in self.actors.values():
            ray.kill(actor)
        self.stores.close()  # after the loops: their last calls give back the samples they held
        if self._owns_ray:
            ray.shutdown()
        return results


def start_loops(config: OnlineConfig, queue_path: Path, versions_dir: Path, **kwargs: Any) -> LocalLoops | RayLoops:
    """The judging and training loops on the configured executor, started."""
    cls = RayLoops if config.executor == "ray" else LocalLoops
    return cls(config, queue_path, versions_dir, **kwargs).start()
