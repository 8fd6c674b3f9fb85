"""The parts of the per-node model server that need no cluster: what travels to a node, what
cannot (with the fix named), and the driver's journal computing a reply by a copy elsewhere while
accounting and journaling it itself, and the driver's servers when one dies (a fake ``ray``). The
cluster tests (``test_ray_cluster.py``) run it on Ray."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ratchet.contracts import ComputedElsewhere, RatchetError
from ratchet.evolve.cache import REPLIES, JournaledModel
from ratchet.executors import ExecutorConfig
from ratchet.executors.files import FileServer, sha256_of
from ratchet.executors.gateway import DriverPlacement
from ratchet.executors.node_server import (LlamaRecipe, ModelServer, NodeModel, NodePlacement, NodeServers,
                                           ScriptedRecipe, base_model, placement_for, recipe_for)
from ratchet.models import ScriptedModel
from ratchet.models.budget import AccountedModel, Accountant, BudgetConfig
from ratchet.models.llama_embedded import LlamaModel
from ratchet.store import RunStore

ASK = [{"role": "user", "content": "grade c1 on t1"}]


class FakeRay:
    """``ray.nodes()`` of a cluster whose nodes have ``cpus`` CPUs each."""

    def __init__(self, *cpus: float) -> None:
        self.cpus = cpus

    def nodes(self):
        return [{"NodeID": f"n{i}", "Alive": True, "Resources": {"CPU": c}} for i, c in enumerate(self.cpus)]


def test_the_node_server_is_the_default_on_ray_and_the_driver_the_fallback():
    assert ExecutorConfig().model_server == "auto"
    responder = ScriptedModel(lambda m: "ok")
    assert isinstance(placement_for(ExecutorConfig(kind="ray"), FakeRay(2, 2), responder), NodePlacement)
    assert isinstance(placement_for(ExecutorConfig(kind="ray", model_server="node")), NodePlacement)
    assert isinstance(placement_for(ExecutorConfig(kind="ray", model_server="driver"), FakeRay(2), responder),
                      DriverPlacement)
    with pytest.raises(ValueError):
        ExecutorConfig(model_server="everywhere")


@pytest.mark.parametrize("ray, model", [
    (FakeRay(1, 1), ScriptedModel(lambda m: "ok")),  # no node has room for a server beside a task
    (FakeRay(2, 2), ScriptedModel(["a", "b"])),  # a list of answers cannot be copied
    (FakeRay(2, 2), type("HttpModel", (), {"name": "http://h:1/v1#m"})()),
])
def test_auto_lets_the_driver_compute_where_node_servers_cannot(ray, model):
    """The default does not stop a run the driver can serve; ``node`` asked for explicitly does."""
    accounted = AccountedModel(model, Accountant(), "evolve")  # as the journal wraps it
    assert isinstance(placement_for(ExecutorConfig(kind="ray"), ray, accounted), DriverPlacement)
    assert isinstance(placement_for(ExecutorConfig(kind="ray", model_server="node"), ray, accounted), NodePlacement)


def test_a_scripted_model_with_a_responder_travels_as_itself():
    def responder(messages):
        return "r:" + messages[-1]["content"]

    recipe = recipe_for(ScriptedModel(responder, name="scripted:x"), FileServer())
    assert recipe == ScriptedRecipe("scripted:x", responder)
    copy = recipe.build(lambda *a: b"", threads=1)
    assert copy.name == "scripted:x" and copy.complete(ASK).text == "r:grade c1 on t1"
    echo = recipe_for(ScriptedModel(), FileServer()).build(lambda *a: b"", threads=1)
    assert echo.complete(ASK).text == "grade c1 on t1"


def test_a_gguf_model_travels_as_its_file_by_hash_and_its_settings(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"weights" * 100)
    files = FileServer()
    recipe = recipe_for(LlamaModel(str(gguf), name="local:m", n_ctx=1024, n_threads=2), files)
    assert isinstance(recipe, LlamaRecipe) and recipe.name == "local:m" and recipe.lora is None
    assert recipe.model.sha256 == sha256_of(gguf) and recipe.model.name == "m.gguf"
    assert recipe.settings["n_ctx"] == 1024 and "n_threads" not in recipe.settings  # the node's own threads
    assert files.chunk(recipe.model.sha256, 0, 7) == b"weights"  # offered: the nodes can ask for it


@pytest.mark.parametrize("model, says", [
    (ScriptedModel(["a", "b"]), "answers from a list"),
    (type("HttpModel", (), {"name": "http://h:1/v1#m"})(), "cannot be copied to the cluster's nodes"),
])
def test_a_model_that_cannot_run_on_the_nodes_is_refused_naming_the_fix(model, says):
    with pytest.raises(RatchetError, match=says) as err:
        recipe_for(model, FileServer())
    assert "executor.model_server: driver" in err.value.hint


class Copy:
    """The node's copy: the same replies, counted where they are computed."""

    def __init__(self) -> None:
        self.name, self.asked = "copy", 0

    def complete(self, messages, **params):
        self.asked += 1
        return ScriptedModel(lambda m: "0.7").complete(messages, **params)


def test_a_reply_computed_by_a_copy_is_accounted_and_journaled_by_the_driver_once(tmp_path):
    run = RunStore(tmp_path).create_run("evolve", {})
    driver_model = ScriptedModel(lambda m: pytest.fail("the driver's model computed a unit's call"), name="scripted:d")
    logged = []
    accountant = Accountant(BudgetConfig(max_calls=10), on_call=logged.append)
    journal = JournaledModel(AccountedModel(driver_model, accountant, "evolve"), run)
    assert base_model(journal) is driver_model
    copy = Copy()
    first = journal.complete_for("unit-a", 0, ASK, computed_by=copy, max_tokens=8)
    again = journal.complete_for("unit-a", 0, ASK, computed_by=copy, max_tokens=8)  # a retried unit
    assert first.text == again.text == "0.7" and copy.asked == 1 and journal.replayed == 1
    assert accountant.snapshot()["calls"] == 1 and accountant.snapshot()["in_flight"] == 0
    [record] = run.read_jsonl(REPLIES)
    assert (record["unit"], record["index"], record["text"]) == ("unit-a", 0, "0.7")
    assert [(c.model, c.purpose, c.ok) for c in logged] == [("scripted:d", "evolve", True)]  # under the driver's name


def test_a_model_without_bookkeeping_of_its_own_is_replaced_by_the_copy_that_computes(tmp_path):
    """Only a :class:`ComputedElsewhere` model (the accounting) is kept around the copy; a plain
    model under the journal has nothing to keep, so the copy answers alone, journaled all the same."""
    assert isinstance(AccountedModel(ScriptedModel(), Accountant()), ComputedElsewhere)
    assert not isinstance(ScriptedModel(), ComputedElsewhere)
    run = RunStore(tmp_path).create_run("evolve", {})
    plain = ScriptedModel(lambda m: pytest.fail("the driver's model computed a unit's call"), name="scripted:d")
    journal = JournaledModel(plain, run)
    copy = Copy()
    assert journal.complete_for("unit-a", 0, ASK, computed_by=copy).text == "0.7" and copy.asked == 1
    assert [r["text"] for r in run.read_jsonl(REPLIES)] == ["0.7"]


# -- a node's server dying mid-run: its calls go to another node's, and with none left the call
#    fails naming the fix (the driver never waits on a dead server)


class ServerDied(Exception):
    """Stands for ``ray.exceptions.RayActorError``: the actor (or its node) is gone."""


class ModelFailed(Exception):
    """Stands for ``ray.exceptions.RayTaskError``: the model's own error, raised on the server."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause

    def as_instanceof_cause(self) -> BaseException:
        return self.cause


class FakeServer:
    """One node's ModelServer handle: a call on it is computed by its copy, or fails as Ray's do
    once the server is dead (also a call already asked of it: ``ray.get`` is when it shows)."""

    def __init__(self, node: str, recipe) -> None:
        self.node, self.dead, self.asked = node, False, 0
        self.model = recipe.build(lambda *a: b"", threads=1)
        self.ready = SimpleNamespace(remote=lambda: lambda: (node, None))
        self.complete = SimpleNamespace(remote=self._call)

    def _call(self, messages, params):
        def result():
            self.asked += 1
            if self.dead:
                raise ServerDied(self.node)
            try:
                return self.model.complete(messages, **params), (self.node, 1)
            except Exception as exc:  # noqa: BLE001 - Ray wraps whatever the model raised
                raise ModelFailed(exc) from None
        return result


class ServersRay:
    """The part of ``ray`` that :class:`NodeServers` uses, over two-CPU nodes and fake servers."""

    exceptions = SimpleNamespace(RayActorError=ServerDied, RayTaskError=ModelFailed)

    def __init__(self, *nodes: str) -> None:
        self.node_ids, self.servers = nodes, {}

    def nodes(self):
        return [{"NodeID": n, "Alive": True, "Resources": {"CPU": 2.0}} for n in self.node_ids]

    def remote(self, cls):
        assert cls is ModelServer
        return self

    def options(self, scheduling_strategy, **_):
        def start(recipe, relay, threads):
            node = scheduling_strategy.node_id
            self.servers[node] = FakeServer(node, recipe)
            return self.servers[node]
        return SimpleNamespace(remote=start)

    def wait(self, refs, num_returns, timeout):
        return refs, []

    def get(self, ref):
        return [r() for r in ref] if isinstance(ref, list) else ref()

    def kill(self, handle):
        handle.dead = True


NODE_A, NODE_B = "a" * 56, "b" * 56


@pytest.mark.timeout(60)  # a driver that kept asking a dead server would hang here
def test_a_dead_nodes_server_hands_its_calls_to_another_and_with_none_left_the_call_fails_naming_the_fix(tmp_path):
    pytest.importorskip("ray", reason="NodeServers pins each server with Ray's scheduling strategy")
    fake = ServersRay(NODE_A, NODE_B)
    servers = NodeServers(fake, ScriptedRecipe("scripted:d", lambda m: "0.7"), None, ExecutorConfig(kind="ray"))
    assert set(servers.handles) == {NODE_A, NODE_B}
    run = RunStore(tmp_path).create_run("evolve", {})
    accountant = Accountant(BudgetConfig(max_calls=10))
    driver_model = ScriptedModel(lambda m: pytest.fail("the driver's model computed a unit's call"), name="scripted:d")
    journal = JournaledModel(AccountedModel(driver_model, accountant, "evolve"), run)

    def ask(unit: str):
        return journal.complete_for(unit, 0, ASK, computed_by=NodeModel(servers, NODE_A))

    assert ask("u1").text == "0.7" and fake.servers[NODE_A].asked == 1
    fake.servers[NODE_A].dead = True  # node A's server dies between calls, or while computing one
    assert ask("u2").text == "0.7"
    assert NODE_A not in servers.handles and fake.servers[NODE_A].asked == 2  # asked once, dropped, not asked again
    assert ask("u3").text == "0.7" and fake.servers[NODE_A].asked == 2 and fake.servers[NODE_B].asked == 2
    assert [(asked, node) for (asked, (node, _)), n in servers.answered.items() for _ in range(n)] == [
        (NODE_A, NODE_A), (NODE_A, NODE_B), (NODE_A, NODE_B)]
    # every reply paid and journaled once, wherever it was computed
    assert accountant.snapshot()["calls"] == 3 and [r["unit"] for r in run.read_jsonl(REPLIES)] == ["u1", "u2", "u3"]

    fake.servers[NODE_B].dead = True  # the last server gone: the call fails at once, naming the fix
    with pytest.raises(RatchetError, match="every model server of 'scripted:d' is gone") as err:
        ask("u4")
    assert "executor.model_server: driver" in err.value.hint
    assert accountant.snapshot()["in_flight"] == 0 and len(run.read_jsonl(REPLIES)) == 3  # nothing kept reserved


def test_the_models_own_error_on_a_server_is_the_callers_and_is_not_sent_to_another_node():
    pytest.importorskip("ray", reason="NodeServers pins each server with Ray's scheduling strategy")

    def broken(messages):
        raise ValueError("the prompt is too long")

    fake = ServersRay(NODE_A, NODE_B)
    servers = NodeServers(fake, ScriptedRecipe("scripted:d", broken), None, ExecutorConfig(kind="ray"))
    with pytest.raises(ValueError, match="too long"):
        servers.compute(NODE_A, ASK, {})
    assert set(servers.handles) == {NODE_A, NODE_B} and fake.servers[NODE_B].asked == 0
