"""The driver, answering work that runs on other machines of a Ray cluster: its model, its stores.

A unit that calls the model (a workflow suite's evaluation) must not carry the run's model with it:
its calls would escape the run's one budget and be journaled by a second writer. Instead the unit
gets a :class:`RemoteModel`, which sends each call — numbered by its unit
(:mod:`ratchet.executors.units`) — to a :class:`Relay` actor; threads of the driver take the
calls from the relay, answer each through the driver's :class:`~ratchet.executors.units.UnitServer`
(accounted and journaled there, by the store's one writer) and hand the reply back through the
relay. A call a lost attempt already got is answered again from the journal, not paid again.
Where a call not in the journal is *computed* is the gateway's placement: here, by the driver's
model (:class:`DriverPlacement`, ``executor.model_server: driver``), or by the model server on the
caller's node (:mod:`ratchet.executors.node_server`, the default on Ray), accounted and journaled
here either way.

The relay holds no state worth keeping: it lives as long as the driver (Ray ends an actor with
its owner), and a reply it loses to a dead worker was journaled before it was sent.

The relay and the driver's side of it (:class:`Gateway`) carry any request, not only model calls:
the online loops reach the driver's session queue and version store through one
(:mod:`ratchet.online.relayed`), so their actors need no disk the driver's run directory is on.

``ray`` is imported when a gateway or remote call is made, not at module import (an optional,
slow-to-import dependency).
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from ratchet.contracts import Completion, Message, RatchetError
from ratchet.executors.files import FileServer
from ratchet.executors.units import UnitServer, next_call

log = logging.getLogger("ratchet.executors.gateway")

#: Seconds one poll of the relay waits for a call before the driver's thread looks again.
POLL_S = 0.2


class Relay:
    """A Ray actor (asynchronous) between remote callers and the driver: callers ``call`` and wait;
    the driver ``take``s the calls waiting and ``answer``s each."""

    def __init__(self) -> None:
        self._calls: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._next = 0

    async def call(self, request: dict[str, Any]) -> tuple[str, Any]:
        future = asyncio.get_running_loop().create_future()
        self._next += 1
        self._waiting[self._next] = future
        await self._calls.put((self._next, request))
        return await future

    async def take(self, wait_s: float) -> list[tuple[int, dict[str, Any]]]:
        try:
            taken = [await asyncio.wait_for(self._calls.get(), wait_s)]
        except asyncio.TimeoutError:
            return []
        while not self._calls.empty():
            taken.append(self._calls.get_nowait())
        return taken

    async def answer(self, ident: int, reply: tuple[str, Any]) -> None:
        future = self._waiting.pop(ident, None)
        if future is not None and not future.done():  # a caller whose worker died waits no more
            future.set_result(reply)


class RemoteModel:
    """A ``Model`` that a unit carries to its worker: each call goes to the driver through the relay.
    Picklable (an actor handle and a name)."""

    def __init__(self, relay: Any, name: str) -> None:
        self.relay = relay
        self.name = name

    def _request(self, messages: Sequence[Message], params: dict[str, Any]) -> dict[str, Any]:
        unit, index = next_call()
        return {"unit": unit, "index": index, "messages": [dict(m) for m in messages], "params": params,
                "node": _this_node()}

    def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        return relay_call(self.relay, self._request(messages, params))

    async def acomplete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """As ``complete``, awaiting the relay's reply (a Ray reference is awaitable): the event
        loop goes on meanwhile, and calls made at once are answered at once by the driver's threads."""
        return _unwrap(await self.relay.call.remote(self._request(messages, params)))


_NODE: list[str] = []  # this process's Ray node id, looked up once


def _this_node() -> str:
    """The Ray node this process runs on: the driver computes the call on that node's model server."""
    if not _NODE:
        import ray  # deferred: optional and slow to import; a process that calls the relay has it loaded

        _NODE.append(ray.get_runtime_context().get_node_id())
    return _NODE[0]


def _unwrap(reply: tuple[str, Any]) -> Any:
    status, value = reply
    if status == "error":
        raise value
    return value


def relay_call(relay: Any, request: Any) -> Any:
    """Send ``request`` to the driver through ``relay`` and wait for its answer; an error the
    driver's answer raised is raised here."""
    import ray  # deferred: optional and slow to import; a worker that runs this has it loaded

    return _unwrap(ray.get(relay.call.remote(request)))


def sendable(exc: BaseException) -> BaseException:
    """``exc``, or its text when it does not pickle: it travels back to the worker that asked."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any unpicklable error
        return RatchetError(f"{type(exc).__name__}: {exc}")


class Gateway:
    """Answers requests that remote callers send through a :class:`Relay`, with ``answer(request)``
    run in this (the driver's) process, while it is open. ``relay`` is the handle to give them.

    ``threads`` requests are answered at once (for model calls, more help an HTTP model server
    that batches; an embedded model answers one at a time whatever the count).
    """

    def __init__(self, ray: Any, answer: Callable[[Any], Any], threads: int = 4) -> None:
        self._ray = ray
        self._answer = answer
        # deferred: ray is optional. The relay runs on the driver's node (soft: anywhere if it cannot).
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        self.relay = ray.remote(Relay).options(num_cpus=0, scheduling_strategy=strategy).remote()
        self.served = 0
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ratchet-gateway")
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="ratchet-gateway-poll", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                taken = self._ray.get(self.relay.take.remote(POLL_S))
            except Exception as exc:  # noqa: BLE001 - the relay is gone (Ray shut down): nothing left to serve
                if not self._stop.is_set():
                    log.warning("gateway stopped: %s", exc)
                return
            for ident, request in taken:
                self._pool.submit(self._serve, ident, request)

    def _serve(self, ident: int, request: Any) -> None:
        try:
            reply: tuple[str, Any] = ("ok", self._answer(request))
        except Exception as exc:  # noqa: BLE001 - the caller raises it (a budget stop, a model error, a bad request)
            reply = ("error", sendable(exc))
        self.served += 1
        try:
            self.relay.answer.remote(ident, reply)
        except Exception:  # noqa: BLE001 - Ray is shutting down; no caller is left to wait
            pass

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._poller.join(timeout=POLL_S * 10)
        self._pool.shutdown(wait=True)
        try:
            self._ray.kill(self.relay)
        except Exception:  # noqa: BLE001 - already gone with the cluster
            pass

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Placement(Protocol):
    """Where the calls of remote units are computed (a strategy of the :class:`ModelGateway`)."""

    def threads(self, ray: Any) -> int | None:
        """Driver threads the gateway answers with (None: ``executor.model_threads``)."""
        ...

    def start(self, gateway: ModelGateway) -> None:
        """Ready to compute (the nodes' servers started), before any unit is submitted."""
        ...

    def answer(self, server: UnitServer, request: dict[str, Any]) -> Completion:
        """The reply to one call, through ``server`` (the driver's journal and budget)."""
        ...

    def close(self) -> None:
        ...


class DriverPlacement:
    """``model_server: driver``: the driver's own model computes every call of remote units (the
    fallback for a model that cannot be copied to the nodes; :mod:`ratchet.executors.node_server`
    has the default, one model server per node)."""

    def threads(self, ray: Any) -> int | None:
        return None  # the executor's ``model_threads``

    def start(self, gateway: ModelGateway) -> None:
        pass

    def answer(self, server: UnitServer, request: dict[str, Any]) -> Completion:
        return server.complete_for(request["unit"], request["index"], request["messages"], **request["params"])

    def close(self) -> None:
        pass


class ModelGateway(Gateway):
    """Serves ``server`` to remote units while it is open: ``model`` is what the units get; each
    call is answered by ``server.complete_for`` (accounted and journaled in the driver) and computed
    where ``placement`` says (default: here). Files the placement offers (a model file for the
    nodes) are read through the same relay."""

    def __init__(self, ray: Any, server: UnitServer, threads: int = 4, placement: Placement | None = None) -> None:
        self.server = server
        self.ray = ray
        self.files = FileServer()
        self.placement = placement or DriverPlacement()
        super().__init__(ray, self._dispatch, threads)
        self.model = RemoteModel(self.relay, server.name)
        try:
            self.placement.start(self)  # the nodes' model servers, if any, load (asking for files) now
        except BaseException:
            self.close()
            raise

    def _dispatch(self, request: dict[str, Any]) -> Any:
        if "chunk" in request:
            return self.files.chunk(*request["chunk"])
        return self.placement.answer(self.server, request)

    def close(self) -> None:
        self.placement.close()
        super().close()
