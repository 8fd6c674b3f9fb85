"""How tool calls travel between the loop and a model: a text protocol any model can follow,
or the backend's native tool-call API. Chosen by ``AgentConfig.protocol``.
"""

from __future__ import annotations

import ast
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import openai

from ratchet.contracts import Completion, Message, Model, RatchetError, Usage
from ratchet.runtime.errors import FormatError
from ratchet.runtime.tools.registry import Tool


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""


# A fence's body ends at a bare ``` (one followed by a language word opens the next block): a stray
# closing fence after a bare call (the 0.5B writes `{...}` then ```) must not swallow the next opener.
_FENCE = re.compile(r"```[ \t]*(tool|json|tool_call|tool_code)?[^\n]*\n(.*?)(?:```(?![ \t]*\w)|$)", re.S)
_CALL_FENCES = ("tool", "json", "tool_call", "tool_code")
_NAME_KEYS = ("name", "tool", "function", "tool_name")
_ARG_KEYS = ("arguments", "args", "parameters", "input", "params")


def _loads(text: str) -> Any:
    """JSON, or the near-JSON small models write (single quotes, True/None, trailing commas)."""
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    cleaned = re.sub(r",\s*([}\]])", r"\1", text)
    try:
        return json.loads(cleaned)
    except ValueError:
        pass
    try:
        return ast.literal_eval(re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", cleaned))))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _balanced_objects(text: str) -> list[str]:
    """Top-level ``{...}`` spans of ``text`` (string-aware brace matching)."""
    return [text[start:end] for start, end in _object_spans(text)]


def _object_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each top-level ``{...}`` of ``text``."""
    spans, depth, start, quote, escape = [], 0, -1, "", False
    for i, ch in enumerate(text):
        if quote:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'" and depth:
            quote = ch
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
    return spans


def _as_call(obj: Any) -> ToolCall | None:
    if not isinstance(obj, dict):
        return None
    if "function" in obj and isinstance(obj["function"], dict):
        obj = obj["function"]
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if not name:
        return None
    args: Any = next((obj[k] for k in _ARG_KEYS if k in obj), None)
    if isinstance(args, str):
        args = _loads(args) if args.strip().startswith("{") else {"value": args}
    if args is None:
        args = {k: v for k, v in obj.items() if k not in _NAME_KEYS}
    return ToolCall(name.strip(), args if isinstance(args, dict) else {})


def _on_own_lines(text: str, start: int, end: int) -> bool:
    """Nothing but blanks before ``text[start:end]`` on its first line and after it on its last
    (a stray ``` may follow): a call standing alone, not one quoted in a sentence."""
    before = text[text.rfind("\n", 0, start) + 1:start]
    line_end = text.find("\n", end)
    after = text[end:line_end if line_end >= 0 else len(text)]
    return not before.strip() and after.strip() in ("", "```")


def _calls_in(body: str) -> list[ToolCall]:
    parsed = _loads(body)
    if parsed is None:
        parsed = [_loads(s) for s in _balanced_objects(body)]
    return [c for c in (_as_call(obj) for obj in (parsed if isinstance(parsed, list) else [parsed])) if c is not None]


def parse_tool_calls(text: str) -> list[ToolCall]:
    """The tool calls in a reply, in the order written: fenced blocks (```tool, ```json, or any
    fence), and bare JSON calls that stand on their own lines outside the fences (small models
    write the test command bare, then a fenced edit). A call quoted inside a sentence is not run,
    unless the reply has no fence and no call on its own line (then every bare object counts).

    Raises FormatError when there is none, with the format spelled out for the model.
    """
    fences = list(_FENCE.finditer(text))
    found: list[tuple[int, list[ToolCall]]] = [(m.start(), _calls_in(m.group(2))) for m in fences]
    gaps, cursor = [], 0
    for m in fences:
        gaps.append((cursor, m.start()))
        cursor = m.end()
    gaps.append((cursor, len(text)))
    for lo, hi in gaps:
        for start, end in _object_spans(text[lo:hi]):
            if _on_own_lines(text, lo + start, lo + end):
                found.append((lo + start, _calls_in(text[lo + start:lo + end])))
    calls = [c for _, cs in sorted(found, key=lambda item: item[0]) for c in cs]
    if not calls and not fences:
        calls = [c for body in _balanced_objects(text) for c in _calls_in(body)]
    if not calls:
        pasted = any(m.group(1) not in _CALL_FENCES for m in fences)
        raise FormatError(
            ("code in a reply changes nothing: put it in a file with the write or edit tool. " if pasted else "")
            # No path in the example: the 0.5B copied `README.md` from it into repositories without one.
            + "No tool call found in your reply. Put your next step in exactly one block like:\n"
            '```tool\n{"name": "bash", "arguments": {"command": "ls"}}\n```\n'
            "with the tool and arguments that step needs (an edit: edit with path, old and new). "
            'When the task is done, call {"name": "submit", "arguments": {"summary": "..."}}.'
        )
    return calls


_CODE_BLOCK = re.compile(r"^```[ \t]*(?:python|py)?[ \t]*\n(.*?)^```", re.S | re.M)
_DEFINED = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)", re.M)
_ASSIGNED = re.compile(r"^(\w+)\s*=", re.M)


def _defined(code: str) -> set[str]:
    """Top-level functions and classes a Python text defines (its assigned names when it has
    none): what a whole new version of the file must define again. A dropped constant or import
    is not counted: the file then fails its tests, which the model reads."""
    return set(_DEFINED.findall(code)) or set(_ASSIGNED.findall(code))


def file_block_calls(text: str, sources: dict[str, str]) -> list[ToolCall]:
    """A reply's fenced code blocks that are whole new versions of repository files, as ``write``
    calls (Aider's whole-file edit format): a small model writes out a whole file where it
    miscopies an exact old/new pair, or breaks a file escaped inside a JSON string.

    ``sources`` maps each file the block may replace (relative path) to its current text. A block
    replaces the file named on the line before it, else the one file defining the same top-level
    functions and classes; either way it must define every one that file defines, so a snippet of
    one function never overwrites the rest of its file. Blocks that match no file are left alone.
    """
    calls: list[ToolCall] = []
    for block in _CODE_BLOCK.finditer(text):
        code, before = block.group(1), text[:block.start()].rstrip("\n").rpartition("\n")[2]
        names = _defined(code)
        if not names or not code.strip():
            continue
        label = before.strip().strip("#*`:> ").strip()
        named = label if label in sources else next((p for p in sources if label.endswith("/" + p)), None)
        if named is None:
            owners = [p for p, body in sources.items() if _defined(body) and _defined(body) <= names]
            named = owners[0] if len(owners) == 1 else None
        if named is not None and _defined(sources[named]) <= names:
            calls.append(ToolCall("write", {"path": named, "content": code}))
    return calls


class TextProtocol:
    """Tools described in the system prompt; the model answers with a fenced ```tool JSON block."""

    name = "text"

    def tool_instructions(self, tools: Sequence[Tool]) -> str:
        # A real call, not a placeholder: small models copy the template's name ("TOOL") verbatim.
        lines = ["You act only by calling tools. Each reply: a short thought, then one block like", "```tool",
                 '{"name": "bash", "arguments": {"command": "ls"}}', "```",
                 'with "name" one of the tools below and "arguments" its arguments by name. Tools:']
        for t in tools:
            props = t.parameters["properties"]
            sig = ", ".join(f"{k}{'' if k in t.parameters['required'] else '?'}: {v.get('type', 'any')}"
                            for k, v in props.items())
            lines.append(f"- {t.name}({sig}): {t.description}")
        return "\n".join(lines)

    def complete(self, model: Model, messages: list[Message], tools: Sequence[Tool], *, temperature: float,
                 max_tokens: int, seed: int | None = None) -> tuple[Completion, Message, list[ToolCall] | FormatError]:
        # no seed, no `seed` key: a greedy run's requests (and their journal keys) stay as they were
        completion = model.complete(messages, temperature=temperature, max_tokens=max_tokens,
                                    **({} if seed is None else {"seed": seed}))
        message: Message = {"role": "assistant", "content": completion.text}
        try:
            calls: list[ToolCall] | FormatError = parse_tool_calls(completion.text)
        except FormatError as exc:
            calls = exc
        return completion, message, calls

    def result_message(self, call: ToolCall, text: str) -> Message:
        return {"role": "user", "content": f"[{call.name} result]\n{text}"}


class NativeProtocol:
    """The OpenAI-compatible ``tools`` API: the server returns structured tool calls.

    Works with any model exposing an OpenAI-compatible ``config`` (``base_url``, ``model``,
    ``api_key``/``api_key_env``), i.e. :class:`ratchet.models.openai_compat.OpenAIModel`.
    """

    name = "native"

    def __init__(self) -> None:
        self._client: Any = None

    def _client_for(self, model: Model) -> tuple[Any, str]:
        cfg = getattr(model, "config", None)
        if cfg is None or not hasattr(cfg, "base_url"):
            raise RatchetError(f"model {model.name!r} has no native tool-call API",
                               hint="use protocol: text in settings.yaml, or an http(s)://…#MODEL / openai: model")
        if self._client is None:
            key = cfg.api_key or os.environ.get(cfg.api_key_env) or "none"
            self._client = openai.OpenAI(api_key=key, base_url=cfg.base_url, timeout=cfg.timeout_s, max_retries=2)
        return self._client, cfg.model

    def tool_instructions(self, tools: Sequence[Tool]) -> str:
        return "Act by calling the tools you are given; call submit when the task is done."

    def complete(self, model: Model, messages: list[Message], tools: Sequence[Tool], *, temperature: float,
                 max_tokens: int, seed: int | None = None) -> tuple[Completion, Message, list[ToolCall] | FormatError]:
        client, name = self._client_for(model)
        start = time.perf_counter()
        try:
            resp = client.chat.completions.create(model=name, messages=[dict(m) for m in messages],
                                                  tools=[t.schema() for t in tools], temperature=temperature,
                                                  max_tokens=max_tokens, **({} if seed is None else {"seed": seed}))
        except openai.OpenAIError as exc:
            raise RatchetError(f"{model.name} failed on a tool-call request: {exc}") from exc
        choice = resp.choices[0]
        usage = Usage(resp.usage.prompt_tokens, resp.usage.completion_tokens) if resp.usage else Usage()
        completion = Completion(choice.message.content or "", usage, time.perf_counter() - start, model.name,
                                choice.finish_reason or "stop")
        raw = choice.message.tool_calls or []
        message: Message = {"role": "assistant", "content": completion.text}
        if raw:
            message["tool_calls"] = [{"id": c.id, "type": "function",  # type: ignore[typeddict-unknown-key]
                                      "function": {"name": c.function.name, "arguments": c.function.arguments}}
                                     for c in raw]
        calls: list[ToolCall] | FormatError = [
            ToolCall(c.function.name, _loads(c.function.arguments or "{}") or {}, c.id) for c in raw]
        if not raw:
            calls = FormatError("reply with a tool call; call submit when the task is done")
        return completion, message, calls

    def result_message(self, call: ToolCall, text: str) -> Message:
        return {"role": "tool", "tool_call_id": call.id, "content": text}


def protocol_for(name: str) -> TextProtocol | NativeProtocol:
    return NativeProtocol() if name == "native" else TextProtocol()
