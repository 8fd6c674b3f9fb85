"""One model server per node of a Ray cluster: it computes the model calls of the tasks on its
node, while the driver stays their one accountant (``executor.model_server: node``, and ``auto``,
the default, where the model can be copied to the nodes and they have room for a server).

A call a remote unit makes reaches the driver through the relay (:mod:`ratchet.executors.gateway`)
as before. What changes is who computes it. The driver's journal answers the call
(``complete_for(..., computed_by=...)``): a call it has answered before for this unit, index and
request is replayed, paying nothing; otherwise the budget reserves the call, the
:class:`ModelServer` *on the caller's node* computes the reply (one actor call, from the driver),
and the driver records it in the budget and journals it before the caller gets it. So per call
the driver does two small round trips — the relay's and the server's — and no model work.

Why the driver, not the task, asks the server: the journal's lock for the call and the budget's
reservation then never span a process the driver cannot see die. A task killed while its call is
being computed leaves the server computing; the driver journals the reply and the task's retry
is given it, paying nothing twice, exactly as when the driver computed.

The servers are made when the executor starts serving a model (``RayExecutor.serve``), one on each
alive node with room for a server beside a task, each pinned to its node
(``NodeAffinitySchedulingStrategy``), before any task is submitted: made lazily, a server would wait
for CPUs that its own node's tasks hold while they wait for it. Made up front, the model loads once
per node and a model that cannot load fails the run at its start, naming the node and the fix. A
node that joins later has no server; its tasks' calls are computed by another node's server.
Servers are named ``ratchet-model-<gateway>-<node>`` (``ray list actors`` shows them) and end with
their gateway.

What travels to a node is a recipe (:func:`recipe_for`), not the driver's model object: a scripted
model with a responder (or the echoing one) is rebuilt there; a ``local:`` GGUF model's file (and
LoRA) is sent by content hash, in chunks through the relay (:mod:`ratchet.executors.files`: once per
node and content), and loaded there with the server's threads. Other models (HTTP, replay) cannot
be copied: run them with ``model_server: driver``.

``ray`` is imported when servers are made or called, not at module import (optional, slow).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ratchet.contracts import Completion, Message, Model, RatchetError
from ratchet.executors.config import ExecutorConfig
from ratchet.executors.files import ChunkReader, FileServer, SentFile, receive
from ratchet.executors.gateway import DriverPlacement, ModelGateway, relay_call, sendable
from ratchet.models.llama_embedded import LlamaModel  # light: llama_cpp itself is imported on first load
from ratchet.models.scripted import ScriptedModel

log = logging.getLogger("ratchet.executors.node_server")

#: Seconds the servers have to start and load their model (a GGUF sent to each node first).
START_S = 900.0

_FIX = "set executor.model_server: driver (the driver computes every call, as before)"


# -- what travels: a recipe for the node's copy of the model ----------------------------------


@dataclass(frozen=True)
class ScriptedRecipe:
    """A scripted model answering with ``responder`` (None: echoing the last user message)."""

    name: str
    responder: Callable[[Sequence[Message]], str] | None

    def build(self, read: ChunkReader, threads: int) -> Model:
        return ScriptedModel(self.responder, name=self.name)


@dataclass(frozen=True)
class LlamaRecipe:
    """An embedded GGUF model: its file (and LoRA) sent by hash, its settings but the threads."""

    name: str
    model: SentFile
    lora: SentFile | None
    settings: dict[str, Any]

    def build(self, read: ChunkReader, threads: int) -> Model:
        settings = {**self.settings, "n_threads": threads}
        if self.lora is not None:
            settings["lora_path"] = str(receive(self.lora, read))
        model = LlamaModel(str(receive(self.model, read)), name=self.name, **settings)
        model.load()  # now, once per node: a file llama.cpp cannot load fails the run's start
        return model


Recipe = ScriptedRecipe | LlamaRecipe


def base_model(server: Any) -> Any:
    """The model at the bottom of ``server``'s wrappers (the journal, the accounting: each keeps
    what it wraps as ``inner``) — the one that computes the replies."""
    model = server
    while getattr(model, "inner", None) is not None:
        model = model.inner
    return model


def uncopyable(model: Any) -> RatchetError | None:
    """Why ``model`` cannot be rebuilt on a node, naming the fix (None: it can)."""
    name = getattr(model, "name", type(model).__name__)
    if isinstance(model, ScriptedModel):
        # Its parts are private; they are read here only to rebuild the same model on a node.
        if model._responses is None:
            return None
        return RatchetError(f"the scripted model {name!r} answers from a list, in order: a copy on each node "
                            "would start the list again", hint="give it a responder (a function of the "
                                                               "messages), or " + _FIX)
    if isinstance(model, LlamaModel):
        return None
    return RatchetError(f"the model {name!r} ({type(model).__name__}) cannot be copied to the cluster's nodes: only "
                        "scripted and local: GGUF models can", hint=_FIX + "; an HTTP model's own server computes "
                                                                           "its calls anyway")


def recipe_for(model: Any, files: FileServer) -> Recipe:
    """How a node rebuilds ``model``; an error naming the fix for a model that cannot be copied."""
    error = uncopyable(model)
    if error is not None:
        raise error
    name = getattr(model, "name", type(model).__name__)
    if isinstance(model, ScriptedModel):
        return ScriptedRecipe(name, model._responder)
    config = model.config
    lora = files.offer(config.lora_path) if config.lora_path else None
    return LlamaRecipe(name, files.offer(config.model_path), lora,
                       config.model_dump(exclude={"model_path", "lora_path", "n_threads"}))


# -- the node's side ---------------------------------------------------------------------------


class ModelServer:
    """A Ray actor (threaded): a node's copy of the run's model. It computes, counts what it
    computed, and keeps nothing else: budget and journal are the driver's."""

    def __init__(self, recipe: Recipe, relay: Any, threads: int) -> None:
        import ray  # deferred: optional and slow; loaded already in the actor's process

        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)  # before the model loads: OpenMP reads them once
        self.node = ray.get_runtime_context().get_node_id()
        self.calls = 0
        self._lock = threading.Lock()
        self.model: Model | None = None
        self.error: BaseException | None = None
        try:
            self.model = recipe.build(lambda sha, offset, length: relay_call(relay, {"chunk": (sha, offset, length)}),
                                      threads)
        except Exception as exc:  # noqa: BLE001 - told to the driver by ready(), with the node named there
            self.error = sendable(exc)

    def ready(self) -> tuple[str, BaseException | None]:
        return self.node, self.error

    def complete(self, messages: list[Message], params: dict[str, Any]) -> tuple[Completion, tuple[str, int]]:
        """The reply, and this server's node id and process (the driver counts where each call was
        computed)."""
        assert self.model is not None, "a server whose model failed to load is never asked"
        with self._lock:
            self.calls += 1
        return self.model.complete(messages, **params), (self.node, os.getpid())

    def stats(self) -> dict[str, Any]:
        return {"node": self.node, "calls": self.calls, "pid": os.getpid()}


# -- the driver's side -------------------------------------------------------------------------


class NodeServers:
    """The driver's handles to one :class:`ModelServer` per node with room (``nodes``: those it
    started on), and where each call was computed: ``answered[(asking node, (computing node,
    server process))]`` counts calls, as the servers report themselves."""

    def __init__(self, ray: Any, recipe: Recipe, relay: Any, config: ExecutorConfig) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # deferred: ray is optional

        self._ray = ray
        self.name = recipe.name
        threads, gpus = config.model_server_threads, config.model_server_gpus
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and _room(n["Resources"], config)]
        if not nodes:
            raise RatchetError(f"no node of the cluster has room for a model server ({threads} CPUs, {gpus} GPUs) "
                               f"beside a task ({config.num_cpus} CPUs)",
                               hint="lower executor.model_server_threads, give the nodes more CPUs, or " + _FIX)
        tag = uuid.uuid4().hex[:8]
        actor = ray.remote(ModelServer)
        self.nodes = tuple(nodes)
        self.handles: dict[str, Any] = {}
        for node in nodes:
            self.handles[node] = actor.options(
                num_cpus=threads, num_gpus=gpus, max_concurrency=config.model_threads, max_restarts=0,
                name=f"ratchet-model-{tag}-{node[:12]}",
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(recipe, relay, threads)
        self.answered: collections.Counter[tuple[str | None, tuple[str, int]]] = collections.Counter()
        self._lock = threading.Lock()
        self._spare = itertools.cycle(list(self.handles))
        self._wait_ready()

    def _wait_ready(self) -> None:
        refs = {handle.ready.remote(): node for node, handle in self.handles.items()}
        done, late = self._ray.wait(list(refs), num_returns=len(refs), timeout=START_S)
        if late:
            self.close()
            raise RatchetError(f"the model servers of nodes {', '.join(refs[r][:12] for r in late)} did not start "
                               f"in {START_S:.0f} s", hint="look for the cause in the Ray logs "
                                                          "(/tmp/ray/session_latest/logs), or " + _FIX)
        for ref in done:
            node, error = self._ray.get(ref)
            if error is not None:
                self.close()
                hint = getattr(error, "hint", None)
                raise RatchetError(f"the model server on node {node[:12]} cannot run {self.name!r}: {error}",
                                   hint=(f"{hint}; or " if hint else "") + _FIX)

    def _server(self, node: str | None) -> tuple[str, Any]:
        with self._lock:
            if node in self.handles:
                return node, self.handles[node]
            if not self.handles:
                raise RatchetError(f"every model server of {self.name!r} is gone (their nodes died)",
                                   hint="resume the run when the cluster is back, or " + _FIX)
            for spare in self._spare:  # a node that joined later, or whose server died: another node computes
                if spare in self.handles:
                    return spare, self.handles[spare]
        raise AssertionError("unreachable")

    def compute(self, asked_from: str | None, messages: Sequence[Message], params: dict[str, Any]) -> Completion:
        ray = self._ray
        while True:
            node, handle = self._server(asked_from)
            try:
                completion, answered_on = ray.get(handle.complete.remote([dict(m) for m in messages], params))
            except ray.exceptions.RayTaskError as exc:  # the model's own error: the caller's, as if computed here
                raise exc.as_instanceof_cause() from None
            except ray.exceptions.RayActorError:  # the server (its node) died: the call goes to another
                log.warning("the model server on node %s died; its calls go to another node's", node[:12])
                with self._lock:
                    self.handles.pop(node, None)
                continue
            with self._lock:
                self.answered[(asked_from, answered_on)] += 1
            return completion

    def stats(self) -> list[dict[str, Any]]:
        """Each live server's own count of the calls it computed (one actor call each)."""
        return self._ray.get([handle.stats.remote() for handle in self.handles.values()])

    def close(self) -> None:
        for handle in self.handles.values():
            try:
                self._ray.kill(handle)
            except Exception:  # noqa: BLE001 - already gone with its node or the cluster
                pass
        self.handles = {}


def _room(resources: dict[str, float], config: ExecutorConfig) -> bool:
    """A node can hold a server beside at least one task (a node with no room for a task needs none)."""
    return (resources.get("CPU", 0.0) >= config.model_server_threads + config.num_cpus
            and resources.get("GPU", 0.0) >= config.model_server_gpus + config.num_gpus)


class NodeModel:
    """The node's copy as the driver's journal sees it: ``complete`` asks the server of the node
    the call came from (its accounting stays the journal's)."""

    def __init__(self, servers: NodeServers, node: str | None) -> None:
        self.servers, self.node, self.name = servers, node, servers.name

    def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        return self.servers.compute(self.node, messages, params)

    async def acomplete(self, messages: Sequence[Message], **params: Any) -> Completion:
        return await asyncio.to_thread(self.complete, messages, **params)


class NodePlacement:
    """``model_server: node`` (or ``auto`` where it can): each call computed by the model server on
    its caller's node."""

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config
        self.servers: NodeServers | None = None

    def threads(self, ray: Any) -> int:
        """Driver threads for the calls: as many as all servers take at once (they only wait)."""
        return self.config.model_threads * max(1, sum(1 for n in ray.nodes() if n.get("Alive")))

    def start(self, gateway: ModelGateway) -> None:
        recipe = recipe_for(base_model(gateway.server), gateway.files)
        self.servers = NodeServers(gateway.ray, recipe, gateway.relay, self.config)

    def answer(self, server: Any, request: dict[str, Any]) -> Completion:
        assert self.servers is not None, "start() first"
        return server.complete_for(request["unit"], request["index"], request["messages"],
                                   computed_by=NodeModel(self.servers, request.get("node")), **request["params"])

    def close(self) -> None:
        if self.servers is not None:
            self.servers.close()


def placement_for(config: ExecutorConfig, ray: Any = None, server: Any = None) -> NodePlacement | DriverPlacement:
    """Where the model calls of remote units are computed, as ``config.model_server`` says. With
    ``auto`` (the default) the nodes' servers compute them when the model can be copied there
    (``server``'s model: scripted with a responder, or a ``local:`` GGUF) and a node has room for a
    server beside a task (``ray``'s live nodes); otherwise the driver does, with a log line saying
    why: a default should not stop a run that the driver can serve as well."""
    if config.model_server == "driver":
        return DriverPlacement()
    if config.model_server == "auto":
        why = uncopyable(base_model(server)) if server is not None else None
        if why is None and ray is not None and not any(n.get("Alive") and _room(n["Resources"], config)
                                                       for n in ray.nodes()):
            why = RatchetError(f"no node has room for a model server ({config.model_server_threads} CPUs) beside a "
                               f"task ({config.num_cpus} CPUs)")
        if why is not None:
            log.info("model calls of remote units are computed by the driver: %s", why)
            return DriverPlacement()
    return NodePlacement(config)
