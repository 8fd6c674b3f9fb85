"""Tools are typed Python functions; their JSON schema comes from the signature and the docstring.

A tool function takes a :class:`ToolContext` first (not shown to the model), then its arguments.
Its docstring up to an ``Args:`` section is the description; that section describes each argument.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Literal

from ratchet.runtime.errors import ToolError

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                               dict: "object", list: "array", Any: "string"}

SHOWN_WORKDIR = "."
"""What the model is shown for the working directory: the system prompt's ``{workdir}`` and, in
command output, the real path. The real directory is unique per run (a fresh scratch copy of the
repository); naming it would make two greedy runs of one task send different tokens and answer
differently. Tools take paths relative to it and commands start in it, so ``.`` is a path that works."""


@dataclass
class ToolContext:
    """What a tool may use: the working directory, the settings, the policy guard and the
    runtime's services (memory, sub-agents, cron, skills). ``extra`` holds services a workspace
    tool brings itself."""

    workdir: Path
    config: Any
    guard: Any
    memory: Any
    run_dir: Path
    agent: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Tool:
    """One callable tool and the JSON schema the model sees."""

    name: str
    fn: Callable[..., Any]
    description: str
    parameters: dict[str, Any]

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}

    def call(self, ctx: ToolContext, arguments: dict[str, Any]) -> str:
        """Run with ``arguments`` checked against the signature; the result as text."""
        if not isinstance(arguments, dict):
            raise ToolError(f"{self.name}: arguments must be a JSON object, got {type(arguments).__name__}")
        props = self.parameters["properties"]
        unknown = sorted(set(arguments) - set(props))
        if unknown:
            raise ToolError(f"{self.name}: unknown argument(s) {', '.join(unknown)}; it takes: {', '.join(props) or 'none'}")
        missing = [name for name in self.parameters.get("required", []) if name not in arguments]
        if missing:
            raise ToolError(f"{self.name}: missing argument(s) {', '.join(missing)}")
        args = {k: _coerce(v, props[k], f"{self.name}.{k}") for k, v in arguments.items()}
        result = self.fn(ctx, **args)
        return result if isinstance(result, str) else repr(result) if result is not None else "ok"


def _coerce(value: Any, schema: dict[str, Any], where: str) -> Any:
    """Small models write ``"5"`` for 5 and ``"true"`` for true; accept those, refuse the rest."""
    kind = schema.get("type")
    try:
        if kind == "integer" and isinstance(value, str):
            return int(value)
        if kind == "number" and isinstance(value, str):
            return float(value)
        if kind == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if kind == "array" and isinstance(value, str):
            return [value]
    except ValueError as exc:
        raise ToolError(f"{where}: expected {kind}, got {value!r}") from exc
    return value


def json_schema(annotation: Any) -> dict[str, Any]:
    """The JSON schema of one type annotation (str, int, float, bool, list[...], dict, Literal, X | None)."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        values = list(typing.get_args(annotation))
        return {"type": _JSON_TYPES[type(values[0])], "enum": values}
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return json_schema(members[0]) if len(members) == 1 else {"anyOf": [json_schema(m) for m in members]}
    if origin in (list, tuple, Iterable):
        args = typing.get_args(annotation)
        return {"type": "array", "items": json_schema(args[0]) if args else {}}
    if origin is dict:
        return {"type": "object"}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    raise TypeError(f"tool argument type {annotation!r} has no JSON schema; use str, int, float, bool, list or dict")


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {arg: text}) from a Google-style docstring."""
    doc = inspect.cleandoc(doc or "")
    head, _, rest = doc.partition("\nArgs:")
    args: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        match = re.match(r"\s{2,}(\w+)(?: \([^)]*\))?:\s*(.*)", line)
        if match:
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current and line.strip():
            args[current] += " " + line.strip()
    return head.strip(), args


def tool_from_function(fn: Callable[..., Any], name: str | None = None, description: str | None = None) -> Tool:
    """A :class:`Tool` whose schema is read from ``fn``'s signature (after ``ctx``) and docstring."""
    hints = typing.get_type_hints(fn)
    text, arg_docs = _docstring_parts(fn.__doc__ or "")
    params = list(inspect.signature(fn).parameters.values())[1:]
    properties: dict[str, Any] = {}
    required: list[str] = []
    for p in params:
        schema = json_schema(hints.get(p.name, str))
        if p.name in arg_docs:
            schema["description"] = arg_docs[p.name]
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        else:
            schema["default"] = p.default
        properties[p.name] = schema
    parameters = {"type": "object", "properties": properties, "required": required}
    return Tool(name or fn.__name__, fn, description or text or fn.__name__, parameters)


def tools_of_module(module: Any) -> list[Tool]:
    """Every public function of ``module`` listed in its ``TOOLS`` tuple, as a Tool."""
    return [tool_from_function(getattr(module, n)) for n in module.TOOLS]


class ToolBox:
    """The tools of one agent by name; ``offered`` is what the model is shown."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self.tools: dict[str, Tool] = {}
        self.pinned: set[str] = set()
        for t in tools:
            self.add(t)

    def add(self, tool: Tool, *, pin: bool = False) -> None:
        """Register ``tool``; a pinned one is offered whatever the offered patterns say (a skill's
        tools, once the agent loaded the skill)."""
        self.tools[tool.name] = tool
        if pin:
            self.pinned.add(tool.name)

    def get(self, name: str) -> Tool:
        if name not in self.tools:
            raise ToolError(f"no tool named {name!r}; tools: {', '.join(sorted(self.tools))}")
        return self.tools[name]

    def offered(self, patterns: Iterable[str]) -> list[Tool]:
        pats = list(patterns)
        return [t for n, t in self.tools.items() if n in self.pinned or any(fnmatch(n, p) for p in pats)]
