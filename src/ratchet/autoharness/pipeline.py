"""One game end to end: create or resume a run, synthesize, run the protocol, keep the best
harness in the library, write the per-game report. The CLI and the benchmark call this."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.heldout import judge, keep_in_library, play_protocol, verdict_of
from ratchet.autoharness.library import HarnessLibrary
from ratchet.autoharness.protocol import ProtocolConfig, code_heldout
from ratchet.autoharness.report import game_report
from ratchet.autoharness.runtime import RuntimeFactory, sandbox_runtime_factory
from ratchet.autoharness.search import SearchResult, Synthesis
from ratchet.contracts import Model, RatchetError
from ratchet.envs import env_factory_for
from ratchet.models import AccountedModel, Accountant, BudgetConfig

RUN_KIND = "autoharness"


def accounted(model: Model, run: Any, purpose: str = "autoharness.refine") -> AccountedModel:
    """Every call (the refiner's; with ``purpose="autoharness.heldout"`` the held-out games') goes
    through one accountant that logs it in ``run``'s store. The search enforces its own
    (resumable) budget; the accountant records."""
    return AccountedModel(model, Accountant(BudgetConfig(), on_call=run.record_llm_call), purpose=purpose)


def open_or_create(store: Any, cfg: AutoHarnessConfig, resume: str | None, name: str | None = None) -> tuple[Any, AutoHarnessConfig]:
    """A new run for ``cfg``, or the run ``resume`` with the config it was started with."""
    if resume:
        run = store.open_run(resume)
        run.set_status("running")  # this process runs it now: a kill from here on reads "interrupted"
        record = run.read_json("run.json") or {}
        saved = record.get("config")
        if saved:
            cfg = AutoHarnessConfig.model_validate(saved)
        return run, cfg
    return store.create_run(RUN_KIND, cfg.model_dump(), name or f"{cfg.env}-{cfg.mode}-{cfg.method}"), cfg


def searched(run: Any) -> bool:
    """Whether ``run`` was started by the dedicated search (it has the search's checkpoint): a
    resumed run carries on the way it started."""
    try:
        return bool(run.load_checkpoint("autoharness"))
    except (FileNotFoundError, KeyError):
        return False


def synthesize_game(
    cfg: AutoHarnessConfig,
    model: Model,
    run: Any,
    *,
    protocol: ProtocolConfig | None = None,
    play_model: Model | None = None,
    runtime_factory: RuntimeFactory | None = None,
    env_factory: Callable[[], Any] | None = None,
    library: HarnessLibrary | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Search, then (when ``protocol`` is given) evaluate on held-out seeds; returns the report."""
    started = time.perf_counter()
    hint_env_factory = None if env_factory is not None else env_factory_for(cfg.env, hints=True)
    env_factory = env_factory or env_factory_for(cfg.env)
    runtime_factory = runtime_factory or sandbox_runtime_factory(cfg.call_timeout_s)
    probe = env_factory()
    try:
        description = probe.game_description() if hasattr(probe, "game_description") else ""
        players = getattr(probe, "num_players", None)
    finally:
        probe.close()
    library = library if library is not None else HarnessLibrary(cfg.library_dir)
    seeds = library.lookup(cfg.env, cfg.mode) if cfg.method == "ratchet" and cfg.ideas.library_seed else []
    note = on_phase or (lambda phase: None)
    note("search")
    search = Synthesis(cfg, model, run, env_factory, runtime_factory, description=description, library_seeds=seeds,
                       on_progress=on_progress, hint_env_factory=hint_env_factory)
    result: SearchResult = search.run_search()
    run.write_json("search.json", {**result.__dict__, "history": result.history})
    evaluation = None
    alone = None
    skipped = None
    if result.best_code and result.best_h <= 0:
        # Nothing the search kept passed a single check: the held-out run would only repeat the
        # failures (for code that times out, for an hour), so it is skipped and the reason kept.
        skipped = f"the search's best h is {result.best_h:g}: nothing worth checking on held-out seeds"
    elif result.best_code:
        note("held-out check of the code alone")
        alone = code_heldout(result.best_code, env_factory, runtime_factory, cfg.heldout_seeds[:5], steps=200,
                             step_cap=cfg.step_cap, hint_env_factory=hint_env_factory, max_seconds=cfg.heldout_seconds)
    if protocol is not None and result.best_code:
        evaluation = evaluate_harness(cfg, run, result.best_code, play_model or model, protocol, env_factory=env_factory,
                                      runtime_factory=runtime_factory, on_phase=note)
    report = game_report(cfg, result, evaluation, run_id=run.id, wall_s=time.perf_counter() - started,
                         model_name=getattr(model, "name", cfg.model))
    report["harness_alone"] = alone
    if skipped:
        report["harness_alone_skipped"] = skipped
    report["players"] = report.get("players") or players
    report["harvest"] = search.state.get("harvest")
    adopt(cfg, run, report, result.best_code, result.best_id, library)
    # The search marked the run done when it stopped; this refreshes it with the same summary once the
    # held-out check and the protocol have finished too.
    run.set_status("done", result.summary())
    return report


def adopt(cfg: AutoHarnessConfig, run: Any, report: dict[str, Any], code: str | None, candidate_id: str | None,
          library: HarnessLibrary | None = None) -> dict[str, Any]:
    """Judge the report's held-out sides (:func:`ratchet.autoharness.heldout.judge`), record the
    verdict in the report (``report.json``), and keep the harness in the library unless the verdict
    rejects it (:func:`~ratchet.autoharness.heldout.keep_in_library`).

    Called again when the protocol runs after the search (a batch's second pass): a harness that
    was kept unchecked and is now rejected is withdrawn from the library."""
    verdict = judge(report.get("before"), report.get("after"), cfg.adoption)
    report["adoption"] = verdict
    run.write_json("report.json", report)
    library = library if library is not None else HarnessLibrary(cfg.library_dir)
    score = (report.get("search") or {}).get("best_h") or 0.0
    keep_in_library(library, verdict, cfg.env, cfg.mode, code, score, gate=cfg.adoption.gate, run_id=run.id,
                    candidate_id=candidate_id, model=report.get("model"), method=cfg.method)
    return verdict


def evaluate_harness(
    cfg: AutoHarnessConfig,
    run: Any,
    code: str,
    play_model: Model,
    protocol: ProtocolConfig,
    *,
    env_factory: Callable[[], Any] | None = None,
    runtime_factory: RuntimeFactory | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The held-out protocol (model with and without ``code``, :func:`ratchet.autoharness.heldout.play_protocol`),
    kept in the run as ``protocol.json``.

    Separate from the search so a batch can search every game first and spend what time is left on
    the slower LLM protocol."""
    return play_protocol(run, code, play_model, cfg.env, cfg.mode, cfg.heldout_seeds, protocol,
                         runtime_factory or sandbox_runtime_factory(cfg.call_timeout_s), env_factory=env_factory,
                         on_phase=on_phase)


def best_code(run: Any) -> tuple[str, dict[str, Any]]:
    """The best harness of a finished (or interrupted) run and its provenance, for export."""
    state = run.load_checkpoint("autoharness")
    report = run.read_json("report.json") or {}
    engine_best = ((report.get("engine") or {}).get("best") or {}).get("id")
    if engine_best:  # a synthesis on the engine (``--engine``): the best candidate of its archive
        from ratchet.evolve.archive import Archive

        code, candidate_id, score = Archive(run).get(engine_best).files["harness.py"], engine_best, report["search"]["best_h"]
    elif state and state.get("tree"):
        best = max(state["tree"], key=lambda n: n["h"])
        code, candidate_id, score = state["codes"][best["candidate_id"]], best["candidate_id"], best["h"]
    else:
        raise RatchetError(f"run {run.id} has no evaluated harness yet", hint="let the search run, or resume it with --resume")
    record = run.read_json("run.json") or {}
    config = record.get("config") or {}
    provenance = {
        "env": config.get("env"), "mode": config.get("mode"), "method": config.get("method"), "score": score,
        "run_id": run.id, "candidate_id": candidate_id, "model": config.get("model"),
        "heldout_legal_rate": (report.get("after") or {}).get("legal_rate"),
        "adoption": verdict_of(report) if report else "unchecked",
    }
    return code, provenance

