"""One search of a curriculum: AutoHarness on the engine for one game, one search seed, one weight
version, in its own run of the store; and what the curriculum reads from it.

A search started is recorded (its run id) before it runs, so a killed curriculum resumes that run
where the engine stopped (:func:`run_search` with ``run_id``) and a finished one is only read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import synthesize_on_engine
from ratchet.autoharness.pipeline import open_or_create
from ratchet.contracts import Model
from ratchet.evolve.report_tables import step_events


class SearchModels(Protocol):
    """The model a search of weight version ``version`` asks (``local:NAME@vN`` of the curriculum's
    version store; a test's scripted model per version)."""

    def spec(self, version: int) -> str:
        """The spec the search's run records (what ``verdicts.run_version`` reads)."""
        ...

    def __call__(self, version: int) -> Model: ...


class VersionedModels:
    """``local:NAME@vN`` of the curriculum's version store, one loaded at a time (a search of the
    next version frees the last one's weights)."""

    def __init__(self, base: str, versions: Path, threads: int | None = None) -> None:
        self.base, self.versions, self.threads = base, versions, threads
        self._loaded: tuple[int, Model] | None = None

    def spec(self, version: int) -> str:
        return f"local:{self.base}@v{version}"

    def __call__(self, version: int) -> Model:
        if self._loaded is None or self._loaded[0] != version:
            from ratchet.models import load_model

            self._loaded = None  # the last version's weights go before the next load
            self._loaded = (version, load_model(self.spec(version), versions=self.versions, threads=self.threads))
        return self._loaded[1]


def search_config(template: AutoHarnessConfig, game: str, seed: int, spec: str, library: Path,
                  hidden: Sequence[str] = ()) -> AutoHarnessConfig:
    """``template`` for one search: its game, seed and model; the rules fitted without a model and
    the library seed off (the model's own code is measured), a library of the curriculum's own;
    ``hidden``: the failure types its refiner is not shown (``hide_failure_types``)."""
    data = template.model_dump()
    data.update(env=game, rng_seed=seed, model=spec, library_dir=str(library), hide_failure_types=list(hidden))
    data["ideas"] = {**data.get("ideas", {}), "induce": False, "library_seed": False}
    return AutoHarnessConfig.model_validate(data)


def calls_to_solve(run: Any) -> int | None:
    """The model calls the search spent until its best harness first reached h = 1.0 (None: never)."""
    calls = 0
    for event in step_events(run):
        calls += int(event.get("model_calls") or 0)
        if float(event.get("best") or 0.0) >= 1.0:
            return calls
    return None


def result_of(run: Any, report: dict[str, Any]) -> dict[str, Any]:
    """What the curriculum keeps of a finished search: best h, solved (h = 1.0), calls, calls to solve."""
    search = report.get("search") or {}
    best = float(search.get("best_h") or 0.0)
    return {"run_id": run.id, "best_h": round(best, 4), "solved": best >= 1.0, "calls": int(search.get("llm_calls") or 0),
            "calls_to_solve": calls_to_solve(run) if best >= 1.0 else None, "wall_s": report.get("wall_s"),
            "model": report.get("model"), "stop": search.get("stop_reason")}


def run_search(store: Any, cfg: AutoHarnessConfig, model: Callable[[], Model], *, run_id: str | None, name: str,
               started: Callable[[str], None], runtime_factory: Any = None) -> dict[str, Any]:
    """Run (or resume, ``run_id``) one search and return :func:`result_of`. ``started`` hears the
    new run's id before the search begins; ``model`` is asked only when there is a search to run."""
    if run_id is not None:
        run = store.open_run(run_id)
        report = run.read_json("report.json")
        if report:  # finished before the curriculum recorded it
            return result_of(run, report)
    run, cfg = open_or_create(store, cfg, run_id, name)
    if run_id is None:
        started(run.id)
    with run.marks_failure():
        report = synthesize_on_engine(cfg, model(), run, protocol=None, runtime_factory=runtime_factory)
    return result_of(run, report)
