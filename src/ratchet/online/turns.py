"""One served turn, whichever API asked for it: tag, generate (tools and forced calls included),
split the reply into text and calls, record the turn.

The OpenAI and the Anthropic routes differ only in the shapes they read and write; both build a
:class:`TurnSpec` and hand it to :func:`start_turn`, so both generate the same way and feed the
same sessions, pairing and queue. Errors are :class:`ServeError` (status, code, param), which each
API writes in its own error shape.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ratchet.online.policy import BackendFailed, Generation, GenerationCancelled, RequestRefused
from ratchet.online.records import Turn, new_turn_id
from ratchet.online.tool_calls import (
    CallConstraint,
    Reply,
    ReplySplitter,
    Tool,
    ToolCall,
    call_grammar,
    next_state_text,
    template_messages,
)

if TYPE_CHECKING:
    from ratchet.online.server import ServingState

log = logging.getLogger("ratchet.online.turns")


class ServeError(Exception):
    """A request that gets no reply: the HTTP status, a machine code, the parameter at fault."""

    def __init__(self, status: int, message: str, code: str, *, kind: str = "invalid_request_error",
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.kind, self.param = status, code, kind, param


@dataclass
class TurnSpec:
    """What either API asks of one turn, in OpenAI's message shapes."""

    messages: list[dict[str, Any]]
    headers: Mapping[str, str]
    body_tags: Mapping[str, Any]
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    stop: list[str] | None = None
    seed: int | None = None
    tools: list[Tool] = field(default_factory=list)
    #: None: the model may call a tool or answer; a constraint: it must call one.
    constraint: CallConstraint | None = None
    #: False for ``tool_choice: "none"``: the tools are neither shown to the model nor parsed.
    use_tools: bool = True


@dataclass
class TurnResult:
    """A finished turn: the generation and its reply split into text and calls."""

    gen: Generation
    reply: Reply

    @property
    def finish_reason(self) -> str:
        """OpenAI's reason: ``tool_calls`` when the reply made calls and was not cut short."""
        if self.reply.calls and not self.reply.truncated:
            return "tool_calls"
        return self.gen.finish_reason


class ServedTurn:
    """One turn in progress; made by :func:`start_turn`, then :meth:`run` or :meth:`stream` once."""

    def __init__(self, state: ServingState, spec: TurnSpec, policy: Any, version: int, tag: Any,
                 cancel: Any, request: Any = None, prompt: list[dict[str, Any]] | None = None) -> None:
        self.state, self.spec, self.policy, self.version, self.tag, self.cancel = \
            state, spec, policy, version, tag, cancel
        self.request = request  # the HTTP request, whose disconnect stops the generation
        self.turn_id = new_turn_id()
        self.tools = spec.tools if spec.use_tools else []
        self._kwargs: dict[str, Any] = {"max_tokens": spec.max_tokens, "temperature": spec.temperature,
                                        "top_p": spec.top_p, "stop": spec.stop, "seed": spec.seed}
        if self.tools:
            self._kwargs["tools"] = [t.as_openai() for t in self.tools]
        if spec.constraint is not None:
            self._kwargs["grammar"] = _grammar(spec.constraint)
        # ``prompt``: what the model is shown when it differs from the request (the playbook's
        # lessons added); sessions and pairing keep reading the request itself.
        self._prompt = template_messages(spec.messages if prompt is None else prompt)

    @property
    def extra(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "session_id": self.tag.session_id, "session_inferred": self.tag.inferred,
                "turn_type": self.tag.turn_type, "policy_version": self.version}

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Session-Id": self.tag.session_id, "X-Turn-Id": self.turn_id,
                "X-Policy-Version": str(self.version)}

    def _splitter(self) -> ReplySplitter:
        return ReplySplitter(self.tools, forced=self.spec.constraint is not None)

    def _finish(self, gen: Generation, reply: Reply) -> TurnResult:
        if self.spec.constraint is not None and not reply.calls:
            # The grammar admits nothing else; only a policy that ignores grammars gets here.
            raise ServeError(502, "tool_choice forces a call, but the served model's reply is not one (its "
                             "backend cannot constrain replies)", "forced_call_failed", kind="server_error")
        state = self.state
        result = TurnResult(gen, reply)
        # The session key is computed over what the client will send back: the visible text.
        closing = state.tracker.served(self.tag, self.turn_id, self.spec.messages, reply.content or "")
        if state.learn:
            finish = result.finish_reason
            state.collector.add_turn(Turn(
                turn_id=self.turn_id, session_id=self.tag.session_id, session_inferred=self.tag.inferred,
                turn_type=self.tag.turn_type, messages=self._prompt, response_text=gen.text,
                prompt_token_ids=list(gen.prompt_token_ids), response_token_ids=list(gen.token_ids),
                response_logprobs=list(gen.logprobs), policy_version=self.version,
                # A backend's own reason beyond OpenAI's three (a proxied server's) is recorded as unknown.
                finish_reason=finish if finish in ("stop", "length", "tool_calls") else None,  # type: ignore[arg-type]
                tools=list(self._kwargs.get("tools", [])),
            ))
            state.receipts.served(self.turn_id, self.tag.turn_type)
            if closing is not None:
                state.collector.set_next_state(*closing)
        return result

    async def run(self) -> TurnResult:
        """The whole reply at once (the client waits; a disconnect stops the generation)."""
        from ratchet.online.server import watch_disconnect  # the server module imports this one

        watcher = asyncio.create_task(watch_disconnect(self.request, self.cancel)) \
            if self.request is not None else None
        try:
            if hasattr(self.policy, "agenerate"):  # an HTTP backend: await it on the loop, no thread hop
                gen = await self.policy.agenerate(self._prompt, cancel=self.cancel, **self._kwargs)
            else:
                gen = await asyncio.wrap_future(self.state.submit(
                    lambda: self.policy.generate(self._prompt, cancel=self.cancel, **self._kwargs)))
        except Exception as exc:
            raise self._failure(exc) from exc
        finally:
            if watcher is not None:
                watcher.cancel()
        splitter = self._splitter()
        splitter.feed(gen.text)
        splitter.finish()
        return self._finish(gen, splitter.reply())

    async def stream(self) -> AsyncIterator[tuple[str, Any]]:
        """The reply as it is generated: ``("text", str)``, ``("call", ToolCall)``, then
        ``("end", TurnResult)`` or ``("error", ServeError)``. Leaving early stops the generation."""
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        splitter = self._splitter()

        def produce() -> None:
            def on_text(text: str) -> None:
                for item in splitter.feed(text):
                    loop.call_soon_threadsafe(pieces.put_nowait, item)
            try:
                gen = self.policy.generate(self._prompt, on_text=on_text, cancel=self.cancel, **self._kwargs)
                for item in splitter.finish():
                    loop.call_soon_threadsafe(pieces.put_nowait, item)
                result = self._finish(gen, splitter.reply())
                loop.call_soon_threadsafe(pieces.put_nowait, ("end", result))
            except Exception as exc:  # reported to the client as an error event
                loop.call_soon_threadsafe(pieces.put_nowait, ("error", self._failure(exc)))

        ended = False
        try:
            self.state.submit(produce)
            while True:
                kind, payload = await pieces.get()
                yield kind, payload
                if kind in ("end", "error"):
                    ended = True
                    return
        finally:
            # Left before the end: the client disconnected (starlette cancels the stream) or the
            # response was closed; the generation stops at its next token.
            if not ended:
                self.cancel.client_gone()

    def _failure(self, exc: BaseException) -> ServeError:
        if isinstance(exc, ServeError):
            return exc
        if isinstance(exc, GenerationCancelled):
            if self.cancel.client_left:  # nobody is there to read an answer
                return ServeError(499, "the client closed the request", "client_closed_request")
            return ServeError(503, str(exc), "shutting_down", kind="server_error")
        if isinstance(exc, RequestRefused):  # the backend refused the request as given: the client's to fix
            return ServeError(exc.status, str(exc), exc.code, param=exc.param)
        self.state.errors += 1
        if isinstance(exc, BackendFailed):
            log.warning("%s", exc)
            return ServeError(502, str(exc), "backend_failed", kind="server_error")
        log.error("generation failed", exc_info=exc)
        return ServeError(500, f"generation failed: {exc}", "generation_failed", kind="server_error")


def _grammar(constraint: CallConstraint) -> str | None:
    try:
        return call_grammar(constraint)
    except ImportError:  # no llama.cpp here: the policy cannot take a grammar either
        return None


async def start_turn(state: ServingState, spec: TurnSpec, request: Any = None) -> ServedTurn:
    """Check the prompt fits, tag the session and pair the previous turn with what followed it
    (tool results as ``tool:`` lines, see :func:`~ratchet.online.tool_calls.next_state_text`)."""
    from ratchet.online.server import RequestCancel, check_context

    policy, version = state.host.acquire()
    loop = asyncio.get_running_loop()
    # Choosing the playbook's items embeds the request (tens of ms): off the event loop, and off the
    # generation threads, where it would wait behind a reply.
    prompt = await asyncio.to_thread(state.context, spec.messages) if state.context is not None else spec.messages
    too_long = await check_context(policy, template_messages(prompt), loop, state.executor)
    if too_long is not None:
        raise too_long
    tag = state.tracker.tag(spec.headers, spec.body_tags, spec.messages)
    if tag.pair_with is not None and state.learn:
        turn_id, rendered = tag.pair_with
        state.collector.set_next_state(turn_id, next_state_text(spec.messages, rendered))
    state.requests += 1
    return ServedTurn(state, spec, policy, version, tag, RequestCancel(state.cancel), request, prompt)


__all__ = ["ServeError", "ServedTurn", "ToolCall", "TurnResult", "TurnSpec", "start_turn"]
