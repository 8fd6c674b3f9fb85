"""``ratchet doctor``: is this machine ready to run Ratchet? One row per check, with the fix."""

from __future__ import annotations

import importlib
import importlib.metadata
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import typer
from rich.console import Console
from rich.table import Table

console = Console()

STYLE = {"ok": "green", "warn": "yellow", "fail": "red"}
LLAMA_VERSION = "0.3.36"
TORCH_VERSION = "2.13.0"


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def check_python() -> list[Check]:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info >= (3, 11):
        return [Check("python", "ok", f"{version} ({sys.executable})")]
    return [Check("python", "fail", version, "Ratchet needs Python >= 3.11: run scripts/setup.sh")]


def check_envs_python() -> list[Check]:
    name = "python >= 3.12 (5 games)"
    try:
        from ratchet.envs.remote import envs_python
    except ImportError as exc:
        return [Check(name, "warn", f"cannot probe: {exc}", "reinstall ratchet")]
    python, why = envs_python()
    if python:
        return [Check(name, "ok", python)]
    return [Check(name, "warn", why[:200], "scripts/setup.sh creates .venv-envs (or set RATCHET_ENVS_PYTHON)")]


def check_models() -> list[Check]:
    from ratchet.models import registry

    rows = []
    for name, entry in registry.CATALOG.items():
        path = registry.cached_path(name)
        default = name == registry.DEFAULT_MODEL
        label = f"model {name}" + (" (default)" if default else "")
        if registry.is_verified(name):
            rows.append(Check(label, "ok", f"verified, {entry.size / 2**20:,.0f} MiB at {path}"))
        elif path.exists():
            rows.append(Check(label, "fail", f"{path} does not match its pinned SHA-256",
                              f"ratchet models pull {name} (re-downloads it)"))
        else:
            status = "fail" if default else "ok"
            rows.append(Check(label, status, "not pulled" + ("" if default else " (optional)"),
                              f"ratchet models pull {name}"))
    return rows


def check_llama() -> list[Check]:
    try:
        llama_cpp = importlib.import_module("llama_cpp")
    except Exception as exc:  # an ImportError, or a shared library that does not load on this CPU
        return [Check("llama-cpp-python", "fail", f"not importable: {exc}"[:200],
                      "pip install -e '.[local]' (compiles llama.cpp, ~5 min) or use an http:// model")]
    version = getattr(llama_cpp, "__version__", "?")
    if version != LLAMA_VERSION:
        return [Check("llama-cpp-python", "warn", f"{version} (tested with {LLAMA_VERSION})",
                      f"pip install llama-cpp-python=={LLAMA_VERSION}")]
    return [Check("llama-cpp-python", "ok", version)]


def check_textarena() -> list[Check]:
    try:
        textarena = importlib.import_module("textarena")
    except Exception as exc:
        return [Check("textarena", "fail", f"not importable: {exc}"[:200], "pip install textarena==0.7.4")]
    version = getattr(textarena, "__version__", None) or importlib.metadata.version("textarena")
    return [Check("textarena", "ok", version)]


def check_torch() -> list[Check]:
    # The version from the package metadata: importing torch costs seconds and is not needed here.
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return [Check("torch (learning)", "warn", "not installed; `ratchet serve --learn` needs it",
                      f"pip install torch=={TORCH_VERSION} (exactly: other versions pull GPU builds)")]
    if version.split("+")[0] != TORCH_VERSION:
        return [Check("torch (learning)", "warn", f"{version} (tested with {TORCH_VERSION})",
                      f"pip install torch=={TORCH_VERSION}")]
    return [Check("torch (learning)", "ok", version)]


def check_bubblewrap() -> list[Check]:
    try:
        from ratchet.sandbox.isolation import probe_bwrap

        why = probe_bwrap()
    except ImportError:
        path = shutil.which("bwrap")
        why = None if path else "bwrap is not installed"
        if path:
            done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
            why = None if done.returncode == 0 else done.stderr.strip()[:200]
    if why is None:
        return [Check("bubblewrap (sandbox)", "ok", shutil.which("bwrap") or "bwrap")]
    return [Check("bubblewrap (sandbox)", "warn", f"{why}; the sandbox falls back to weaker isolation"[:240],
                  "apt-get install bubblewrap")]


CHECKS: tuple[Callable[[], list[Check]], ...] = (
    check_python, check_envs_python, check_models, check_llama, check_textarena, check_torch, check_bubblewrap,
)


def run_checks() -> list[Check]:
    rows: list[Check] = []
    for check in CHECKS:
        try:
            rows.extend(check())
        except Exception as exc:  # a broken check is itself a finding, not a crash of the doctor
            rows.append(Check(check.__name__.removeprefix("check_"), "fail", f"check crashed: {exc}"[:200]))
    return rows


def doctor() -> None:
    """Check Python, the 3.12 interpreter for five games, pulled models, llama.cpp, textarena, torch
    and bubblewrap. Exits 1 if any check fails."""
    with console.status("checking ..."):
        rows = run_checks()
    table = Table(title="ratchet doctor")
    for column in ("check", "status", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row.name, f"[{STYLE[row.status]}]{row.status}[/]", row.detail, row.fix)
    console.print(table)
    failed = [r.name for r in rows if r.status == "fail"]
    if failed:
        console.print(f"[red]{len(failed)} check(s) failed:[/] {', '.join(failed)}")
        raise typer.Exit(1)
    console.print("[green]ready.[/]")


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
