"""The same judging and training loops as Ray actors: on a local Ray instance, and on a node of a
local cluster that cannot see the serving process's run directory (no shared filesystem)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ratchet[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402

from ratchet.online.batching import Usable  # noqa: E402
from ratchet.online.config import OnlineConfig  # noqa: E402
from ratchet.online.evaluation import EvaluationHook  # noqa: E402
from ratchet.online.loops import RayLoops  # noqa: E402
from ratchet.online.queue import TurnQueue, open_queue  # noqa: E402
from ratchet.online.records import Turn  # noqa: E402
from ratchet.online.trainer_loop import run_trainer_loop  # noqa: E402
from ratchet.online.versions import VersionStore  # noqa: E402

HERE = Path(__file__).parent
#: Where the blind node's trainer looks for the serving run directory (to show it is not there).
RUN_DIR_ENV = "RATCHET_TEST_HIDDEN_RUN"


def fake_ray_trainer(config, queue_path, versions_dir, stop_event):
    """Claims judged samples and marks them trained as version 1; returns its pid."""
    queue = open_queue(queue_path)
    while not stop_event.is_set():
        batch = queue.take_batch(16, min_version=0)
        if batch:
            queue.mark_trained([s.turn.turn_id for s in batch], 1)
        stop_event.wait(0.05)
    return os.getpid()


@contextlib.contextmanager
def local_ray():
    """A private Ray instance (address="local": not a cluster another test left in
    ray_current_cluster) whose workers import this test module by name: its folder on their path,
    and the driver's own path kept, so that they run the same ratchet as this test."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        yield
    finally:
        ray.shutdown()


def fake_loops(tmp_path, max_restarts: int | None = None) -> RayLoops:
    """The judge and the fake trainer as started Ray actors over ``tmp_path``'s queue."""
    config = OnlineConfig(learn="binary", executor="ray", judge={"kind": "classifier"})  # not auto: never the 1.5B
    config.judge.poll_s = 0.05
    if max_restarts is not None:
        config.loops.max_restarts = max_restarts
    loops = RayLoops(config, tmp_path / "q.db", tmp_path / "v", trainer_target="test_loops_ray:fake_ray_trainer")
    loops.start()
    return loops


@pytest.mark.slow
def test_judge_and_trainer_as_ray_actors(tmp_path):
    queue = TurnQueue(tmp_path / "q.db")
    for i in range(6):
        queue.add_turn(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": "q"}], "a", [1], [2],
                            [-0.3], 0))
        queue.set_next_state(f"t{i}", "thanks!" if i % 2 else "no, that's wrong")
    with local_ray():
        loops = fake_loops(tmp_path)
        pids = loops.pids()
        assert os.getpid() not in pids.values() and len(set(pids.values())) == 2
        deadline = time.time() + 120
        while queue.stats()["trained"] < 6 and time.time() < deadline:
            time.sleep(0.2)
        results = loops.stop(timeout_s=60)
    st = queue.stats()
    assert st["judged"] == 6 and st["positive"] == 3 and st["negative"] == 3 and st["trained"] == 6
    assert results["judge"] == 6 and results["trainer"] == pids["trainer"]


@pytest.mark.slow
@pytest.mark.parametrize("max_restarts", [1, 0], ids=["restarted", "left-down"])
def test_a_killed_loop_actor_is_restarted_and_stop_never_fails_on_a_dead_one(tmp_path, max_restarts):
    queue = TurnQueue(tmp_path / "q.db")
    with local_ray():
        loops = fake_loops(tmp_path, max_restarts=max_restarts)
        first = loops.pids()
        os.kill(first["judge"], signal.SIGKILL)
        if max_restarts:
            deadline = time.time() + 120
            while time.time() < deadline:
                try:
                    if loops.pids()["judge"] != first["judge"]:
                        break
                except ray.exceptions.RayActorError:  # still restarting
                    pass
                time.sleep(0.2)
            queue.add_turn(Turn("t0", "s", False, "main", [{"role": "user", "content": "q"}], "a", [1], [2], [-0.3], 0))
            queue.set_next_state("t0", "thanks!")
            while queue.stats()["judged"] < 1 and time.time() < deadline:
                time.sleep(0.2)
            assert queue.stats()["judged"] == 1  # the restarted actor runs the judging loop again
        started = time.monotonic()
        results = loops.stop(timeout_s=30)
        assert time.monotonic() - started < 60
    assert results["trainer"] == first["trainer"]
    if max_restarts:
        assert results["judge"] == 1
    else:
        assert isinstance(results["judge"], Exception)  # reported, not raised


# -- a node without the run directory --------------------------------------------------------


def add_turns(queue: TurnQueue, ids: range, *, answered: bool = True) -> None:
    for i in ids:
        queue.add_turn(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": f"q{i}"}], f"a{i}", [1], [2],
                            [-0.3], 0, created_at=1000.0 + i))
    if answered:
        answer(queue, ids)


def answer(queue: TurnQueue, ids: range) -> None:
    for i in ids:
        queue.set_next_state(f"t{i}", "thanks!" if i % 2 else "no, that's wrong")


class PublishingTrainer:
    """A stub trainer (no torch) that makes an update of every batch: its adapter's weights file
    holds the batch's turn ids, so a test can tell which update a copy of an adapter came from."""

    base_gguf = None
    usable = staticmethod(Usable.every)  # it drops nothing

    def __init__(self) -> None:
        self.version = 0
        self.batch: list[str] = []
        self.loaded: list[tuple[int, bytes]] = []

    def step(self, batch):
        self.batch = [s.turn.turn_id for s in batch]
        return {"updated": True, "loss": 0.5}

    def save_adapter(self, out_dir):
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "adapter_config.json").write_text('{"r": 1}')
        (out / "adapter_model.safetensors").write_bytes(",".join(self.batch).encode())
        return out

    def load_adapter(self, adapter_dir, version):
        self.loaded.append((version, (Path(adapter_dir) / "adapter_model.safetensors").read_bytes()))
        self.version = version

    def reset_to_base(self):
        self.loaded.append((0, b""))
        self.version = 0


#: The trainer's input files, as the serving side has them in its run directory.
INPUTS = {
    "heldout.jsonl": '{"messages": [{"role": "user", "content": "hi"}], "preferred": "Ahoy!", "dispreferred": "Hi."}\n',
    "guard.jsonl": '{"messages": [{"role": "user", "content": "2+2?"}], "reference": "4"}\n',
    "tasks.jsonl": '{"messages": [{"role": "user", "content": "3+3?"}], "answer": "6"}\n'
                   '{"messages": [{"role": "user", "content": "5+5?"}], "answer": "10"}\n',
}


def blind_trainer(config, queue, versions, stop_event):
    """The real training loop with the stub trainer, on whatever the actor was handed; it reports
    what its settings' files are on its node (the stub cannot be scored, so the loop runs without them)."""
    tc = config.resolved_trainer()
    hook = EvaluationHook.from_config(tc.heldout_path, tc.eval_tolerance, gate=tc.gate)  # as the loop reads them
    files = {Path(p).name: (str(p), Path(p).read_text()) for p in (tc.heldout_path, tc.gate.guard_path, tc.gate.tasks_path)}
    model = Path(tc.model)
    trainer = PublishingTrainer()
    bare = tc.model_copy(update={"heldout_path": None, "gate": tc.gate.model_copy(update={
        "guard_path": None, "tasks_path": None})})
    run_trainer_loop(bare, queue, versions, stop_event, trainer=trainer)
    hidden = Path(os.environ[RUN_DIR_ENV])
    return {"node": ray.get_runtime_context().get_node_id(), "loaded": trainer.loaded,
            "sees_run_dir": any((hidden / name).exists() for name in ("q.db", "v", *INPUTS, "model.gguf")),
            "files": files, "cases": (len(hook.cases), len(hook.guard), len(hook.tasks)),
            "model": (str(model), hashlib.sha256(model.read_bytes()).hexdigest())}


def _can_hide(path: Path) -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--tmpfs", str(path), "ls", "-A", str(path)],
                           capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout == ""


@pytest.mark.slow
def test_loops_on_a_node_that_cannot_see_the_run_directory(tmp_path):
    """A head that runs nothing (the serving process joins it) and a worker node whose processes
    see an empty directory where the run directory is (a mount namespace): the judge and the
    trainer run there, and everything they do lands in the serving process's queue and versions.
    The trainer's held-out, guard and task sets and its model are in that directory too: they
    reach the node through the relay, and the trainer reads its own copies there."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "marker").write_text("the serving side's run directory")
    for name, text in INPUTS.items():
        (run / name).write_text(text)
    model_bytes = os.urandom(9 * 1024 * 1024)  # more than one chunk (8 MiB)
    (run / "model.gguf").write_bytes(model_bytes)
    node_cache = tmp_path / "node-cache"  # the node's RATCHET_CACHE_DIR: where what it receives is kept
    if not _can_hide(run):
        pytest.skip("needs bubblewrap with mount namespaces to hide a directory from a Ray node")
    queue = TurnQueue(run / "q.db")
    add_turns(queue, range(6))
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, RUN_DIR_ENV: str(run), "RATCHET_CACHE_DIR": str(node_cache)}
    head = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    node = subprocess.Popen(
        ["bwrap", "--dev-bind", "/", "/", "--tmpfs", str(run), "--die-with-parent",
         str(Path(sys.executable).with_name("ray")), "start", f"--address={head.address}", "--num-cpus=2", "--block",
         "--disable-usage-stats"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        ray.init(address=head.address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path, RUN_DIR_ENV: str(run),
                                           "RATCHET_CACHE_DIR": str(node_cache)}})
        deadline = time.time() + 120
        while sum(n["Alive"] for n in ray.nodes()) < 2 and time.time() < deadline:
            time.sleep(0.5)
        assert sum(n["Alive"] for n in ray.nodes()) == 2, "the worker node did not join"
        driver_node = ray.get_runtime_context().get_node_id()
        # The stub has no policy to gate: the built-in gate is off.
        config = OnlineConfig(model=f"local:{run / 'model.gguf'}", learn="binary", executor="ray",
                              judge={"kind": "classifier", "poll_s": 0.05}, trainer={
            "batch_size": 3, "min_batch": 3, "max_wait_s": 0.0, "poll_interval_s": 0.05, "convert_gguf": False,
            "kl_samples": 0, "gate": {"builtin": False, "guard_path": run / "guard.jsonl",
                                      "tasks_path": run / "tasks.jsonl"},
            "heldout_path": run / "heldout.jsonl", "num_threads": 1})
        loops = RayLoops(config, run / "q.db", run / "v", trainer_target="test_loops_ray:blind_trainer").start()

        def wait_trained(n: int) -> None:
            deadline = time.time() + 120
            while queue.stats()["trained"] < n and time.time() < deadline:
                time.sleep(0.2)
            assert queue.stats()["trained"] == n

        wait_trained(6)
        versions = VersionStore(run / "v")
        assert versions.current_number() == 2
        # A rollback here, on the serving side: the trainer follows it with version 1's adapter,
        # which travels to it, and trains the next batch on top of it. The next turns become
        # trainable once it has fetched that adapter, so no batch can go to the old weights.
        add_turns(queue, range(6, 9), answered=False)
        versions.rollback(1)
        deadline = time.time() + 60
        while not loops.stores.answered["versions.files"] and time.time() < deadline:
            time.sleep(0.05)
        answer(queue, range(6, 9))
        wait_trained(9)
        results = loops.stop(timeout_s=60)
    finally:
        ray.shutdown()
        os.killpg(node.pid, signal.SIGTERM)
        node.wait(60)
        head.shutdown()
    trainer = results["trainer"]
    assert isinstance(trainer, dict), trainer
    assert trainer["sees_run_dir"] is False  # the trainer's node really has no view of the run directory
    assert trainer["node"] != driver_node
    # Its settings named files it could not see: it read copies received from the serving side.
    assert trainer["cases"] == (1, 1, 2)
    for name, (where, text) in trainer["files"].items():
        assert text == INPUTS[name] and Path(where).is_relative_to(node_cache) and not Path(where).is_relative_to(run)
    where, digest = trainer["model"]
    assert Path(where).is_relative_to(node_cache) and Path(where).name == "model.gguf"
    assert digest == hashlib.sha256(model_bytes).hexdigest()
    assert loops.stores.answered["files.chunk"] == 3 + 2  # a chunk per small file, two for the model
    assert results["judge"] == 9
    st = queue.stats()
    assert st["judged"] == 9 and st["positive"] == 4 and st["negative"] == 5 and st["trained"] == 9
    # Every adapter the trainer made is in the serving side's version store, byte for byte.
    weights = {v.number: (v.adapter_dir / "adapter_model.safetensors").read_bytes()
               for v in versions.list() if v.number}
    assert weights == {1: b"t0,t1,t2", 2: b"t3,t4,t5", 3: b"t6,t7,t8"}
    assert versions.get(3).metrics["parent_version"] == 1 and versions.current_number() == 3
    assert trainer["loaded"] == [(1, b"t0,t1,t2")]
