"""The Anthropic Messages API on the serving port: ``POST /v1/messages``.

Coding agents that speak Anthropic's API (tool_use / tool_result content blocks) use the served
model through it. A request is translated into the OpenAI message shapes the rest of the server
uses (``system`` a system message, ``tool_use`` blocks an assistant's ``tool_calls``, each
``tool_result`` block a ``tool`` message; a result with ``is_error`` reads ``Error: ...``), then
served by the same turn path (:mod:`ratchet.online.turns`): the same generation, the same forced
calls, the same session pairing and turn recording. Replies and errors come back in Anthropic's
shapes; a stream uses its event types (``message_start``, ``content_block_start`` /
``_delta`` / ``_stop``, ``message_delta``, ``message_stop``).

Checked as strictly as chat completions: ``max_tokens`` is required, a ``tool_result`` must answer
an earlier ``tool_use`` of that id, a forced tool must be among ``tools``; a bad value is a 400
naming the field. Unknown top-level fields (``metadata``, ``thinking``, ...) are accepted and ignored.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError, field_validator

from ratchet.online.api import ToolName, validation_error
from ratchet.online.sessions import SessionTracker
from ratchet.online.tool_calls import (
    CallConstraint,
    Tool,
    ToolInputError,
    check_request,
    check_schema,
    choice_constraint,
)
from ratchet.online.turns import ServedTurn, ServeError, TurnResult, TurnSpec, start_turn

if TYPE_CHECKING:
    from ratchet.online.server import ServingState

PositiveInt = Annotated[int, Field(strict=True, gt=0)]
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}


class TextBlock(BaseModel):
    model_config = ConfigDict(extra="allow")  # cache_control, citations: accepted, not used
    type: Literal["text"]
    text: StrictStr


class ToolUseBlock(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["tool_use"]
    id: Annotated[str, Field(strict=True, min_length=1)]
    name: ToolName
    input: dict[str, Any]


class ToolResultBlock(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["tool_result"]
    tool_use_id: Annotated[str, Field(strict=True, min_length=1)]
    content: StrictStr | list[TextBlock] | None = None
    is_error: StrictBool | None = None

    def text(self) -> str:
        body = self.content if isinstance(self.content, str) else "".join(b.text for b in self.content or [])
        return f"Error: {body}" if self.is_error else body


Block = Annotated[TextBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class AnthropicMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: StrictStr | Annotated[list[Block], Field(min_length=1)]


class AnthropicTool(BaseModel):
    """A client tool; server tools (``type: "bash_..."``, web search, ...) are not served here."""

    model_config = ConfigDict(extra="allow")
    type: Literal["custom"] | None = None
    name: ToolName
    description: StrictStr = ""
    input_schema: dict[str, Any]


class AnthropicToolChoice(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["auto", "any", "tool", "none"]
    name: ToolName | None = None
    #: With "any": exactly one call instead of one or more.
    disable_parallel_tool_use: StrictBool | None = None


class MessagesRequest(BaseModel):
    """The body of ``POST /v1/messages``."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr
    max_tokens: PositiveInt
    messages: Annotated[list[AnthropicMessage], Field(min_length=1)]
    system: StrictStr | list[TextBlock] | None = None
    stop_sequences: list[StrictStr] | None = None
    stream: StrictBool | None = None
    temperature: Annotated[float, Field(strict=True, ge=0.0, le=1.0)] | None = None
    top_p: Annotated[float, Field(strict=True, gt=0.0, le=1.0)] | None = None
    top_k: PositiveInt | None = None
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None

    @field_validator("stop_sequences")
    @classmethod
    def _stops(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not s for s in value):
            raise ValueError("stop sequences must not be empty strings")
        return value


def error(status: int, message: str) -> JSONResponse:
    """Anthropic's error shape."""
    kind = _ERROR_TYPES.get(status, "api_error")
    return JSONResponse(status_code=status, content={"type": "error", "error": {"type": kind, "message": message}})


def to_openai(req: MessagesRequest) -> list[dict[str, Any]]:
    """The conversation in OpenAI's message shapes; a ``tool_result`` must answer an earlier
    ``tool_use`` (:class:`ToolInputError` naming the block otherwise)."""
    out: list[dict[str, Any]] = []
    if req.system:
        system = req.system if isinstance(req.system, str) else "".join(b.text for b in req.system)
        out.append({"role": "system", "content": system})
    called: set[str] = set()
    for i, message in enumerate(req.messages):
        blocks = [TextBlock(type="text", text=message.content)] if isinstance(message.content, str) else \
            message.content
        text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
        if message.role == "assistant":
            if any(isinstance(b, ToolResultBlock) for b in blocks):
                raise ToolInputError(f"messages[{i}] is an assistant message with a tool_result block; tool "
                                     "results come in user messages", f"messages[{i}].content")
            uses = [b for b in blocks if isinstance(b, ToolUseBlock)]
            entry: dict[str, Any] = {"role": "assistant", "content": text}
            if uses:
                entry["tool_calls"] = [{"id": u.id, "type": "function",
                                        "function": {"name": u.name, "arguments": json.dumps(u.input)}} for u in uses]
                called.update(u.id for u in uses)
            out.append(entry)
            continue
        for j, block in enumerate(blocks):
            if isinstance(block, ToolUseBlock):
                raise ToolInputError(f"messages[{i}].content[{j}] is a tool_use block in a user message; only the "
                                     "assistant calls tools", f"messages[{i}].content[{j}]")
            if isinstance(block, ToolResultBlock):
                if block.tool_use_id not in called:
                    raise ToolInputError(f"messages[{i}].content[{j}] answers the tool_use {block.tool_use_id!r}, "
                                         "but no earlier assistant message made it",
                                         f"messages[{i}].content[{j}].tool_use_id")
                out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": block.text()})
        if text or not any(isinstance(b, ToolResultBlock) for b in blocks):
            out.append({"role": "user", "content": text})
    return out


def tools_and_choice(req: MessagesRequest) -> tuple[list[Tool], CallConstraint | None, bool]:
    """(tools, the forced-call constraint or None, whether the tools are shown to the model)."""
    tools = []
    for i, entry in enumerate(req.tools or []):
        check_schema(entry.input_schema, f"tools[{i}].input_schema")
        tools.append(Tool(entry.name, entry.description, entry.input_schema))
    choice = req.tool_choice
    if choice is None or choice.type in ("auto", "none"):
        return tools, None, choice is None or choice.type != "none"
    if choice.type == "tool" and choice.name is None:
        raise ToolInputError("tool_choice of type 'tool' needs the tool's 'name'", "tool_choice.name")
    named = "required" if choice.type == "any" else choice.name
    return tools, choice_constraint(tools, named, "tool_choice", parallel=not choice.disable_parallel_tool_use), True


def _stop_reason(result: TurnResult, stops: list[str] | None) -> tuple[str, str | None]:
    if result.reply.calls and not result.reply.truncated:
        return "tool_use", None
    if result.gen.finish_reason == "length":
        return "max_tokens", None
    raw = "".join(result.gen.token_texts or [])
    hit = next((s for s in stops or [] if s in raw[max(0, len(result.gen.text) - 1):]), None)
    return ("stop_sequence", hit) if hit else ("end_turn", None)


def _tool_use(call: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_" + call.id.removeprefix("call_"), "name": call.name,
            "input": json.loads(call.arguments)}


def message_body(turn: ServedTurn, result: TurnResult, state: ServingState, stops: list[str] | None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    text = result.reply.content if result.reply.calls else result.gen.text
    if text:
        content.append({"type": "text", "text": text})
    content.extend(_tool_use(c) for c in result.reply.calls)
    reason, sequence = _stop_reason(result, stops)
    return {"id": f"msg_{turn.turn_id}", "type": "message", "role": "assistant", "model": state.served_name,
            "content": content, "stop_reason": reason, "stop_sequence": sequence,
            "usage": {"input_tokens": len(result.gen.prompt_token_ids), "output_tokens": len(result.gen.token_ids)},
            "ratchet": turn.extra}


def _event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data}, ensure_ascii=False)}\n\n"


async def message_events(turn: ServedTurn, state: ServingState, stops: list[str] | None):
    """A turn as Anthropic's stream: a text block while text comes, a tool_use block per call."""
    yield _event("message_start", {"message": {
        "id": f"msg_{turn.turn_id}", "type": "message", "role": "assistant", "model": state.served_name,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}})
    index, text_open, pending = 0, False, ""
    async for kind, payload in turn.stream():
        if kind == "text":
            pending += payload
            if not text_open and not pending.strip():
                continue  # whitespace before a call opens no text block
            if not text_open:
                yield _event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
                text_open = True
            yield _event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": pending}})
            pending = ""
            continue
        if kind in ("call", "end", "error") and text_open:
            yield _event("content_block_stop", {"index": index})
            index, text_open = index + 1, False
        if kind == "call":
            block = _tool_use(payload)
            yield _event("content_block_start", {"index": index, "content_block": {**block, "input": {}}})
            yield _event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta",
                                                                           "partial_json": payload.arguments}})
            yield _event("content_block_stop", {"index": index})
            index += 1
        elif kind == "error":
            yield _event("error", {"error": {"type": _ERROR_TYPES.get(payload.status, "api_error"),
                                             "message": str(payload)}})
            return
        elif kind == "end":
            reason, sequence = _stop_reason(payload, stops)
            yield _event("message_delta", {"delta": {"stop_reason": reason, "stop_sequence": sequence},
                                           "usage": {"input_tokens": len(payload.gen.prompt_token_ids),
                                                     "output_tokens": len(payload.gen.token_ids)}})
            yield _event("message_stop", {})


def add_messages_route(app: Any, state: ServingState) -> None:
    """``POST /v1/messages`` on ``app``."""
    from ratchet.online.server import read_json

    def authorized(request: Request) -> bool:
        if not state.api_key:
            return True
        key = request.headers.get("x-api-key", "")
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        bearer = token.strip() if scheme.lower() == "bearer" else ""
        return any(secrets.compare_digest(k, state.api_key) for k in (key, bearer) if k)

    @app.post("/v1/messages")
    async def messages(request: Request):
        if not authorized(request):
            return error(401, "invalid x-api-key (send the server's key as 'x-api-key: KEY')")
        raw = await read_json(request)
        if isinstance(raw, ServeError):
            return error(raw.status, str(raw))
        body, body_tags = SessionTracker.split_body(raw)
        try:
            req = MessagesRequest.model_validate(body)
        except ValidationError as exc:
            return error(400, validation_error(exc)["error"]["message"])
        if req.model != state.served_name:
            return error(404, f"model: '{req.model}' does not exist; this server serves '{state.served_name}'")
        try:
            converted = to_openai(req)
            tools, constraint, shown = tools_and_choice(req)
            check_request(tools, converted)
        except ToolInputError as exc:
            return error(400, f"{exc.param}: {exc}")
        spec = TurnSpec(converted, request.headers, body_tags, max_tokens=req.max_tokens,
                        temperature=req.temperature or 0.0, top_p=req.top_p or 1.0, stop=req.stop_sequences,
                        tools=tools, constraint=constraint, use_tools=shown)
        try:
            turn = await start_turn(state, spec, request)
        except ServeError as exc:
            return error(exc.status, str(exc))
        if req.stream:
            return StreamingResponse(message_events(turn, state, req.stop_sequences), media_type="text/event-stream",
                                     headers=turn.headers)
        try:
            result = await turn.run()
        except ServeError as exc:
            return error(exc.status, str(exc))
        return JSONResponse(headers=turn.headers, content=message_body(turn, result, state, req.stop_sequences))
