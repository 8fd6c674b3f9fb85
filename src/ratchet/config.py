"""Typed configuration: pydantic models documented on the field, loaded from YAML, overridden
from the command line with ``--set key.sub=value``.

Every component's settings subclass :class:`Settings`. A field's docstring (the string literal
under it) becomes its description, so ``--help`` and error messages can show it. A bad value fails
at load with the dotted key, the bad value, and what is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
import re
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ratchet.contracts import RatchetError


class ConfigError(RatchetError):
    """A configuration file or override is invalid. ``problems`` lists each bad key on its own
    (the message joins them), so a checker can show every one."""

    def __init__(self, message: str, *, hint: str | None = None, problems: list[str] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems = problems or [message]


class Settings(BaseModel):
    """Base of every config model: unknown keys are errors, field docstrings are descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


S = TypeVar("S", bound=Settings)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b=3`` → (["a", "b"], 3). The value is read as YAML so numbers and lists keep their type."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(
            f"bad override {text!r}", hint="write overrides as --set key.sub=value, e.g. --set budget.max_calls=50"
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def _set_path(data: dict[str, Any], path: list[str], value: Any) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def _describe(error: dict[str, Any], model: type[BaseModel]) -> str:
    key = ".".join(str(p) for p in error["loc"]) or "(root)"
    if error["type"] == "missing":
        return f"{key}: required, but not given"
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, [p for p in error["loc"][:-1] if isinstance(p, str)])
        return f"{key}: unknown key (allowed here: {', '.join(allowed)})"
    return f"{key} = {error.get('input')!r}: {error['msg']}"


def _allowed_keys(model: type[BaseModel], path: list[str]) -> list[str]:
    current: Any = model
    for part in path:
        field_info = getattr(current, "model_fields", {}).get(part)
        if field_info is None:
            return []
        current = field_info.annotation
    return sorted(getattr(current, "model_fields", {}))


def validate_config(cls: type[S], data: dict[str, Any], source: str = "config") -> S:
    """Build ``cls`` from plain data; on failure raise :class:`ConfigError` naming every bad key."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(e, cls) for e in exc.errors()]
        raise ConfigError(
            f"invalid {source}: {'; '.join(problems)}",
            hint=f"see the documented fields with: ratchet config show {cls.__name__}",
            problems=problems,
        ) from None


def load_config(cls: type[S], path: str | Path | None = None, overrides: Iterable[str] = ()) -> S:
    """Load ``cls`` from an optional YAML file, then apply ``--set`` overrides, then validate."""
    data: dict[str, Any] = {}
    source = "config"
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}", hint="check the path: a relative one is read from the current directory")
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level, not {type(loaded).__name__}")
        data = loaded
        source = f"config {path}"
    overrides = list(overrides)
    for text in overrides:
        keys, value = parse_override(text)
        _set_path(data, keys, _as_text_if_wanted(cls, keys, text.partition("=")[2], value))
    if overrides:  # else a bad --set key reads as if the file held it
        source += " with --set " + " --set ".join(overrides)
    return validate_config(cls, data, source)


def _field_annotation(cls: type[BaseModel], keys: list[str]) -> Any:
    current: Any = cls
    for part in keys:
        model = next((a for a in (current, *get_args(current)) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        info = model.model_fields.get(part) if model is not None else None
        if info is None:
            return None
        current = info.annotation
    return current


def _as_text_if_wanted(cls: type[BaseModel], keys: list[str], raw: str, value: Any) -> Any:
    """A text field keeps ``--set name=2024`` as the text typed, not YAML's int (or float, bool…)."""
    annotation = _field_annotation(cls, keys)
    if annotation in (str, Path):
        return raw.strip()
    args = get_args(annotation)
    if get_origin(annotation) in (Union, UnionType) and type(None) in args and set(args) - {type(None)} <= {str, Path}:
        return None if value is None else raw.strip()
    return value


def describe_fields(cls: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, type, default, description) for every field, nested models flattened with dots."""
    rows: list[tuple[str, str, str, str]] = []
    for name, info in cls.model_fields.items():
        key = f"{prefix}{name}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.extend(describe_fields(annotation, f"{key}."))
            continue
        type_name = _type_name(annotation)
        default = "" if info.is_required() else repr(info.get_default(call_default_factory=True))
        rows.append((key, type_name, default, info.description or ""))
    return rows


def _type_name(annotation: Any) -> str:
    """``int``, ``Path``, ``Literal['a', 'b']``, ``list[int]``, ``str | None``: what a reader needs."""
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return re.sub(r"\b(typing|pathlib|collections\.abc)\.", "", str(annotation))
