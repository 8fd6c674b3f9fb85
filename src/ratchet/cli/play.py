"""``ratchet play``: play episodes of one environment with an agent and report how it went."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ratchet.cli.options import RunDirAlias, StoreOption, store_root

console = Console()


def play(
    env: str = typer.Option(..., "--env", help="Environment id, e.g. TicTacToe-v0 (see `ratchet envs list`)."),
    agent: str = typer.Option(
        "random-legal", "--agent",
        help="random | random-legal | code:pkg.mod:function | a model spec (local:NAME, openai:MODEL, http://…#MODEL).",
    ),
    episodes: int = typer.Option(10, "--episodes", min=1, help="Number of episodes (one seed each)."),
    opponent: str = typer.Option("random-legal", "--opponent", help="Two-player games: random-legal | random | self | an agent spec."),
    seed: int = typer.Option(0, "--seed", help="First seed; episode i uses seed + i."),
    workers: int = typer.Option(0, "--workers", help="Worker processes (0 = auto: cores for code agents, 1 for local models)."),
    retry_illegal: bool = typer.Option(False, "--retry-illegal", help="Show the agent the env's reason after an illegal move."),
    max_steps: int = typer.Option(200, "--max-steps", help="Step cap per episode."),
    max_tokens: int = typer.Option(384, "--max-tokens", help="LLM agents: token cap per answer (thinking included)."),
    temperature: float = typer.Option(0.0, "--temperature", help="LLM agents: sampling temperature."),
    keep_hints: bool = typer.Option(False, "--keep-hints", help="Keep 'Valid moves' lists in observations."),
    store_dir: Path | None = StoreOption,
    run_dir: Path | None = RunDirAlias,
    no_store: bool = typer.Option(False, "--no-store", help="Do not write a run to the store."),
) -> None:
    """Play N episodes and print the legal-action rate, illegal-move reasons, reward and timing."""
    from ratchet.envs import EnvConfig
    from ratchet.envs.agents import AgentSpec
    from ratchet.envs.runner import RolloutConfig, run_rollouts

    config = RolloutConfig(
        workers=workers,
        env=EnvConfig(max_steps=max_steps, strip_move_hints=not keep_hints),
        opponent=opponent,
        retry_illegal=retry_illegal,
    )
    factory = AgentSpec(agent, game=env, seed=seed)
    if factory.is_llm:
        factory = AgentSpec(agent, game=env, seed=seed, options={"max_tokens": max_tokens, "temperature": temperature})
    run = None
    if not no_store:
        from ratchet.store import RunStore

        store = RunStore(store_root(store_dir, run_dir, "--run-dir"))
        run = store.create_run("play", {"env": env, "agent": agent, "episodes": episodes, "seed": seed,
                                        "rollout": config.model_dump()})
    seeds = [seed + i for i in range(episodes)]
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with run.marks_failure() if run is not None else nullcontext():
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(f"{env} · {agent}", total=episodes)
            report = run_rollouts(
                env, factory, seeds, config, run=run,
                progress=lambda done, total: bar.update(task, completed=done),
            )
    summary = report.to_dict()
    if run is not None:
        run.write_json("rollout_report.json", summary)
        run.set_status("done", {k: summary[k] for k in ("legal_rate", "mean_reward", "win_rate", "episodes")})

    table = Table(title=f"{env} · {report.agent} · {len(report.episodes)} episodes · {report.workers} worker(s)",
                  show_header=False)
    lo, hi = report.legal_ci
    rate = "— (the agent took no step)" if report.legal_rate is None else f"{report.legal_rate:.3f}"
    table.add_row("legal-action rate", f"{rate}  (95% CI {lo:.3f}–{hi:.3f}, {report.agent_steps} agent steps)")
    if report.losing_invalid:
        table.add_row("losing 'invalid' moves", f"{report.losing_invalid} (counted as lost, not illegal)")
    lo, hi = report.reward_ci
    table.add_row("mean reward", f"{report.mean_reward:.3f}  (95% CI {lo:.3f}–{hi:.3f})")
    lo, hi = report.win_ci
    table.add_row("win rate", f"{report.win_rate:.3f}  (95% CI {lo:.3f}–{hi:.3f}; draws count ½)")
    steps = max(report.agent_steps, 1)
    table.add_row("time", f"{report.wall_s:.1f} s wall · {report.wall_s / len(report.episodes):.2f} s/episode · "
                          f"agent {report.agent_s / steps:.3f} s/step · env {report.env_s / max(report.steps, 1) * 1000:.2f} ms/step")
    if report.tokens:
        table.add_row("tokens", f"{report.tokens:,} ({report.tokens / steps:.0f}/agent step)")
    console.print(table)
    if report.illegal_reasons:
        reasons = Table(title="illegal-move reasons")
        reasons.add_column("count", justify="right")
        reasons.add_column("reason")
        for reason, count in report.illegal_reasons.most_common(10):
            reasons.add_row(str(count), reason)
        console.print(reasons)
    if run is not None:
        console.print(f"run: {run.id}  ({run.dir})")


def register(app: typer.Typer) -> None:
    app.command("play")(play)
