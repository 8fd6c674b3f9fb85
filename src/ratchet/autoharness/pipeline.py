"""What one game's synthesis needs around the engine (``engine.py``): create or resume its run,
account its model calls, refuse a run of the removed dedicated search, the best harness for export.
The held-out protocol, the adoption verdict and the library are :mod:`ratchet.autoharness.heldout`'s."""

from __future__ import annotations

from typing import Any

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.heldout import verdict_of
from ratchet.contracts import Model, RatchetError
from ratchet.models import AccountedModel, Accountant, BudgetConfig

RUN_KIND = "autoharness"


def accounted(model: Model, run: Any, purpose: str = "autoharness.refine") -> AccountedModel:
    """Every call (the refiner's; with ``purpose="autoharness.heldout"`` the held-out games') goes
    through one accountant that logs it in ``run``'s store. The engine enforces the search's
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


#: The checkpoint the dedicated search (removed) wrote into every run it started.
SEARCH_CHECKPOINT = "autoharness"


def refuse_search_run(run: Any) -> None:
    """Raise a clear error for a run the dedicated search started: it cannot be carried on, since
    the engine is the one search now (its harness can still be exported)."""
    try:
        started_by_search = bool(run.load_checkpoint(SEARCH_CHECKPOINT))
    except (FileNotFoundError, KeyError):
        started_by_search = False
    if started_by_search:
        raise RatchetError(
            f"run {run.id} was started by the dedicated search, which was removed (the engine is the one search); "
            "it cannot be resumed",
            hint=f"start a new run with the same settings (without --resume); its best harness can still be "
                 f"exported: ratchet autoharness export {run.id} -o harness.py",
        )


def best_code(run: Any) -> tuple[str, dict[str, Any]]:
    """The best harness of a finished (or interrupted) run and its provenance, for export."""
    state = run.load_checkpoint(SEARCH_CHECKPOINT)
    report = run.read_json("report.json") or {}
    engine_best = ((report.get("engine") or {}).get("best") or {}).get("id")
    if engine_best:  # the best candidate of the engine's archive
        from ratchet.evolve.archive import Archive

        code, candidate_id, score = Archive(run).get(engine_best).files["harness.py"], engine_best, report["search"]["best_h"]
    elif state and state.get("tree"):  # a run of the dedicated search (removed): its tree's best node
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

