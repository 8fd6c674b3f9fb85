"""A harness workspace: every part of the agent as a plain file the improvement engine can edit.

=====================  ==============================================================
``settings.yaml``      the loop's settings (AgentConfig)
``context.yaml``       the context/memory policy (ContextConfig)
``permissions.yaml``   the permission policy (PermissionPolicy)
``system_prompt.md``   the system prompt ({workdir} shown as ".", {tool_instructions}, {skills} filled in)
``tools.yaml``         the tool descriptions the model sees
``tools/*.py``         tool implementations (a module's ``TOOLS`` names its tool functions);
                       a workspace tool replaces a built-in one of the same name
``hooks.py``           before/after model call and before/after tool call middleware
``skills/*/SKILL.md``  skills, loaded on demand (plus optional ``skill.py`` tools)
=====================  ==============================================================
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import yaml

from ratchet.config import load_config
from ratchet.contracts import RatchetError
from ratchet.runtime.config import AgentConfig, ContextConfig, PermissionPolicy

DEFAULT_WORKSPACE = Path(__file__).parent / "workspace"
SURFACES = ("settings.yaml", "context.yaml", "permissions.yaml", "system_prompt.md", "tools.yaml", "hooks.py")


def _identity(agent: Any, value: Any, *rest: Any) -> Any:
    return rest[-1] if rest else value


@dataclass
class Hooks:
    """The four middleware points; each returns what it was given (possibly changed)."""

    before_model: Callable[..., Any] = _identity
    after_model: Callable[..., Any] = _identity
    before_tool: Callable[..., Any] = _identity
    after_tool: Callable[..., Any] = _identity


def load_module(path: Path) -> ModuleType:
    """Import one workspace file under a name unique to its path and content."""
    tag = hashlib.sha256(f"{path.resolve()}:{path.read_bytes()!r}".encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"ratchet_workspace_{path.stem}_{tag}", path)
    if spec is None or spec.loader is None:
        raise RatchetError(f"cannot import workspace file {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise RatchetError(f"workspace file {path} failed to load: {type(exc).__name__}: {exc}",
                           hint="fix the file, or restore it with `ratchet agent init`") from exc
    return module


class HarnessWorkspace:
    """A directory laid out as above; a missing file falls back to the shipped default."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else DEFAULT_WORKSPACE
        if not self.path.is_dir():
            raise RatchetError(f"no harness workspace at {self.path}",
                               hint="create one with `ratchet agent init DIR`, or omit --workspace for the default")

    @staticmethod
    def init(dest: str | Path) -> HarnessWorkspace:
        """Copy the shipped default workspace to ``dest`` (which must not exist yet)."""
        dest = Path(dest)
        if dest.exists():
            raise RatchetError(f"{dest} exists already", hint="pick a new directory")
        shutil.copytree(DEFAULT_WORKSPACE, dest, ignore=shutil.ignore_patterns("__pycache__"))
        return HarnessWorkspace(dest)

    def file(self, name: str) -> Path:
        own = self.path / name
        return own if own.exists() else DEFAULT_WORKSPACE / name

    def settings(self, overrides: tuple[str, ...] = ()) -> AgentConfig:
        return load_config(AgentConfig, self.file("settings.yaml"), overrides)

    def context_config(self) -> ContextConfig:
        return load_config(ContextConfig, self.file("context.yaml"))

    def permissions(self) -> PermissionPolicy:
        return load_config(PermissionPolicy, self.file("permissions.yaml"))

    def system_prompt(self) -> str:
        return self.file("system_prompt.md").read_text()

    def descriptions(self) -> dict[str, str]:
        data = yaml.safe_load(self.file("tools.yaml").read_text()) or {}
        return {str(k): str(v) for k, v in (data.get("descriptions") or {}).items()}

    def tool_modules(self) -> list[ModuleType]:
        folder = self.path / "tools" if (self.path / "tools").is_dir() else DEFAULT_WORKSPACE / "tools"
        return [load_module(p) for p in sorted(folder.glob("*.py"))]

    def hooks(self) -> Hooks:
        module = load_module(self.file("hooks.py"))
        return Hooks(**{n: getattr(module, n) for n in ("before_model", "after_model", "before_tool", "after_tool")
                        if callable(getattr(module, n, None))})

    @property
    def skills_dir(self) -> Path:
        return self.path / "skills" if (self.path / "skills").is_dir() else DEFAULT_WORKSPACE / "skills"

    def files(self) -> dict[str, str]:
        """Every text file of the workspace by relative path (a Candidate's ``files``)."""
        return {p.relative_to(self.path).as_posix(): p.read_text() for p in sorted(self.path.rglob("*"))
                if p.is_file() and "__pycache__" not in p.parts}
