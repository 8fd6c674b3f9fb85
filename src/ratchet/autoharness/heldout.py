"""The legality suite's report stage: what a harness does for the model on seeds the search never saw.

The search score ``h`` is measured on the search seeds with the harness alone; what a user gets is
the model *with* the harness on other seeds. After the engine's final report,
:class:`~ratchet.autoharness.legality.LegalitySuite` runs :func:`run_stage` on the best candidate:

1. the code-alone held-out check (:func:`ratchet.envs.harness.protocol.code_heldout`);
2. the held-out protocol with the play model (:func:`ratchet.envs.harness.protocol.play_protocol`,
   the model with and without the harness on the same held-out seeds and games), when a
   :class:`ProtocolConfig` is given;
3. the adoption verdict (:func:`judge`) on the protocol's two sides, with the engine gate's own
   statistics (:func:`ratchet.evolve.gate.not_worse`, the gate's paired test);
4. the harness library (``library_dir``, or ``ctx.extra["harness_library"]``) keeps the harness
   unless the verdict rejects it (with ``adoption.gate``).

A harness that played no held-in game legally (best h = 0) is not worth the held-out time: nothing
runs and the verdict is ``unchecked``. Each finished part is written to the run (``STAGE``) as it
finishes, keyed by the candidate, so a run killed during the stage resumes into it and redoes
neither the search nor a finished part.

The verdict's rules (a verifier that is wrong in a way the search did not catch rejects legal
moves and its fallback then plays an illegal one, so the model with the harness can do worse than
the model alone; measured: LightsOut 0.9 -> 0.0 legal rate with the 1.5B):

- ``rejected``: worse with the harness, on the legal rate seed by seed or the reward game by game
  (less the margins), at one-sided p < ``alpha``; with so few pairs that no outcome could reach
  p < ``alpha``, or sides stored without per-seed numbers, any drop of the point estimates beyond
  the margin rejects;
- ``adopted``: no measure shows it worse (the p-values of it being *better* are kept beside);
- ``unchecked``: the protocol did not run (``--protocol none``, or a batch out of time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import Field

from ratchet.autoharness.config import AdoptionConfig
from ratchet.autoharness.library import HarnessLibrary
from ratchet.envs.harness.protocol import ProtocolConfig, code_heldout, play_protocol, protocol_sides
from ratchet.envs.harness.runtime import RuntimeFactory
from ratchet.config import Settings
from ratchet.contracts import Candidate, Model, RatchetError
from ratchet.envs.registry import env_factory_for
from ratchet.evolve.archive import Archive
from ratchet.evolve.gate import not_worse
from ratchet.evolve.report import StageReport

Verdict = Literal["adopted", "rejected", "unchecked"]

#: Where the stage keeps what it finished (the code-alone check, the protocol) for a resumed run.
STAGE = "evolve/heldout_stage.json"

#: Each measure: the side's point estimate, its paired values, its label, its margin's config field, its unit.
MEASURES = (("legal_rate", "legal_per_seed", "legal rate", "legal_margin", "seed"),
            ("reward", "reward_per_game", "reward", "reward_margin", "game"))


class HeldoutOptions(Settings):
    """The held-out stage of a legality run (the ``heldout`` option of the legality suite)."""

    seeds: list[int] = Field(min_length=1)
    """Held-out env seeds (``ratchet autoharness``'s ``heldout_seeds``): the protocol's, and the
    code-alone check's first ``alone_seeds`` of them."""
    alone_seeds: int = Field(default=5, ge=1)
    """Held-out seeds the code alone plays."""
    alone_steps: int = Field(default=200, ge=1)
    """Most steps of the code alone per seed."""
    max_seconds: float | None = None
    """Most seconds of the code-alone check (``heldout_seconds``); None: no limit."""
    protocol: ProtocolConfig | None = None
    """The held-out protocol with the play model; None (``--protocol none``): not run, the verdict
    is ``unchecked``."""
    adoption: AdoptionConfig = Field(default_factory=AdoptionConfig)
    """When a harness counts as doing no harm, and whether a rejected one is kept out of the library."""
    library_dir: str | None = None
    """The harness library the verdict's harness is kept in (``ctx.extra["harness_library"]``, a
    batch's copy, stands in for it); None with no such extra: no library is written."""
    method: str = "ratchet"
    """The run's method, recorded with the harness in the library."""


def judge(before: dict[str, Any] | None, after: dict[str, Any] | None, config: AdoptionConfig | None = None) -> dict[str, Any]:
    """The verdict on one harness from the protocol's ``before``/``after`` sides of a report (the
    module's rules), each measure judged by :func:`ratchet.evolve.gate.not_worse`."""
    config = config or AdoptionConfig()
    if not before or not after:
        return {"verdict": "unchecked", "reasons": ["the held-out before/after check did not run"]}
    reasons, tests = [], {}
    for key, paired, label, margin_field, unit in MEASURES:
        b, a = before.get(key), after.get(key)
        found = not_worse(b, a, before.get(paired), after.get(paired), margin=getattr(config, margin_field),
                          alpha=config.alpha, test=config.test)
        if found["record"] is not None:
            tests[key] = found["record"]
        if not found["worse"]:
            continue
        n = found["n"]
        if found["basis"] == "test":
            reasons.append(f"{label} {_f(b)} without the harness, {_f(a)} with it: worse over {n} paired "
                           f"{unit}s at p = {found['worse_p']:.3g} < {config.alpha}")
        elif found["basis"] == "too few pairs":
            reasons.append(f"{label} {b:.2f} without the harness, {a:.2f} with it (point estimates: "
                           f"{n} paired {unit}s are too few for the test)")
        else:
            reasons.append(f"{label} {b:.2f} without the harness, {a:.2f} with it (point estimates: no per-{unit} numbers)")
    verdict: Verdict = "rejected" if reasons else "adopted"
    return {"verdict": verdict,
            "reasons": reasons or ["no loss on the held-out seeds" + (
                f" (the paired test: not worse at p < {config.alpha})" if any(t["test"] == config.test for t in tests.values()) else "")],
            "legal_delta": _delta(before, after, "legal_rate"), "reward_delta": _delta(before, after, "reward"),
            "tests": tests, "alpha": config.alpha}


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _delta(before: dict[str, Any], after: dict[str, Any], key: str) -> float | None:
    if before.get(key) is None or after.get(key) is None:
        return None
    return round(after[key] - before[key], 4)


def verdict_of(report: dict[str, Any] | None) -> Verdict:
    """A stored report's verdict; reports written before the verdict was kept are judged from their sides."""
    report = report or {}
    return (report.get("adoption") or judge(report.get("before"), report.get("after")))["verdict"]


def keep_in_library(library: HarnessLibrary, verdict: dict[str, Any], env: str, mode: str, code: str | None,
                    score: float, *, gate: bool, run_id: str, candidate_id: str | None, model: str | None,
                    method: str) -> str:
    """The library follows the verdict: a harness with h > 0 is kept unless ``gate`` is on and the
    verdict rejects it, when one this run put there earlier is withdrawn. Says which it did."""
    if not code or score <= 0:
        return "not kept: the harness played no held-in game legally"
    if verdict["verdict"] == "rejected" and gate:
        library.withdraw(env, mode, run_id=run_id)
        return "withdrawn: rejected"
    kept = library.add(env, mode, code, score, run_id=run_id, candidate_id=candidate_id, model=model, method=method,
                       adoption=verdict["verdict"])
    return "kept" if kept else "not kept: the library holds a better harness"


def run_stage(options: HeldoutOptions, *, game: str, mode: str, step_cap: int, best: Candidate, run: Any,
              play_model: Model | None, runtime_factory: RuntimeFactory, library: HarnessLibrary | None = None,
              model_name: str | None = None, on_phase: Callable[[str], None] | None = None) -> StageReport:
    """The held-out stage on ``best`` (the module's steps 1-4); what it found, as the engine's report keeps it."""
    started = time.perf_counter()
    note = on_phase or (lambda phase: None)
    code = best.files.get("harness.py")
    best_h = Archive(run).score(best.id, "heldin") or 0.0
    kept = run.read_json(STAGE) or {}
    state: dict[str, Any] = kept if kept.get("candidate") == best.id else {"candidate": best.id}
    if code and best_h > 0:  # a harness that played no held-in game legally is not worth the held-out time
        if "alone" not in state:
            note("held-out check of the code alone")
            state["alone"] = code_heldout(code, env_factory_for(game), runtime_factory, options.seeds[:options.alone_seeds],
                                          steps=options.alone_steps, step_cap=step_cap,
                                          hint_env_factory=env_factory_for(game, hints=True), max_seconds=options.max_seconds)
            run.write_json(STAGE, state)
        if options.protocol is not None and "protocol" not in state:
            if play_model is None:
                raise RatchetError("the legality suite's heldout.protocol needs a model to play with, and the run has none",
                                   hint="set the run's model, or drop suite.options.heldout.protocol")
            state["protocol"] = play_protocol(run, code, play_model, game, mode, options.seeds, options.protocol,
                                              runtime_factory, on_phase=note)
            run.write_json(STAGE, state)
    sides = protocol_sides(state.get("protocol"))
    verdict = judge(sides["before"], sides["after"], options.adoption)
    library = library if library is not None else (HarnessLibrary(options.library_dir) if options.library_dir else None)
    in_library = None
    if library is not None:
        in_library = keep_in_library(library, verdict, game, mode, code, best_h, gate=options.adoption.gate, run_id=run.id,
                                     candidate_id=best.id, model=model_name, method=options.method)
    detail = {"candidate": best.id, "best_h": best_h, "harness_alone": state.get("alone"), **sides,
              "players": (state.get("protocol") or {}).get("players"), "adoption": verdict, "library": in_library,
              "wall_s": round(time.perf_counter() - started, 1)}
    return StageReport("heldout", f"adoption {verdict['verdict']}: {'; '.join(verdict['reasons'])}", detail)


def stage_of(report: Mapping[str, Any] | None) -> dict[str, Any]:
    """The held-out stage's record in an engine report (empty when the stage did not run)."""
    found = (report or {}).get("suite_report") or {}
    return (found.get("detail") or {}) if found.get("name") == "heldout" else {}
