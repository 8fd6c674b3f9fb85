"""Tool calling on the served model: the request's tools checked, rendered, forced and parsed.

The served Qwen2.5 GGUFs (and the Hermes-style templates many others copy) announce tools in the
system turn and expect a call as ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``;
a tool's result goes back as a ``tool`` message (the template wraps it in ``<tool_response>``).
This module holds everything about that format, apart from the HTTP shapes:

* :func:`check_request` — the cross-field rules a schema alone cannot state (a ``tool_choice``
  naming a tool that was not sent, a ``tool`` message answering no earlier call), as a
  :class:`ToolInputError` naming the parameter, which both APIs turn into a 400;
* :func:`template_messages` — OpenAI-shaped messages as the chat template reads them (a call's
  ``arguments`` as an object, not the JSON string OpenAI sends);
* :class:`CallConstraint` and :func:`call_grammar` — a forced choice ("required": one or more
  calls of any tool sent, one when parallel calls are off; or one call of a named function) as a
  llama.cpp grammar over the call format and the tool's parameters schema, so a forced call always
  comes back and its arguments always parse;
* :func:`split_reply` / :class:`ReplySplitter` — a reply's text into its visible text and its
  calls, at once or as the tokens stream in.

Under ``tool_choice: "auto"`` nothing is constrained, and small models often ignore the tags: the
0.5B and 1.5B Qwen2.5 coders write ``{"name": "bash", "arguments": {...}}`` as their whole reply,
sometimes in a code fence, sometimes several in a row. As serving stacks do for Hermes-style
models (a reply that is nothing but tool-call JSON is a call), such a reply is read as calls when
its whole body (code-fence lines aside) is one or more JSON objects, or one array of
them, each naming a tool that was sent and carrying object ``arguments`` (or ``parameters``; the
OpenAI shape ``{"type": "function", "function": {...}}`` too). Anything else stays text: prose
around the JSON, an undeclared tool's name, arguments that are not an object.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
#: Tool names as OpenAI and Anthropic both accept them.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}


class ToolInputError(ValueError):
    """A request's tools, tool choice or tool messages are inconsistent; ``param`` names the field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Tool:
    """One function the client offers: its name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def as_openai(self) -> dict[str, Any]:
        """The ``tools`` entry as chat templates read it."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": dict(self.parameters)}}


@dataclass(frozen=True)
class CallConstraint:
    """The reply must be calls only: one call of ``name``, or (``name`` None) calls of any of
    ``tools`` — one or more when ``several``, else exactly one."""

    tools: tuple[Tool, ...]
    name: str | None = None
    several: bool = False

    def allowed(self) -> tuple[Tool, ...]:
        return tuple(t for t in self.tools if self.name is None or t.name == self.name)


@dataclass(frozen=True)
class ToolCall:
    """One call the model made: an id for the client to answer with, a name, arguments as JSON text."""

    id: str
    name: str
    arguments: str

    def as_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def new_call_id(prefix: str = "call_") -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


# ------------------------------------------------------------------------------------ checking


def check_schema(schema: Any, param: str) -> None:
    """A parameters schema the grammar can follow: an object schema whose ``properties`` are
    schemas and whose ``required`` names only them. Raises :class:`ToolInputError` naming ``param``."""
    if not isinstance(schema, Mapping):
        raise ToolInputError(f"'{param}' must be a JSON schema object, not {json.dumps(schema)[:60]}", param)
    kind = schema.get("type", "object")
    if kind != "object":
        raise ToolInputError(f"'{param}' must describe an object (\"type\": \"object\"), not {kind!r}", param)
    props = schema.get("properties", {})
    if not isinstance(props, Mapping) or not all(isinstance(v, Mapping) for v in props.values()):
        raise ToolInputError(f"'{param}.properties' must map each argument name to a schema object", param)
    for name, sub in props.items():
        sub_kind = sub.get("type")
        kinds = sub_kind if isinstance(sub_kind, list) else [sub_kind] if sub_kind is not None else []
        if any(not isinstance(k, str) or k not in _JSON_TYPES for k in kinds):
            raise ToolInputError(f"'{param}.properties.{name}.type' is {json.dumps(sub_kind)}; a JSON schema type "
                                 f"is one of {sorted(_JSON_TYPES)}", param)
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ToolInputError(f"'{param}.required' must be a list of argument names", param)
    unknown = [r for r in required if r not in props]
    if unknown:
        raise ToolInputError(f"'{param}.required' names {unknown}, which are not in its properties", param)
    try:  # the grammar this schema becomes, where llama.cpp is installed
        from llama_cpp.llama_grammar import SchemaConverter
    except ImportError:
        return
    try:
        converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        converter.visit(converter.resolve_refs(dict(schema), "tool"), "args")
    except Exception as exc:
        raise ToolInputError(f"'{param}' cannot be followed when generating: {exc}", param) from exc


def choice_constraint(tools: Sequence[Tool], choice: Any, param: str = "tool_choice", *,
                      parallel: bool = True) -> CallConstraint | None:
    """The constraint a ``tool_choice`` asks for: None for "auto"/"none"/absent, a constraint for
    "required" (at least one call; exactly one when ``parallel`` is off, as OpenAI's
    ``parallel_tool_calls: false`` and Anthropic's ``disable_parallel_tool_use`` ask) or a named
    function (one call of it; the name must be one of ``tools``)."""
    if choice in (None, "auto", "none"):
        return None
    if not tools:
        raise ToolInputError(f"'{param}' asks for a tool call but no tools were sent; add 'tools' or drop "
                             f"'{param}'", param)
    if choice == "required":
        return CallConstraint(tuple(tools), several=parallel)
    name = choice
    known = [t.name for t in tools]
    if name not in known:
        raise ToolInputError(f"'{param}' names the function {name!r}, which is not among the tools sent "
                             f"({', '.join(known)})", param)
    return CallConstraint(tuple(tools), name)


def check_request(tools: Sequence[Tool], messages: Sequence[Mapping[str, Any]]) -> None:
    """Tool names unique; every ``tool`` message answers a call made earlier in the conversation."""
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if tool.name in seen:
            raise ToolInputError(f"two tools are named {tool.name!r}; tool names must be unique",
                                 f"tools[{i}].function.name")
        seen.add(tool.name)
    calls: set[str] = set()
    for i, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            calls.add(call["id"])
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if not call_id:
                raise ToolInputError(f"messages[{i}] is a tool message without 'tool_call_id'; send the id of the "
                                     "call it answers", f"messages[{i}].tool_call_id")
            if call_id not in calls:
                raise ToolInputError(f"messages[{i}] answers the call {call_id!r}, but no earlier assistant message "
                                     "made a call with that id", f"messages[{i}].tool_call_id")


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages as chat templates read them: a call's arguments as an object (Qwen's template
    writes ``arguments | tojson``; the JSON string OpenAI sends would come out quoted twice)."""
    out = []
    for message in messages:
        m = dict(message)
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {**c, "function": {"name": c["function"]["name"],
                                   "arguments": _as_object(c["function"].get("arguments"))}}
                for c in m["tool_calls"]]
            if m.get("content") is None:
                m["content"] = ""
        out.append(m)
    return out


def _as_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return arguments
    return arguments


def next_state_text(messages: Sequence[Mapping[str, Any]], rendered: str) -> str:
    """The next state the judge reads. When the messages after the last assistant reply hold tool
    results, each is a ``tool: ...`` line (the judge scores a tool's success or error by that
    prefix); otherwise ``rendered`` (the session tracker's own rendering) unchanged."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    follow = list(messages[last + 1:])
    if not any(m.get("role") == "tool" for m in follow):
        return rendered
    return "\n".join(f"{m.get('role')}: {m.get('content') or ''}" for m in follow)


# ------------------------------------------------------------------------------------ grammar


def _literal(text: str) -> str:
    return json.dumps(text)  # a GBNF string literal escapes like a JSON string


def call_grammar(constraint: CallConstraint) -> str:
    """A GBNF grammar whose only sentences are calls in the template's format (one, or with
    ``several`` one or more, a newline apart), each of an allowed tool, its arguments valid against
    the tool's parameters schema."""
    from llama_cpp.llama_grammar import SchemaConverter

    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    branches = []
    for i, tool in enumerate(constraint.allowed()):
        rule = converter.visit(converter.resolve_refs(dict(tool.parameters), "tool"), f"args{i}")
        head = '"name": ' + json.dumps(tool.name) + ', "arguments": '
        branches.append(f"{_literal(head)} {rule}")
    body = " | ".join(f"( {b} )" for b in branches)
    call = f"call ::= {_literal(OPEN + chr(10) + '{')} ( {body} ) {_literal('}' + chr(10) + CLOSE)}"
    root = f"root ::= call ( {_literal(chr(10))} call )*" if constraint.several else "root ::= call"
    return root + "\n" + call + "\n" + converter.format_grammar()


# ------------------------------------------------------------------------------------ parsing


def close_json(text: str) -> str:
    """The longest prefix of ``text`` that, closed (open strings, arrays and objects), parses as
    JSON, closed: a forced call cut by ``max_tokens`` still yields arguments that parse."""
    for end in range(len(text), -1, -1):
        head = text[:end].rstrip().rstrip(",:")
        closers, in_string, escaped = [], False, False
        for ch in head:
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch in "{[":
                closers.append("}" if ch == "{" else "]")
            elif ch in "}]" and closers:
                closers.pop()
        if escaped:
            continue
        candidate = head + ('"' if in_string else "") + "".join(reversed(closers))
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return candidate
    return "{}"


def _parse_call(body: str, tools: Sequence[Tool], *, truncated: bool = False) -> ToolCall | None:
    """One call body (the JSON between the tags) as a :class:`ToolCall`, or None when it is not a
    call of one of ``tools``. ``truncated``: the body was cut short, close what it opened."""
    text = body.strip()
    try:
        data = json.loads(close_json(text) if truncated else text)
    except json.JSONDecodeError:
        return None
    return _call_of(data, tools)


def _call_of(data: Any, tools: Sequence[Tool], *, bare: bool = False) -> ToolCall | None:
    """A decoded call object as a :class:`ToolCall`, or None when it is not a call of one of
    ``tools``. ``bare`` (the object is the reply itself, no tags around it): the arguments must be
    written out, so that a reply of some other JSON that happens to hold a tool's name stays text."""
    if isinstance(data, dict) and isinstance(data.get("function"), dict) and data.get("type", "function") == "function":
        data = data["function"]  # the OpenAI shape, as models trained on OpenAI transcripts write it
    if not isinstance(data, dict) or data.get("name") not in {t.name for t in tools}:
        return None
    key = "arguments" if "arguments" in data else "parameters" if "parameters" in data else None
    if bare and key is None:
        return None
    arguments = data.get(key, {}) if key else {}
    if isinstance(arguments, str):  # some models write the arguments as a JSON string already
        arguments = _as_object(arguments)
    if not isinstance(arguments, dict):
        return None
    return ToolCall(new_call_id(), data["name"], json.dumps(arguments, ensure_ascii=False))


@dataclass
class Reply:
    """A reply split: the text outside calls (None when there is none) and the calls, in order."""

    content: str | None
    calls: list[ToolCall]
    truncated: bool = False


class ReplySplitter:
    """Splits a reply as its text streams in: :meth:`feed` returns the pieces ready to send —
    ``("text", str)`` outside calls, ``("call", ToolCall)`` once a call's closing tag arrived.
    Text that may still become an opening tag is held back until it cannot.

    A body that is not a call of a known tool stays text (tags included), as the model wrote it.

    Small models often write their calls without the tags, as the whole reply: JSON objects with
    ``name`` and ``arguments``, one after another or in one array, bare or in a code fence. A reply
    that starts like that (``{``, ``[`` or a backtick) is held back to its end and read as those
    calls when it is nothing else (as text otherwise; see the module's docstring).
    """

    def __init__(self, tools: Sequence[Tool], *, forced: bool = False) -> None:
        self.tools = list(tools)
        self.forced = forced
        self._buffer = ""
        self._in_call = False
        self._bare: bool | None = None  # whether the reply may be a bare call (None: not known yet)
        self.text: list[str] = []
        self.calls: list[ToolCall] = []
        self.truncated = False

    def feed(self, piece: str) -> list[tuple[str, Any]]:
        if not self.tools:  # nothing to call: every piece is text as it comes
            out: list[tuple[str, Any]] = []
            self._emit_text(piece, out)
            return out
        self._buffer += piece
        out = []
        if self._bare is None:
            head = self._buffer.lstrip()
            if not head:
                return out
            self._bare = head[0] in "{[`"
        if self._bare:
            return out
        while self._buffer:
            if self._in_call:
                end = self._buffer.find(CLOSE)
                if end < 0:
                    break
                self._emit_call(self._buffer[:end], out, truncated=False)
                self._buffer = self._buffer[end + len(CLOSE):]
                self._in_call = False
                continue
            start = self._buffer.find(OPEN)
            if start >= 0:
                self._emit_text(self._buffer[:start], out)
                self._buffer = self._buffer[start + len(OPEN):]
                self._in_call = True
                continue
            keep = next((k for k in range(min(len(OPEN) - 1, len(self._buffer)), 0, -1)
                         if OPEN.startswith(self._buffer[-k:])), 0)
            self._emit_text(self._buffer[:len(self._buffer) - keep], out)
            self._buffer = self._buffer[len(self._buffer) - keep:]
            break
        return out

    def finish(self) -> list[tuple[str, Any]]:
        """What is left at the end of the reply: an unclosed call is closed and parsed."""
        out: list[tuple[str, Any]] = []
        if self._bare:
            self._bare = False
            calls, cut = _parse_bare(_unfenced(self._buffer), self.tools)
            if calls:
                self._buffer = ""
                self.truncated = cut
                self.calls.extend(calls)
                return [("call", call) for call in calls]
            out = self.feed("")
        if self._in_call:
            self._emit_call(self._buffer, out, truncated=True)
        else:
            self._emit_text(self._buffer, out)
        self._buffer, self._in_call = "", False
        return out

    def _emit_text(self, text: str, out: list[tuple[str, Any]]) -> None:
        if text:
            self.text.append(text)
            out.append(("text", text))

    def _emit_call(self, body: str, out: list[tuple[str, Any]], *, truncated: bool) -> None:
        whole = _parse_call(body, self.tools) if truncated else None
        if truncated and whole is None and self.calls:
            # The reply ended inside a call after complete ones (a model repeating its call until
            # ``max_tokens``): the complete calls stand, the cut one is left out.
            self.truncated = True
            return
        if whole is not None:
            truncated = False  # only the closing tag is missing (the model stopped after the JSON)
        call = whole or _parse_call(body, self.tools, truncated=truncated)
        if call is None and not truncated:
            # A body cut inside the tags, or a forced call's arguments cut short: close them.
            call = _parse_call(body, self.tools, truncated=True) if self.forced else None
        if call is None:
            self._emit_text(OPEN + body + (CLOSE if not truncated else ""), out)
            return
        self.truncated = self.truncated or truncated
        self.calls.append(call)
        out.append(("call", call))

    def reply(self) -> Reply:
        content = "".join(self.text).strip()
        return Reply(content or None, list(self.calls), self.truncated)


def _parse_bare(text: str, tools: Sequence[Tool]) -> tuple[list[ToolCall], bool]:
    """A reply that is nothing but calls written as JSON objects, one after another or as one
    array: (those calls, whether an object cut short at the end was left out); no calls when any
    part is something else. (A small model repeating its call until ``max_tokens`` ends on such a
    cut object.)"""
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError:
            return [], False
        listed = [_call_of(item, tools, bare=True) for item in items] if isinstance(items, list) else []
        return ([c for c in listed if c is not None], False) if listed and all(listed) else ([], False)
    decoder, calls, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return calls, False
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            ran_out = exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()) - 1
            cut = bool(calls) and text[at] == "{" and ran_out
            return (calls, True) if cut else ([], False)
        call = _call_of(value, tools, bare=True)
        if call is None:
            return [], False
        calls.append(call)
        at = end


_FENCE_LINE = re.compile(r"^[ \t]*```[\w+-]*[ \t]*$", re.MULTILINE)


def _unfenced(text: str) -> str:
    """A reply's text without its Markdown code-fence lines: one fence around its calls, one fence
    per call, or a stray closing one (the 0.5B sometimes ends its bare calls with one it never
    opened). A JSON string cannot hold a line break, so no such line is inside a call."""
    return _FENCE_LINE.sub("", text)


def split_reply(text: str, tools: Sequence[Tool], *, forced: bool = False) -> Reply:
    """A whole reply's text and calls (see :class:`ReplySplitter`)."""
    splitter = ReplySplitter(tools, forced=forced)
    splitter.feed(text)
    splitter.finish()
    return splitter.reply()
