"""``ratchet envs``: which environments exist and whether they can run on this machine."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

console = Console()

envs_app = typer.Typer(help="List environments (TextArena games, task suites, plugins).", no_args_is_help=True)


@envs_app.command("list")
def list_command(
    suite: str | None = typer.Option(None, "--suite", help="Only this suite: autoharness-145, tasks."),
    all_ids: bool = typer.Option(False, "--all", help="Every TextArena base id (238), not only the paper's 145."),
    refresh: bool = typer.Option(False, "--refresh", help="Probe again instead of reading the cache."),
    unavailable: bool = typer.Option(False, "--unavailable", help="Only the ids that cannot run here."),
) -> None:
    """Every registered id with its player count; for any that cannot run here, the exact reason.

    The first call makes and resets every game in subprocesses, offline and time-limited (about half
    a minute for the 145 on two cores); the result is cached per TextArena version and interpreter.
    """
    from ratchet.envs import list_envs
    from ratchet.envs.legal import support

    with console.status("probing environments (cached after the first time)…"):
        infos = list_envs(suite, all_textarena=all_ids, refresh=refresh)
    shown = [i for i in infos if not (unavailable and i.available)]
    table = Table(title=f"{len(infos)} environments" + (f" in suite {suite}" if suite else ""))
    table.add_column("id", no_wrap=True)
    table.add_column("players", justify="right")
    table.add_column("runs here")
    # How the random-legal opponent finds its moves: computed from the game's rules, read from the
    # list the game prints, or guessed (then its moves may be illegal).
    table.add_column("legal moves")
    table.add_column("notes")
    for info in shown:
        notes = [n for n in (
            info.reason,
            f"Python {info.needs_python} worker" if info.needs_python and info.available else None,
            "losing moves count as invalid" if info.losing_invalid_note else None,
            info.source if info.source != "textarena" else None,
        ) if n]
        table.add_row(
            info.id,
            str(info.num_players or "?"),
            "[green]yes[/]" if info.available else "[red]no[/]",
            _MOVES.get(support(info.id), "") if info.source == "textarena" else "",
            "; ".join(notes),
        )
    console.print(table)
    ok = sum(i.available for i in infos)
    console.print(f"{ok}/{len(infos)} available here")


_MOVES = {"rules": "rules", "listed": "listed by game", "none": "[yellow]guessed[/]"}


def register(app: typer.Typer) -> None:
    app.add_typer(envs_app, name="envs")
