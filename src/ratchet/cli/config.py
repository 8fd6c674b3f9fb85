"""``ratchet config``: the documented settings of every component, and a checker for YAML files."""

from __future__ import annotations

import importlib
from pathlib import Path

import typer
import yaml
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ratchet.config import ConfigError, Settings, describe_fields, load_config
from ratchet.contracts import RatchetError

console = Console()

#: Short name → "module:Class" of every component's settings. Imported only when asked for, so a
#: component that is not installed (or not written yet) does not break the others.
CONFIGS: dict[str, str] = {
    "autoharness": "ratchet.autoharness.config:AutoHarnessConfig",
    "curriculum": "ratchet.curriculum.config:CurriculumConfig",
    "protocol": "ratchet.envs.harness.protocol:ProtocolConfig",
    "serve": "ratchet.online.config:OnlineConfig",
    "trainer": "ratchet.online.trainer_config:TrainerConfig",
    "envs": "ratchet.envs.config:EnvConfig",
    "rollout": "ratchet.envs.runner:RolloutConfig",
    "sandbox": "ratchet.sandbox.config:SandboxConfig",
    "budget": "ratchet.models.budget:BudgetConfig",
    "llama": "ratchet.models.llama_embedded:LlamaConfig",
    "openai": "ratchet.models.openai_compat:OpenAIConfig",
    "store": "ratchet.store.config:StoreConfig",
    "ui": "ratchet.ui.config:UIConfig",
    "evolve": "ratchet.evolve.config:EvolveConfig",
    "agent": "ratchet.runtime.config:AgentConfig",
}

#: Checks beyond a config's own fields, by short name: ``module:function(config) -> problems``.
#: An evolve config names components (suite, selector, gate, proposers) whose options are their own
#: settings classes; these are checked here too, all of them, not one at a time as a run builds them.
DEEP_CHECKS: dict[str, str] = {"evolve": "ratchet.evolve.preflight:component_problems"}

config_app = typer.Typer(help="Show the documented settings; validate a YAML config file.", no_args_is_help=True)


def import_settings(target: str) -> type[Settings]:
    """Import ``module:Class`` and check that it is a Settings model."""
    module_name, _, class_name = target.partition(":")
    module = importlib.import_module(module_name)
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise RatchetError(f"{target} is not a settings class")
    return cls


def resolve(name: str) -> tuple[str, type[Settings]]:
    """(short name, class) for a short name, a class name (any case) or a ``module:Class`` path."""
    key = name.lower()
    if key not in CONFIGS:
        by_class = [k for k, target in CONFIGS.items() if target.rpartition(":")[2].lower() == key]
        if by_class:
            key = by_class[0]
        elif ":" in name:
            try:
                return name, import_settings(name)
            except (ImportError, AttributeError) as exc:
                raise RatchetError(f"cannot import {name}: {exc}") from None
        else:
            raise RatchetError(f"unknown config {name!r}", hint=f"known: {', '.join(CONFIGS)} (or module:Class)")
    try:
        return key, import_settings(CONFIGS[key])
    except ImportError as exc:
        raise RatchetError(
            f"config {key!r} ({CONFIGS[key]}) is not available in this install: {exc}",
            hint="see `ratchet config show` for the configs that are",
        ) from None


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""


@config_app.command("show")
def show(name: str | None = typer.Argument(None, help="Config to describe (short name or class name).")) -> None:
    """Without NAME: the known configs. With NAME: every field with its type, default and meaning."""
    if name is None:
        table = Table(title="configs (ratchet config show NAME)")
        for column in ("name", "class", "about"):
            table.add_column(column)
        for key, target in CONFIGS.items():
            try:
                cls = import_settings(target)
                table.add_row(key, target, _first_line(cls.__doc__))
            except ImportError as exc:
                table.add_row(key, target, f"[dim]not available here ({exc})[/]")
        console.print(table)
        return
    key, cls = resolve(name)
    table = Table(title=f"{key}: {cls.__name__}", caption=_first_line(cls.__doc__))
    for column in ("key", "type", "default", "description"):
        table.add_column(column, overflow="fold")
    for field_key, type_name, default, description in describe_fields(cls):
        table.add_row(field_key, type_name, default, " ".join(description.split()))
    console.print(table)


@config_app.command("validate")
def validate(
    file: Path = typer.Argument(..., help="YAML file to check."),
    kind: str = typer.Option(..., "--kind", help="Which config the file is for (see `ratchet config show`)."),
    overrides: list[str] = typer.Option([], "--set", help="Override a key, e.g. --set budget.max_calls=50."),
) -> None:
    """Load FILE as a KIND config (plus --set overrides); print the result or every problem."""
    key, cls = resolve(kind)
    try:
        config = load_config(cls, file, overrides)
    except ConfigError as exc:
        _invalid(file, key, exc.problems if len(exc.problems) > 1 else [exc.args[0]], exc.hint)
    deep = DEEP_CHECKS.get(key)
    problems = _import(deep)(config) if deep else []
    if problems:
        _invalid(file, key, problems, "see a component's options with: ratchet config show module:OptionsClass")
    console.print(f"[green]valid[/] {escape(str(file))} ({key}: {cls.__name__})")
    console.print(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False).rstrip(), markup=False)


def _invalid(file: Path, key: str, problems: list[str], hint: str | None) -> None:
    """Every problem on a line of its own, as written: a value such as ``[x]`` is not read as markup."""
    noun = "problem" if len(problems) == 1 else "problems"
    console.print(f"[red]invalid[/] {escape(str(file))} ({key}): {len(problems)} {noun}")
    for problem in problems:
        console.print(f"  - {problem}", markup=False, soft_wrap=True)
    if hint:
        console.print(f"  hint: {hint}", markup=False, soft_wrap=True)
    raise typer.Exit(1)


def _import(target: str):
    module_name, _, name = target.partition(":")
    return getattr(importlib.import_module(module_name), name)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
