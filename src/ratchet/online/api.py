"""The request contract of the OpenAI-compatible endpoints: the body schema, its errors, a size limit.

Bad input is the client's to fix, so it gets a 4xx in OpenAI's error shape naming the field
(``{"error": {"message", "type": "invalid_request_error", "param", "code"}}``), never a 500: a body
over the size limit a 413 before it is read to the end, anything the schema refuses a 400, an
unknown model a 404 (the server decides those two). Fields the server does not use (``user``,
penalties, ...) are accepted and ignored, as a local OpenAI-compatible server is expected to; the
fields it uses are checked strictly (``"5"`` is not a number, ``true`` is not a seed), ``tools``,
``tool_choice`` and the messages' ``tool_calls`` included.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError, field_validator

from ratchet.online.tool_calls import NAME_PATTERN, Tool, ToolInputError, check_schema


def is_loopback(host: str) -> bool:
    """Whether a server bound to ``host`` only accepts connections from this machine (the serving
    API and the dashboard both demand a key or token otherwise)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
PositiveInt = Annotated[int, Field(strict=True, gt=0)]


ToolName = Annotated[str, Field(strict=True, pattern=NAME_PATTERN.pattern)]


class FunctionCall(BaseModel):
    """A call an assistant message made: the function's name and its arguments as JSON text."""

    name: ToolName
    arguments: StrictStr

    @field_validator("arguments")
    @classmethod
    def _json_object(cls, value: str) -> str:
        try:
            parsed = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments must be a JSON object as text: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ValueError("arguments must be a JSON object as text")
        return value


class ToolCallIn(BaseModel):
    """One entry of an assistant message's ``tool_calls``."""

    id: Annotated[str, Field(strict=True, min_length=1)]
    type: Literal["function"] = "function"
    function: FunctionCall


class FunctionDef(BaseModel):
    """A function the client offers: name, description, JSON-schema parameters."""

    name: ToolName
    description: StrictStr = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: StrictBool | None = None


class ToolDef(BaseModel):
    """One entry of ``tools``: only functions exist."""

    type: Literal["function"]
    function: FunctionDef


class NamedChoice(BaseModel):
    """``{"type": "function", "function": {"name": ...}}``: that function must be called."""

    class _Name(BaseModel):
        name: ToolName

    type: Literal["function"]
    function: _Name


class ChatMessage(BaseModel):
    """One chat message. ``content`` is a string, or a list of text parts (joined into one string);
    only an assistant message (one carrying ``tool_calls``) may leave it out."""

    model_config = ConfigDict(extra="allow")  # name and the like: passed on as sent

    role: Role
    content: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: StrictStr | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                           and isinstance(p.get("text"), str) for p in value):
            return "".join(p["text"] for p in value)
        raise ValueError("content must be a string or a list of {\"type\": \"text\", \"text\": ...} parts")

    def as_dict(self) -> dict[str, Any]:
        out = self.model_dump(exclude_none=True)
        if self.content is None and self.role != "assistant":
            out["content"] = ""
        return out


class ChatRequest(BaseModel):
    """The body of ``POST /v1/chat/completions`` after the session fields were taken out."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr | None = None
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_tokens: PositiveInt | None = None
    max_completion_tokens: PositiveInt | None = None
    temperature: Annotated[float, Field(strict=True, ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(strict=True, gt=0.0, le=1.0)] | None = None
    n: Annotated[int, Field(strict=True, ge=1, le=1)] | None = None
    stream: StrictBool | None = None
    stop: str | list[str] | None = None
    seed: Annotated[int, Field(strict=True, ge=-(1 << 63), lt=1 << 63)] | None = None  # OpenAI's: any int64
    logprobs: StrictBool | None = None
    top_logprobs: Annotated[int, Field(strict=True, ge=0, le=20)] | None = None
    presence_penalty: Annotated[float, Field(strict=True, ge=-2.0, le=2.0)] | None = None
    frequency_penalty: Annotated[float, Field(strict=True, ge=-2.0, le=2.0)] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: Any = None  # "none" | "auto" | "required" | NamedChoice, checked below
    parallel_tool_calls: StrictBool | None = None

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list) and len(value) <= 4 and all(isinstance(s, str) for s in value):
            return value
        raise ValueError("stop must be a string or a list of at most 4 strings")

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _tool_choice(cls, value: Any) -> Any:
        if value is None or value in ("none", "auto", "required"):
            return value
        try:
            return NamedChoice.model_validate(value)
        except ValidationError:
            raise ValueError("tool_choice must be \"none\", \"auto\", \"required\" or "
                             "{\"type\": \"function\", \"function\": {\"name\": NAME}}") from None

    @field_validator("messages", mode="after")
    @classmethod
    def _content_where_needed(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        for i, message in enumerate(messages):
            if message.content is None and message.role != "assistant":
                raise ValueError(f"messages[{i}] ({message.role}) has no content")
        return messages

    def message_dicts(self) -> list[dict[str, Any]]:
        return [m.as_dict() for m in self.messages]

    def tool_list(self) -> list[Tool]:
        """The tools sent, their parameter schemas checked (:class:`ToolInputError` naming the one)."""
        tools = []
        for i, entry in enumerate(self.tools or []):
            check_schema(entry.function.parameters, f"tools[{i}].function.parameters")
            tools.append(Tool(entry.function.name, entry.function.description, entry.function.parameters))
        return tools

    def choice(self) -> str | None:
        """``tool_choice`` as "none", "auto", "required", a function name, or None."""
        if isinstance(self.tool_choice, NamedChoice):
            return self.tool_choice.function.name
        return self.tool_choice

    def stop_list(self) -> list[str] | None:
        return [self.stop] if isinstance(self.stop, str) else self.stop


def tool_error(exc: ToolInputError) -> dict[str, Any]:
    """A tool rule broken (:mod:`ratchet.online.tool_calls`) as an OpenAI error body."""
    return error_body(str(exc), "invalid_value", exc.param)


def error_body(message: str, code: str, param: str | None = None,
               kind: str = "invalid_request_error") -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _param(loc: tuple[Any, ...]) -> str:
    """A pydantic location as a field path: ``("messages", 0, "content")`` -> ``messages[0].content``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _code(kind: str) -> str:
    if kind == "missing":
        return "missing_required_parameter"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return "invalid_type"
    return "invalid_value"


def validation_error(exc: ValidationError) -> dict[str, Any]:
    """The first schema error of a request as an OpenAI error body naming the field."""
    first = exc.errors(include_url=False)[0]
    param = _param(tuple(first["loc"]))
    got = first.get("input")
    shown = json.dumps(got, default=str)[:80] if first["type"] != "missing" else None
    message = f"Invalid value for '{param}': {first['msg']}" + (f" (got {shown})" if shown else "")
    if len(exc.errors()) > 1:
        message += f"; {len(exc.errors()) - 1} more error(s) in the request"
    return error_body(message, _code(first["type"]), param)


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` gets a 413 before the app parses it.

    A declared ``Content-Length`` over the limit is refused at once, without reading the body; a
    body without one (chunked) is counted as it arrives and refused as soon as it passes the limit.
    A body within the limit is handed to the app as read, so nothing reads it twice. Reading is
    asynchronous, so a client uploading slowly or hugely holds up no other request.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _refuse(self, send: Any, status: int, message: str, code: str) -> None:
        payload = json.dumps(error_body(message, code)).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": payload})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        too_big = (f"the request body is larger than this server accepts ({self.max_bytes} bytes; "
                   f"raise it with --set max_body_bytes=N)")
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            if not declared.isdigit():
                await self._refuse(send, 400, "Content-Length is not a number", "invalid_content_length")
                return
            if int(declared) > self.max_bytes:
                await self._refuse(send, 413, too_big, "request_too_large")
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, 413, too_big, "request_too_large")
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect a streaming response listens for

        await self.app(scope, replay, send)
