"""``ratchet models``: the embedded model catalog, pulling, and a one-shot completion to try a spec."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from ratchet.contracts import RatchetError

console = Console()

models_app = typer.Typer(help="List, pull and try models (local:, openai:, http://...#MODEL).",
                         no_args_is_help=True)


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:,.0f} MiB"


@models_app.command("list")
def list_models() -> None:
    """The catalog of embedded models: size, whether it is cached (and verified), where."""
    from ratchet.models import registry

    table = Table(title=f"Embedded models (cache: {registry.cache_dir()})")
    for column in ("name", "size", "cached", "path"):
        table.add_column(column, overflow="fold")
    for name, entry in registry.CATALOG.items():
        path = registry.cached_path(name)
        if registry.is_verified(name):
            cached = "[green]yes[/]"
        elif path.exists():
            cached = "[red]corrupt[/]"
        else:
            cached = "[dim]no[/]"
        default = " (default)" if name == registry.DEFAULT_MODEL else ""
        table.add_row(name + default, _size(entry.size), cached, str(path) if path.exists() else "")
    console.print(table)
    console.print("Pull one with [bold]ratchet models pull NAME[/]; use it as [bold]local:NAME[/].")


@models_app.command("pull")
def pull_models(
    name: str = typer.Argument(None, help="Catalog name (see `ratchet models list`)."),
    all_: bool = typer.Option(False, "--all", help="Pull every model of the catalog."),
) -> None:
    """Download, assemble and verify an embedded model; instant when it is already cached."""
    from ratchet.models import registry

    if all_ == (name is not None):
        raise RatchetError("name one model or pass --all", hint="ratchet models pull qwen2.5-coder-0.5b")
    for each in registry.CATALOG if all_ else [name]:
        already = registry.is_verified(registry.entry(each).name)
        path = registry.pull(each, progress=console.is_terminal)
        state = "already cached" if already else "pulled and verified"
        console.print(f"[green]{each}[/]: {state} -> {path}")


@models_app.command("path")
def model_path(name: str = typer.Argument(..., help="Catalog name.")) -> None:
    """Print the path of a pulled model (fails with the pull command when absent)."""
    from ratchet.models import registry

    typer.echo(str(registry.model_path(name)))


@models_app.command("try")
def try_model(
    spec: str = typer.Argument(..., help="Model spec, e.g. local:qwen2.5-coder-0.5b or http://127.0.0.1:8000/v1#m."),
    prompt: str = typer.Argument(..., help="The user message."),
    max_tokens: int = typer.Option(128, help="Most tokens to generate."),
    temperature: float = typer.Option(0.0, help="Sampling temperature (0 = greedy)."),
    system: str = typer.Option(None, help="Optional system message."),
    grammar: str = typer.Option(None, help="Optional GBNF grammar (embedded models, llama.cpp servers)."),
) -> None:
    """Send one prompt to a model spec; print the answer, token counts and speed."""
    from ratchet.models import load_model

    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    model = load_model(spec)
    with console.status(f"asking {model.name} ..."):
        done = model.complete(messages, max_tokens=max_tokens, temperature=temperature, grammar=grammar)
    console.print(done.text, markup=False, highlight=False)
    speed = done.usage.completion_tokens / done.latency_s if done.latency_s > 0 else float("nan")
    console.print(
        f"[dim]{done.model}: {done.usage.prompt_tokens} prompt + {done.usage.completion_tokens} completion tokens, "
        f"{done.latency_s:.2f} s ({speed:.1f} tok/s incl. prompt), finish={done.finish_reason}[/]"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
