"""Ratchet in one call each, for programs that use it as a library:

    from ratchet import api

    result = api.evolve("examples/jsonl-suite/evolve.yaml", overrides=["iterations=3"])
    print(result.run_id, result.summary["state"])

    harness = api.synthesize_harness("TicTacToe-v0", model="local:qwen2.5-coder-0.5b", max_calls=20)
    print(harness.report["adoption"])

    api.serve(model="local:qwen2.5-coder-0.5b", learn="combine")   # blocks until Ctrl-C

Each call is what the matching command runs (``ratchet evolve``, ``ratchet autoharness --env``,
``ratchet serve``): the same configs, the same run store, the same errors. Errors are
:class:`~ratchet.contracts.RatchetError` with a ``hint``; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ratchet.contracts import Model, RatchetError

if TYPE_CHECKING:  # the heavy parts load when a call needs them, so `import ratchet` stays cheap
    from ratchet.autoharness.config import AutoHarnessConfig
    from ratchet.envs.harness.protocol import ProtocolConfig
    from ratchet.evolve.config import EvolveConfig
    from ratchet.online.config import OnlineConfig
    from ratchet.store import Run

__all__ = ["EVOLVE_KIND", "PROTOCOLS", "EvolveResult", "HarnessResult", "evolve", "protocol_config", "resume_evolve",
           "serve", "synthesize_harness"]

#: The run kind of an improvement run in the store (``ratchet runs list --kind evolve``).
EVOLVE_KIND = "evolve"

#: Held-out protocol sizes of AutoHarness by name; ``full`` is the paper's (ProtocolConfig's defaults).
PROTOCOLS: dict[str, list[str]] = {
    "full": [],
    "quick": ["legal_seeds=3", "legal_steps=20", "reward_games=3", "matches=4"],
    # A few minutes on the embedded 0.5B on two cores: the demo's default.
    "demo": ["legal_seeds=2", "legal_steps=5", "reward_games=1", "matches=2", "step_cap=10", "play_max_tokens=64"],
}

EventHandler = Callable[[dict[str, Any]], None]


@dataclass
class EvolveResult:
    """What :func:`evolve` and :func:`resume_evolve` return."""

    run_id: str
    """The run's id in the store (``ratchet evolve status RUN_ID``)."""
    run_dir: Path
    """The run's directory: its candidates, decisions, evaluations and report."""
    summary: dict[str, Any]
    """The run's summary: ``state`` (done, budget_exhausted, waiting, stopped), ``accepted``,
    ``rejected``, ``task_evals``, ``model_calls`` and, when it finished, ``report`` (the original
    against the best candidate on the untouched split)."""
    warnings: list[str] = field(default_factory=list)
    """What was found before the run started and did not stop it (a held-in split too small for
    the gate to accept anything)."""


@dataclass
class HarnessResult:
    """What :func:`synthesize_harness` returns."""

    run_id: str
    """The run's id in the store (``ratchet autoharness export RUN_ID -o harness.py``)."""
    run_dir: Path
    """The run's directory."""
    report: dict[str, Any]
    """The per-game report: the search (``best_h``, calls, tokens), the held-out measures without
    and with the harness (``before``, ``after``) and the adoption verdict (``adoption``)."""


def _with_fields(config: Any, given: dict[str, Any], overrides: Iterable[str]) -> Any:
    """``config`` (a config object) with the keyword arguments that were given set on it (dotted
    keys into nested settings) and checked again, as a file with them would be."""
    from ratchet.config import validate_config

    if list(overrides):
        raise RatchetError("overrides apply to a config file, not to a config object",
                           hint="change the object instead: config.model_copy(update={...})")
    data = config.model_dump(mode="json")
    for key, value in given.items():
        if value is None:
            continue
        *parents, last = key.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = str(value) if isinstance(value, Path) else value
    return validate_config(type(config), data, "the config object")


# ------------------------------------------------------------------------------------------
# The improvement engine
# ------------------------------------------------------------------------------------------


def _load_model(spec: str | None, threads: int | None) -> Model | None:
    if spec is None:
        return None
    from ratchet.models import load_model  # loads backends (llama.cpp) only when a model is named

    return load_model(spec, threads=threads)


def _run_engine(cfg: EvolveConfig, run: Run, model: Model | None, proposer_model: Model | None,
                on_event: EventHandler | None) -> EvolveResult:
    from ratchet.evolve.loop import Engine
    from ratchet.evolve.preflight import gate_reach_warning

    with run.marks_failure():  # whatever stops the run marks it failed with why, never 'running' for good
        engine = Engine(cfg, run, model, on_event=on_event, proposer_model=proposer_model)
        warnings = [w for w in [gate_reach_warning(engine.gate, len(engine.splits["heldin"]))] if w]
        for text in warnings:
            if on_event is not None:
                on_event({"kind": "warning", "message": text})
        summary = engine.execute()
    return EvolveResult(run.id, run.dir, summary, warnings)


def evolve(config: str | Path | EvolveConfig, *, overrides: Iterable[str] = (), store: str | Path | None = None,
           model: Model | None = None, proposer_model: Model | None = None, threads: int | None = None,
           on_event: EventHandler | None = None, on_start: Callable[[Run], None] | None = None) -> EvolveResult:
    """Start an improvement run and drive it to a stop (``ratchet evolve CONFIG``).

    ``config`` is a YAML file of :class:`~ratchet.evolve.config.EvolveConfig` fields (a relative
    ``workspace:`` is read against the file's directory) or a config object; ``overrides`` are
    ``key=value`` strings as ``--set`` takes them (a path only). ``model`` and ``proposer_model``
    replace the config's model specs with model objects (a scripted model in a test, say);
    ``threads`` sizes llama.cpp for local specs. ``store`` is the run store's directory (default
    ``$RATCHET_RUNS`` or ``./runs``). ``on_event`` receives each of the engine's events (a step, a
    task evaluation, a warning); ``on_start`` the run, once it exists. A run that stops early
    (budget, approval, kill) continues with :func:`resume_evolve`."""
    from ratchet.evolve.config import EvolveConfig
    from ratchet.evolve.manifest import load_manifest
    from ratchet.evolve.preflight import CONFIG_COPY, load_evolve_config, resolve_workspace
    from ratchet.store import RunStore
    from ratchet.store.files import write_bytes_atomic

    if isinstance(config, EvolveConfig):
        cfg = _with_fields(config, {}, overrides)
        cfg = cfg.model_copy(update={"workspace": resolve_workspace(cfg.workspace, None)})
    else:
        cfg = load_evolve_config(config, overrides)
    manifest = load_manifest(cfg.workspace)
    # Model specs load before a run is made for them, so a bad spec leaves no run behind.
    model = model if model is not None else _load_model(cfg.model, threads)
    proposer_model = proposer_model if proposer_model is not None else _load_model(cfg.proposer_model, threads)
    run = RunStore(store).create_run(EVOLVE_KIND, cfg, name=manifest.name)
    with run.marks_failure():
        write_bytes_atomic(run.path(CONFIG_COPY), dump_evolve_config(cfg))
        if on_start is not None:
            on_start(run)
    return _run_engine(cfg, run, model, proposer_model, on_event)


def resume_evolve(run_id: str, *, overrides: Iterable[str] = (), store: str | Path | None = None,
                  model: Model | None = None, proposer_model: Model | None = None, threads: int | None = None,
                  on_event: EventHandler | None = None, on_start: Callable[[Run], None] | None = None) -> EvolveResult:
    """Continue an improvement run after a kill, a budget stop or an approval (``ratchet evolve
    resume RUN_ID``); nothing finished is paid again. ``overrides`` may raise limits
    (``iterations=30``, ``budget.max_calls=400``) or move the run (``executor.kind=ray``)."""
    import yaml

    from ratchet.config import load_config
    from ratchet.evolve.config import EvolveConfig
    from ratchet.evolve.loop import EVENTS
    from ratchet.evolve.preflight import CONFIG_COPY
    from ratchet.store import RunStore
    from ratchet.store.files import write_bytes_atomic

    run = RunStore(store).open_run(run_id)
    if run.kind != EVOLVE_KIND and not run.path(EVENTS).is_file():
        raise RatchetError(f"run {run.id} is not an evolve run (its kind is {run.kind})",
                           hint="list the evolve runs with: ratchet runs list --kind evolve")
    if not run.path(CONFIG_COPY).is_file():
        # Killed between run.json and the config copy: run.json holds the same config, so the run
        # starts from it rather than being refused.
        write_bytes_atomic(run.path(CONFIG_COPY), yaml.safe_dump(run.config, sort_keys=False).encode())
    cfg = load_config(EvolveConfig, run.path(CONFIG_COPY), overrides)
    model = model if model is not None else _load_model(cfg.model, threads)
    proposer_model = proposer_model if proposer_model is not None else _load_model(cfg.proposer_model, threads)
    write_bytes_atomic(run.path(CONFIG_COPY), dump_evolve_config(cfg))
    run.set_status("running")
    with run.marks_failure():
        if on_start is not None:
            on_start(run)
    return _run_engine(cfg, run, model, proposer_model, on_event)


def dump_evolve_config(cfg: EvolveConfig) -> bytes:
    """The config as the run keeps it (``evolve/config.yaml``): plain YAML that loads back the same."""
    import yaml

    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False).encode()


# ------------------------------------------------------------------------------------------
# AutoHarness
# ------------------------------------------------------------------------------------------


def protocol_config(name: str, overrides: Iterable[str] = ()) -> ProtocolConfig | None:
    """The held-out protocol of a preset name (:data:`PROTOCOLS`) plus ``key=value`` overrides;
    None for ``none`` (no held-out check)."""
    from ratchet.envs.harness.protocol import ProtocolConfig
    from ratchet.config import ConfigError, load_config

    if name == "none":
        return None
    if name not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {name!r}", hint=f"use one of: {', '.join(PROTOCOLS)}, or none")
    return load_config(ProtocolConfig, None, [*PROTOCOLS[name], *overrides])


def synthesize_harness(env: str | None = None, *, model: str | None = None, mode: str | None = None,
                       method: str | None = None, iterations: int | None = None, max_calls: int | None = None,
                       config: str | Path | AutoHarnessConfig | None = None, overrides: Iterable[str] = (),
                       protocol: str = "quick", protocol_overrides: Iterable[str] = (),
                       store: str | Path | None = None, resume: str | None = None, threads: int | None = None,
                       on_phase: Callable[[str], None] | None = None) -> HarnessResult:
    """Let a model write the harness for one TextArena game (``ratchet autoharness --env ENV``).

    ``env``, ``model``, ``mode`` (verifier | filter | policy), ``method`` (faithful | ratchet),
    ``iterations`` and ``max_calls`` set the matching :class:`~ratchet.autoharness.config.AutoHarnessConfig`
    fields over ``config`` (a YAML file or an object) and ``overrides`` (``key=value``). ``protocol``
    sizes the held-out check (:data:`PROTOCOLS`, or ``none``). ``resume`` continues a run by id with
    the config it started with (a run the dedicated search started, before the engine became the
    one search, is refused with the fix). The synthesis runs on the improvement engine
    (:mod:`ratchet.autoharness.engine`); ``on_phase`` hears its phases. The best harness is exported
    with ``ratchet autoharness export``."""
    from ratchet.autoharness.config import AutoHarnessConfig
    from ratchet.autoharness.engine import synthesize_on_engine
    from ratchet.autoharness.pipeline import accounted, open_or_create, refuse_search_run
    from ratchet.config import load_config
    from ratchet.store import RunStore

    given = {"env": env, "mode": mode, "method": method, "model": model, "iterations": iterations,
             "budget.max_calls": max_calls}
    sets = [*overrides, *(f"{k}={v}" for k, v in given.items() if v is not None)]
    if isinstance(config, AutoHarnessConfig):
        cfg = _with_fields(config, given, overrides)
    else:
        cfg = load_config(AutoHarnessConfig, config, sets)
    proto = protocol_config(protocol, protocol_overrides)
    run_store = RunStore(store)
    if resume:
        refuse_search_run(run_store.open_run(resume))  # before the run is marked running again
    run, cfg = open_or_create(run_store, cfg, resume)
    with run.marks_failure():  # a model that does not load, or a bug, marks the run failed with why
        from ratchet.models import load_model

        llm = load_model(cfg.model, threads=threads)
        player = accounted(llm, run, "autoharness.heldout")  # the held-out games' calls are the run's too
        report = synthesize_on_engine(cfg, llm, run, protocol=proto, play_model=player, on_phase=on_phase)
    return HarnessResult(run.id, run.dir, report)


# ------------------------------------------------------------------------------------------
# Learning from use
# ------------------------------------------------------------------------------------------


def serve(model: str | None = None, *, learn: str | None = None, host: str | None = None, port: int | None = None,
          store: str | Path | None = None, config: str | Path | OnlineConfig | None = None,
          overrides: Iterable[str] = ()) -> None:
    """Serve ``model`` over an OpenAI-compatible API and train it on its conversations
    (``ratchet serve``); blocks until Ctrl-C or SIGTERM, then stops serving, judging and training
    in order. ``learn`` is off | binary | opd | combine; ``store`` the run store's directory."""
    from ratchet.config import load_config
    from ratchet.online.config import OnlineConfig
    from ratchet.online.launch import run_server

    given = {"model": model, "learn": learn, "host": host, "port": port, "runs_root": store}
    sets = [*overrides, *(f"{k}={v}" for k, v in given.items() if v is not None)]
    if isinstance(config, OnlineConfig):
        cfg = _with_fields(config, given, overrides)
    else:
        cfg = load_config(OnlineConfig, config, sets)
    run_server(cfg)
