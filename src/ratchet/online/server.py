"""The OpenAI-compatible server: ``/v1/chat/completions`` (streaming and not, tools included) and
``/v1/models``; on the same app ``/v1/feedback`` (:mod:`ratchet.online.feedback`) and Anthropic's
``/v1/messages`` (:mod:`ratchet.online.anthropic`). One turn's path is :mod:`ratchet.online.turns`.

The request path does as little as possible beyond generation: tag the session (in memory), run
the policy (one request at a time on the embedded model, in a worker thread so the event loop
keeps accepting connections), answer, and hand the turn to the :class:`Collector`, a background
thread that writes turns and next states to the on-disk queue in batches. Judging and training
happen in other processes; nothing here waits for them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue as stdqueue
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ratchet.online.api import BodyLimit, ChatRequest, error_body, tool_error, validation_error
from ratchet.online.feedback import Receipts, record_feedback
from ratchet.online.policy import Generation, PolicyHost
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn
from ratchet.online.sessions import SessionTracker
from ratchet.online.tool_calls import ToolInputError, check_request, choice_constraint
from ratchet.online.turns import ServedTurn, ServeError, TurnResult, TurnSpec, start_turn

log = logging.getLogger("ratchet.online.server")


class Collector:
    """Rollout collection off the request path: a thread that batches queue writes.

    Items are applied in submission order, so a next state never arrives before its turn.
    """

    def __init__(self, turn_queue: TurnQueue | None, linger_s: float = 0.05) -> None:
        self._queue = turn_queue
        # Waiting a moment after the first item batches a burst into one transaction, so the
        # writer thread wakes (and takes the GIL) once per burst instead of once per request.
        self._linger_s = linger_s
        self._items: stdqueue.Queue[tuple[str, Any] | None] = stdqueue.Queue()
        self.collected = 0
        self.paired = 0
        self._thread = threading.Thread(target=self._run, name="collector", daemon=True)
        self._thread.start()

    def add_turn(self, turn: Turn) -> None:
        self._items.put(("turn", turn))

    def set_next_state(self, turn_id: str, text: str, *, wait: bool = False) -> Future[bool] | None:
        """Queue a turn's next state; with ``wait``, a future that tells whether it was set (False:
        the turn already had one, or was judged)."""
        done: Future[bool] | None = Future() if wait else None
        self._items.put(("next", (turn_id, text, done)))
        return done

    def add_judgement(self, judgement: Judgement) -> None:
        """A judgement made here (explicit feedback), written after the turn it judges."""
        self._items.put(("judgement", judgement))

    def flush(self) -> None:
        """Block until everything submitted so far is on disk."""
        self._items.join()

    def close(self) -> None:
        self.flush()
        self._items.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            first = self._items.get()
            batch = [first]
            if first is not None and self._linger_s:
                time.sleep(self._linger_s)
            while len(batch) < 512:
                try:
                    batch.append(self._items.get_nowait())
                except stdqueue.Empty:
                    break
            try:
                self._write([b for b in batch if b is not None])
            except Exception as exc:  # never lose the serving process over a write; the log says what failed
                log.exception("could not write %d collected items to the queue", len(batch))
                for item in batch:  # nobody waits forever on a write that failed
                    if item is not None and item[0] == "next" and item[1][2] is not None and not item[1][2].done():
                        item[1][2].set_exception(exc)
            for _ in batch:
                self._items.task_done()
            if any(b is None for b in batch):
                return

    def _write(self, items: list[tuple[str, Any]]) -> None:
        pending: list[Turn] = []
        for kind, payload in items:
            if kind == "turn":
                pending.append(payload)
                continue
            if self._queue is not None:
                self._queue.add_turns(pending)
            pending = []
            if kind == "judgement":
                if self._queue is not None:
                    self._queue.add_judgement(payload)
                continue
            turn_id, text, done = payload
            applied = self._queue.set_next_state(turn_id, text) if self._queue is not None else False
            if done is not None:
                done.set_result(applied)
            self.paired += 1
        if self._queue is not None:
            self._queue.add_turns(pending)
        self.collected += sum(1 for k, _ in items if k == "turn")


@dataclass
class ServingState:
    """Everything a request handler needs; built by ``ratchet serve`` or by a test."""

    host: PolicyHost
    tracker: SessionTracker
    collector: Collector
    served_name: str = "ratchet"
    api_key: str | None = None
    max_tokens: int = 512
    max_body_bytes: int = 2 * 1024 * 1024
    backend_concurrency: int = 1
    learn: bool = True
    context: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
    """What the model is shown for a request's messages (``context.online``: the playbook's lessons
    added); None: the messages themselves."""
    receipts: Receipts = field(default_factory=Receipts)
    requests: int = 0
    errors: int = 0
    started_at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=self.backend_concurrency, thread_name_prefix="generate")
        self.cancel = threading.Event()  # set at shutdown: generations stop at their next token
        self._running: set[Future[Any]] = set()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run a generation on the backend's threads, tracked so that shutdown can wait for it."""
        future = self.executor.submit(fn)
        self._running.add(future)
        future.add_done_callback(self._running.discard)
        return future

    def stop_generating(self, timeout_s: float) -> bool:
        """Cancel the generations in progress and the queued ones, wait up to ``timeout_s`` for
        them; False when one is still running then (the caller must not wait for it)."""
        self.cancel.set()
        self.executor.shutdown(wait=False, cancel_futures=True)
        _, running = wait(list(self._running), timeout=timeout_s)
        return not running


class RequestCancel:
    """What one generation polls between tokens: set once the server shuts down OR this request's
    client has gone (a closed stream or connection), so nobody's tokens are generated for no one.

    Quacks like the ``threading.Event`` the policies take (``is_set``).
    """

    def __init__(self, shutdown: threading.Event) -> None:
        self._shutdown = shutdown
        self._gone = threading.Event()

    def client_gone(self) -> None:
        self._gone.set()

    @property
    def client_left(self) -> bool:
        return self._gone.is_set()

    def is_set(self) -> bool:
        return self._gone.is_set() or self._shutdown.is_set()


async def watch_disconnect(request: Request, cancel: RequestCancel) -> None:
    """Until cancelled: wait for the client's ``http.disconnect`` (the body is already read, so the
    next message is that one) and mark the request's generation cancelled."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            log.info("client disconnected before its reply was complete: generation stopped")
            cancel.client_gone()
            return


def _error(status: int, message: str, code: str, kind: str = "invalid_request_error", param: str | None = None):
    return JSONResponse(status_code=status, content=error_body(message, code, param, kind))


def _serve_error(exc: ServeError) -> JSONResponse:
    return _error(exc.status, str(exc), exc.code, exc.kind, exc.param)


def _logprobs_block(gen: Generation) -> dict[str, Any]:
    texts = gen.token_texts or [""] * len(gen.token_ids)
    return {
        "content": [
            {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8")), "top_logprobs": []}
            for t, lp in zip(texts, gen.logprobs, strict=False)
        ]
    }


async def read_json(request: Request) -> dict[str, Any] | ServeError:
    """The request body as a JSON object, or the 400 saying why it is not one."""
    try:
        raw = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ServeError(400, "the body is not valid JSON", "invalid_json")
    except RecursionError:  # nesting deeper than the parser's stack, well inside the size limit
        return ServeError(400, "the body is nested too deeply", "invalid_json")
    if not isinstance(raw, dict):
        return ServeError(400, "the body must be a JSON object", "invalid_json")
    return raw


def _usage(gen: Generation) -> dict[str, int]:
    return {"prompt_tokens": len(gen.prompt_token_ids), "completion_tokens": len(gen.token_ids),
            "total_tokens": len(gen.prompt_token_ids) + len(gen.token_ids)}


def openai_completion(turn: ServedTurn, result: TurnResult, state: ServingState, logprobs: bool) -> dict[str, Any]:
    """A finished turn as a ``chat.completion`` object."""
    gen, reply = result.gen, result.reply
    extra = turn.extra
    if logprobs:
        extra.update(prompt_token_ids=gen.prompt_token_ids, response_token_ids=gen.token_ids)
    message: dict[str, Any] = {"role": "assistant", "content": reply.content if reply.calls else gen.text}
    if reply.calls:
        message["tool_calls"] = [c.as_openai() for c in reply.calls]
    return {"id": f"chatcmpl-{turn.turn_id}", "object": "chat.completion", "created": int(time.time()),
            "model": state.served_name,
            "choices": [{"index": 0, "message": message, "finish_reason": result.finish_reason,
                         "logprobs": _logprobs_block(gen) if logprobs else None}],
            "usage": _usage(gen), "ratchet": extra}


async def openai_events(turn: ServedTurn, state: ServingState):
    """A turn as ``chat.completion.chunk`` server-sent events: text deltas as they come, each
    tool call as one ``tool_calls`` delta once its closing tag arrived, then the finish."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **more: Any) -> str:
        payload = {"id": f"chatcmpl-{turn.turn_id}", "object": "chat.completion.chunk", "created": created,
                   "model": state.served_name,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}
        payload.update(more)
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    calls = 0
    async for kind, payload in turn.stream():
        if kind == "text":
            yield chunk({"content": payload})
        elif kind == "call":
            yield chunk({"tool_calls": [{"index": calls, **payload.as_openai()}]})
            calls += 1
        elif kind == "error":
            body = error_body(str(payload), payload.code, payload.param, payload.kind)
            yield f"data: {json.dumps(body)}\n\n"
            break
        else:
            result: TurnResult = payload
            yield chunk({}, result.finish_reason, usage=_usage(result.gen), ratchet=turn.extra)
    yield "data: [DONE]\n\n"


def create_app(state: ServingState):
    """The ASGI application over ``state``: FastAPI behind the body size limit."""

    app = FastAPI(title="Ratchet", docs_url=None, redoc_url=None)
    app.state.serving = state

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        # An unknown path or method gets OpenAI's error shape too, so a client's error handling
        # (the stock ``openai`` client reads ``error.message``) sees what went wrong.
        code = {404: "unknown_url", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", code)

    def authorized(request: Request) -> bool:
        if not state.api_key:
            return True
        auth = request.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(token.strip(), state.api_key)

    def unauthorized():
        return _error(401, "Incorrect API key provided. Send it as 'Authorization: Bearer KEY'.", "invalid_api_key")

    @app.get("/v1/models")
    async def models(request: Request):
        if not authorized(request):
            return unauthorized()
        return {"object": "list", "data": [{"id": state.served_name, "object": "model",
                                            "created": int(state.started_at), "owned_by": "ratchet"}]}

    @app.get("/health")
    async def health():
        return {"ok": True, "policy_version": state.host.version, "sessions": len(state.tracker),
                "requests": state.requests}

    @app.delete("/v1/ratchet/sessions/{session_id}")
    async def forget(session_id: str, request: Request):
        if not authorized(request):
            return unauthorized()
        return {"forgotten": state.tracker.forget(session_id)}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        if not authorized(request):
            return unauthorized()
        raw = await read_json(request)
        if isinstance(raw, ServeError):
            return _serve_error(raw)
        body, body_tags = SessionTracker.split_body(raw)
        try:
            req = ChatRequest.model_validate(body)
        except ValidationError as exc:
            return JSONResponse(status_code=400, content=validation_error(exc))
        if req.model is not None and req.model != state.served_name:
            return _error(404, f"The model '{req.model}' does not exist; this server serves '{state.served_name}'",
                          "model_not_found", param="model")
        messages = req.message_dicts()
        try:
            tools = req.tool_list()
            check_request(tools, messages)
            constraint = choice_constraint(tools, req.choice(), parallel=req.parallel_tool_calls is not False)
        except ToolInputError as exc:
            return JSONResponse(status_code=400, content=tool_error(exc))
        spec = TurnSpec(messages, request.headers, body_tags,
                        max_tokens=req.max_tokens or req.max_completion_tokens or state.max_tokens,
                        temperature=req.temperature or 0.0, top_p=req.top_p or 1.0, stop=req.stop_list(),
                        seed=req.seed, tools=tools, constraint=constraint, use_tools=req.choice() != "none")
        try:
            turn = await start_turn(state, spec, request)
        except ServeError as exc:
            return _serve_error(exc)
        if req.stream:
            return StreamingResponse(openai_events(turn, state), media_type="text/event-stream", headers=turn.headers)
        try:
            result = await turn.run()
        except ServeError as exc:
            return _serve_error(exc)
        return JSONResponse(headers=turn.headers, content=openai_completion(turn, result, state, bool(req.logprobs)))

    @app.post("/v1/feedback")
    async def feedback(request: Request):
        if not authorized(request):
            return unauthorized()
        raw = await read_json(request)
        if isinstance(raw, ServeError):
            return _serve_error(raw)
        status, body = await record_feedback(state, raw)
        return JSONResponse(status_code=status, content=body)

    from ratchet.online.anthropic import add_messages_route  # it imports this module's helpers

    add_messages_route(app, state)

    return BodyLimit(app, state.max_body_bytes)


async def check_context(policy: Any, messages: list[dict[str, Any]], loop: Any, executor: Any):
    """A 400 (a :class:`ServeError`, or None) naming the limit when the prompt leaves no room for a reply in the served context.

    Only for policies that know their context (``max_prompt_tokens``); tokenizing runs on the
    generation executor, off the event loop. Messages the chat template cannot render are bad
    input too (a 400), not a server error.
    """
    limit = getattr(policy, "max_prompt_tokens", None)
    if not limit:
        return None
    at_least = getattr(policy, "prompt_tokens_at_least", None)
    try:
        # First the bound without the tokenizer, off both the event loop and the generation
        # executor: a prompt far over the limit then never holds up the generations queued there.
        n = await loop.run_in_executor(None, at_least, messages) if at_least is not None else 0
        known = "at least " if n > limit else ""
        if n <= limit:
            n = len(await loop.run_in_executor(executor, policy.prompt_tokens, messages))
    except Exception as exc:
        return ServeError(400, f"the served model's chat template cannot render these messages: {exc}",
                          "invalid_messages", param="messages")
    if n > limit:
        return ServeError(400, f"the prompt is {known}{n} tokens; the served context allows at most {limit} prompt "
                          "tokens (shorten the conversation, or serve with a larger --set n_ctx=N)",
                          "context_length_exceeded", param="messages")
    return None


def make_state(host: PolicyHost, turn_queue: TurnQueue | None, *, tracker: SessionTracker | None = None,
               **kwargs: Any) -> ServingState:
    """A serving state with a collector writing to ``turn_queue`` (None: collect nothing); feedback
    receipts fall back to the queue for replies served before a restart."""
    if turn_queue is not None and "receipts" not in kwargs:
        kwargs["receipts"] = Receipts(lookup=turn_queue.feedback_receipt)
    return ServingState(host=host, tracker=tracker or SessionTracker(), collector=Collector(turn_queue), **kwargs)


class GracefulServer(uvicorn.Server):
    """uvicorn, stopping within a bound: at shutdown (SIGTERM, Ctrl-C) requests in flight get
    ``grace_s`` to finish, then their generation is cancelled (a 503 ``shutting_down``, or an error
    event in a stream); a request still running ``backstop_s`` later is cancelled by uvicorn.

    Without this a request in flight held shutdown for as long as its generation took (minutes
    for a long reply on CPU), and the serving process outlived the signal.
    """

    def __init__(self, config: uvicorn.Config, state: ServingState, grace_s: float, backstop_s: float = 5.0) -> None:
        config.timeout_graceful_shutdown = grace_s + backstop_s
        super().__init__(config)
        self.state, self.grace_s = state, grace_s

    async def shutdown(self, sockets: Any = None) -> None:
        asyncio.get_running_loop().call_later(self.grace_s, self.state.cancel.set)
        await super().shutdown(sockets)


class ServerThread:
    """Run an ASGI app with uvicorn on a background thread (tests, benchmarks, the Ray actor).

    ``port=0`` binds a free port; ``.port`` tells which. ``stop()`` shuts down gracefully.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> None:
        import socket

        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off",
                                timeout_keep_alive=30, backlog=2048)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline or not self._thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
