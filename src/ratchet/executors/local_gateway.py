"""The driver's model, served to the worker processes of the local pool (``--workers N``).

The local counterpart of :mod:`ratchet.executors.gateway`: a unit that calls the model in a pool
process gets a :class:`PipeModel`, which sends each call — numbered by its unit
(:mod:`ratchet.executors.units`) — over a Unix socket to this process, where a thread per
connection answers it through the driver's :class:`~ratchet.executors.units.UnitServer` (accounted and
journaled there, by the store's one writer). So a pool's evaluations count against the run's one
budget, each reply is journaled once under (unit, call number), and a unit rerun after a kill or a
resume is given the replies its earlier attempt got instead of paying for them again.

The socket is private to this user (a fresh temporary directory) and each connection must prove
it holds the gateway's random key (``multiprocessing.connection``'s challenge), so no other
process on the machine can spend the run's budget.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import threading
from collections.abc import Sequence
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from ratchet.contracts import Completion, Message
from ratchet.executors.gateway import sendable
from ratchet.executors.units import UnitServer, next_call

log = logging.getLogger("ratchet.executors.local_gateway")

#: This process's idle connections to each gateway (address -> connections): a unit arrives
#: pickled with its own copy of the model, so they are kept here, not on the model. A call takes
#: an idle one or opens another, so calls made at once (threads, or ``acomplete`` on one event
#: loop) each have their own and are answered at once, by the gateway's thread per connection.
_IDLE: dict[str, list[Connection]] = {}
_IDLE_LOCK = threading.Lock()


class PipeModel:
    """A ``Model`` a unit carries to a pool process: each call goes to the driver over the socket.
    Picklable (an address, a key and a name); a process opens a connection per call in flight."""

    def __init__(self, address: str, key: bytes, name: str) -> None:
        self.address, self.key, self.name = address, key, name

    def _request(self, messages: Sequence[Message], params: dict[str, Any]) -> dict[str, Any]:
        unit, index = next_call()  # numbered here, in the caller's unit scope, before any thread
        return {"unit": unit, "index": index, "messages": [dict(m) for m in messages], "params": params}

    def _send(self, request: dict[str, Any]) -> Completion:
        with _IDLE_LOCK:
            idle = _IDLE.setdefault(self.address, [])
            conn = idle.pop() if idle else None
        if conn is None:
            conn = Client(self.address, family="AF_UNIX", authkey=self.key)
        conn.send(request)
        status, value = conn.recv()  # an error here drops the connection: its state is unknown
        with _IDLE_LOCK:
            _IDLE[self.address].append(conn)
        if status == "error":
            raise value
        return value

    def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        return self._send(self._request(messages, params))

    async def acomplete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """As ``complete``, with the socket's wait in a thread: the event loop goes on meanwhile."""
        return await asyncio.to_thread(self._send, self._request(messages, params))


class LocalGateway:
    """Serves ``server`` to the pool's processes while it is open: ``model`` is what the units get."""

    def __init__(self, server: UnitServer) -> None:
        self.server = server
        self._key = secrets.token_bytes(32)
        self._listener = Listener(family="AF_UNIX", authkey=self._key)  # in a fresh 0700 temporary directory
        self.model = PipeModel(self._listener.address, self._key, server.name)
        self.served = 0
        self._served_lock = threading.Lock()
        self._closed = threading.Event()
        self._conns: list[Connection] = []
        self._acceptor = threading.Thread(target=self._accept, name="ratchet-local-gateway", daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn = self._listener.accept()
            except (OSError, EOFError, AuthenticationError) as exc:  # closed, or a caller that failed the key check
                if not self._closed.is_set():
                    log.warning("refused a connection to the model gateway: %s", exc)
                continue
            if self._closed.is_set():
                conn.close()
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="ratchet-local-gateway-conn", daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):  # the worker process ended (or this gateway closed)
                return
            try:
                reply: tuple[str, Any] = ("ok", self.server.complete_for(request["unit"], request["index"],
                                                                         request["messages"], **request["params"]))
            except Exception as exc:  # noqa: BLE001 - the caller raises it (a budget stop, a model error)
                reply = ("error", sendable(exc))
            with self._served_lock:
                self.served += 1
            try:
                conn.send(reply)
            except (OSError, ValueError):  # the worker died waiting; the reply is journaled all the same
                return

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        # Wake the acceptor, blocked in accept(), with a bare connection: its key check fails at
        # once and the loop sees the gateway closed. Not an authenticated Client: that waits for the
        # acceptor's challenge, forever when the acceptor is not there to send it.
        if self._acceptor.is_alive():
            with socket.socket(socket.AF_UNIX) as wake:
                try:
                    wake.connect(self._listener.address)
                except OSError:
                    pass
        self._acceptor.join(timeout=5)
        self._listener.close()
        for conn in self._conns:
            conn.close()

    def __enter__(self) -> LocalGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
