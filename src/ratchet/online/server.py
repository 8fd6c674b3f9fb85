"""The OpenAI-compatible server: ``/v1/chat/completions`` (streaming and not) and ``/v1/models``.

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

from ratchet.online.api import BodyLimit, ChatRequest, error_body, validation_error
from ratchet.online.policy import BackendFailed, Generation, GenerationCancelled, PolicyHost, RequestRefused
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Turn, new_turn_id
from ratchet.online.sessions import SessionTracker

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

    def set_next_state(self, turn_id: str, text: str) -> None:
        self._items.put(("next", (turn_id, text)))

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
            except Exception:  # never lose the serving process over a write; the log says what failed
                log.exception("could not write %d collected items to the queue", len(batch))
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
                self._queue.set_next_state(*payload)
            pending = []
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


async def _watch_disconnect(request: Request, cancel: RequestCancel) -> None:
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


def _logprobs_block(gen: Generation) -> dict[str, Any]:
    texts = gen.token_texts or [""] * len(gen.token_ids)
    return {
        "content": [
            {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8")), "top_logprobs": []}
            for t, lp in zip(texts, gen.logprobs, strict=False)
        ]
    }


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
        try:
            raw = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the body is not valid JSON", "invalid_json")
        except RecursionError:  # nesting deeper than the parser's stack, well inside the size limit
            return _error(400, "the body is nested too deeply", "invalid_json")
        if not isinstance(raw, dict):
            return _error(400, "the body must be a JSON object", "invalid_json")
        body, body_tags = SessionTracker.split_body(raw)
        try:
            req = ChatRequest.model_validate(body)
        except ValidationError as exc:
            return JSONResponse(status_code=400, content=validation_error(exc))
        if req.model is not None and req.model != state.served_name:
            return _error(404, f"The model '{req.model}' does not exist; this server serves '{state.served_name}'",
                          "model_not_found", param="model")
        messages = req.message_dicts()
        policy, version = state.host.acquire()
        loop = asyncio.get_running_loop()
        too_long = await _check_context(policy, messages, loop, state.executor)
        if too_long is not None:
            return too_long
        tag = state.tracker.tag(request.headers, body_tags, messages)
        if tag.pair_with is not None and state.learn:
            state.collector.set_next_state(*tag.pair_with)
        kwargs = dict(
            max_tokens=req.max_tokens or req.max_completion_tokens or state.max_tokens,
            temperature=req.temperature or 0.0,
            top_p=req.top_p or 1.0,
            stop=req.stop_list(),
            seed=req.seed,
        )
        turn_id = new_turn_id()
        state.requests += 1
        extra = {"turn_id": turn_id, "session_id": tag.session_id, "session_inferred": tag.inferred,
                 "turn_type": tag.turn_type, "policy_version": version}
        headers = {"X-Session-Id": tag.session_id, "X-Turn-Id": turn_id, "X-Policy-Version": str(version)}
        created = int(time.time())
        want_logprobs = bool(req.logprobs)
        cancel = RequestCancel(state.cancel)

        def finish(gen: Generation) -> None:
            closing = state.tracker.served(tag, turn_id, messages, gen.text)
            if state.learn:
                state.collector.add_turn(Turn(
                    turn_id=turn_id, session_id=tag.session_id, session_inferred=tag.inferred,
                    turn_type=tag.turn_type, messages=messages, response_text=gen.text,
                    prompt_token_ids=list(gen.prompt_token_ids), response_token_ids=list(gen.token_ids),
                    response_logprobs=list(gen.logprobs), policy_version=version,
                ))
                if closing is not None:
                    state.collector.set_next_state(*closing)

        if not req.stream:
            watcher = asyncio.create_task(_watch_disconnect(request, cancel))
            try:
                if hasattr(policy, "agenerate"):  # an HTTP backend: await it on the loop, no thread hop
                    gen = await policy.agenerate(messages, cancel=cancel, **kwargs)
                else:
                    gen = await asyncio.wrap_future(
                        state.submit(lambda: policy.generate(messages, cancel=cancel, **kwargs)))
            except GenerationCancelled as exc:
                if cancel.client_left:  # nobody is there to read an answer
                    return _error(499, "the client closed the request", "client_closed_request")
                return _error(503, str(exc), "shutting_down", "server_error")
            except RequestRefused as exc:  # the backend refused the request as given: the client's to fix
                return _error(exc.status, str(exc), exc.code, param=exc.param)
            except BackendFailed as exc:
                state.errors += 1
                log.warning("%s", exc)
                return _error(502, str(exc), "backend_failed", "server_error")
            except Exception as exc:
                state.errors += 1
                log.exception("generation failed")
                return _error(500, f"generation failed: {exc}", "generation_failed", "server_error")
            finally:
                watcher.cancel()
            finish(gen)
            if want_logprobs:
                extra.update(prompt_token_ids=gen.prompt_token_ids, response_token_ids=gen.token_ids)
            return JSONResponse(headers=headers, content={
                "id": f"chatcmpl-{turn_id}", "object": "chat.completion", "created": created,
                "model": state.served_name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": gen.text},
                             "finish_reason": gen.finish_reason,
                             "logprobs": _logprobs_block(gen) if want_logprobs else None}],
                "usage": {"prompt_tokens": len(gen.prompt_token_ids), "completion_tokens": len(gen.token_ids),
                          "total_tokens": len(gen.prompt_token_ids) + len(gen.token_ids)},
                "ratchet": extra,
            })

        pieces: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def produce() -> None:
            def on_text(text: str) -> None:
                loop.call_soon_threadsafe(pieces.put_nowait, ("text", text))
            try:
                gen = policy.generate(messages, on_text=on_text, cancel=cancel, **kwargs)
                finish(gen)
                loop.call_soon_threadsafe(pieces.put_nowait, ("end", gen))
            except GenerationCancelled as exc:
                loop.call_soon_threadsafe(pieces.put_nowait, ("error", exc))
            except RequestRefused as exc:  # the client's to fix, as in a reply without streaming
                loop.call_soon_threadsafe(pieces.put_nowait, ("refused", exc))
            except Exception as exc:  # reported to the client as an error event
                log.exception("generation failed")
                loop.call_soon_threadsafe(pieces.put_nowait, ("error", exc))

        def chunk(delta: dict[str, Any], finish_reason: str | None = None, **more: Any) -> str:
            payload = {"id": f"chatcmpl-{turn_id}", "object": "chat.completion.chunk", "created": created,
                       "model": state.served_name,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}
            payload.update(more)
            return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

        async def events():
            ended = False
            try:
                state.submit(produce)
                yield chunk({"role": "assistant", "content": ""})
                while True:
                    kind, payload = await pieces.get()
                    if kind == "text":
                        yield chunk({"content": payload})
                    elif kind == "refused":
                        yield f"data: {json.dumps(error_body(str(payload), payload.code, payload.param))}\n\n"
                        break
                    elif kind == "error":
                        state.errors += 1
                        err = {"error": {"message": f"generation failed: {payload}", "type": "server_error",
                                         "param": None, "code": "generation_failed"}}
                        yield f"data: {json.dumps(err)}\n\n"
                        break
                    else:
                        gen: Generation = payload
                        usage = {"prompt_tokens": len(gen.prompt_token_ids), "completion_tokens": len(gen.token_ids),
                                 "total_tokens": len(gen.prompt_token_ids) + len(gen.token_ids)}
                        yield chunk({}, gen.finish_reason, usage=usage, ratchet=extra)
                        break
                yield "data: [DONE]\n\n"
                ended = True
            finally:
                # Left before the end: the client disconnected (starlette cancels the stream) or
                # the response was closed; the generation stops at its next token.
                if not ended:
                    cancel.client_gone()

        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    return BodyLimit(app, state.max_body_bytes)


async def _check_context(policy: Any, messages: list[dict[str, Any]], loop: Any, executor: Any):
    """A 400 naming the limit when the prompt leaves no room for a reply in the served context.

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
        return _error(400, f"the served model's chat template cannot render these messages: {exc}",
                      "invalid_messages", param="messages")
    if n > limit:
        return _error(400, f"the prompt is {known}{n} tokens; the served context allows at most {limit} prompt "
                      "tokens (shorten the conversation, or serve with a larger --set n_ctx=N)",
                      "context_length_exceeded", param="messages")
    return None


def make_state(host: PolicyHost, turn_queue: TurnQueue | None, *, tracker: SessionTracker | None = None,
               **kwargs: Any) -> ServingState:
    """A serving state with a collector writing to ``turn_queue`` (None: collect nothing)."""
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
