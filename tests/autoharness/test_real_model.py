"""The real embedded model writes a TicTacToe verifier on the engine (runs in CI; a few minutes on one core).

Budget: at most 24 refiner calls of Qwen2.5-Coder-0.5B (the ``ratchet`` method: labelled
transitions as unit tests, the helper library, the one-function request with examples from real
states, 4 samples per refinement). Measured here: about one sample in five of the root request is
a correct general function, so a handful of samples judged on the harvested states finds one.
Held-out check, reduced from the paper's protocol (10 seeds × 1,000 steps with the
LLM playing) so that CI stays short: the harness alone plays 5 held-out seeds × 200 steps
(propose → its own check → the real env; every env rejection counts), and its
``is_legal_action`` must label every transition harvested from those held-out seeds right.
The same model with best-of-20 sampling reached a legal-step rate of 0.01 on this game.
"""

from __future__ import annotations

import pytest

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.envs import env_factory_for
from ratchet.envs.harness.protocol import code_heldout
from ratchet.envs.harness.runtime import sandbox_runtime_factory
from ratchet.autoharness.engine import game_description, run_on_engine
from ratchet.evolve.archive import Archive

MODEL = "qwen2.5-coder-0.5b"


def _model_or_skip():
    from ratchet.models import load_model, model_path

    try:
        path = model_path(MODEL)
    except Exception as exc:  # not pulled
        pytest.skip(f"{MODEL} is not in the model cache ({exc}); run `ratchet models pull {MODEL}`")
    if not path.exists():
        pytest.skip(f"{MODEL} is not in the model cache; run `ratchet models pull {MODEL}`")
    # One thread: a real-model test keeps to one core, so a plain `pytest` beside another model job
    # does not oversubscribe the cores (two jobs on two threads each ran ~8x slower).
    return load_model(f"local:{MODEL}", n_threads=1)


@pytest.mark.real_model
@pytest.mark.timeout(1500)
def test_small_model_synthesizes_a_perfect_tictactoe_verifier(tmp_path):
    from ratchet.store import RunStore

    model = _model_or_skip()
    cfg = AutoHarnessConfig(env="TicTacToe-v0", mode="verifier", method="ratchet", model=f"local:{MODEL}",
                            iterations=8, eval_steps=50, search_seeds=list(range(10)),
                            heldout_seeds=list(range(1000, 1005)),
                            library_dir=str(tmp_path / "library"))  # empty: no harness of an earlier run to start from
    cfg.ideas.samples_per_step = 4
    cfg.ideas.induce = False  # the model is what this test is about: rules fitted to the listed states solve Tic Tac Toe before any call
    cfg.budget.max_calls = 24
    run = RunStore(tmp_path).create_run("autoharness", cfg.model_dump(), "ci-real-model")
    env_factory = env_factory_for(cfg.env)
    runtime_factory = sandbox_runtime_factory(cfg.call_timeout_s)
    hints = env_factory_for(cfg.env, hints=True)  # only to label transitions; the harness never sees hints
    summary = run_on_engine(cfg, model, run, description=game_description(cfg.env))
    calls = summary.get("model_calls", 0)
    assert calls <= 24
    best = (summary.get("report") or {}).get("best") or {}
    archive = Archive(run)
    best_code = archive.get(best["id"]).files.get("harness.py") if best else None
    assert best_code, f"no harness evaluated: {summary['state']}"
    best_h = archive.score(best["id"], "heldin")
    held = code_heldout(best_code, env_factory, runtime_factory, cfg.heldout_seeds, steps=200, hint_env_factory=hints)
    print(f"\nengine h={best_h:.3f} calls={calls} tokens={run.llm_totals().get('total_tokens')} held-out={held}")
    assert best_h == 1.0, best_code
    assert held["legal_rate"] == 1.0 and held["steps"] == 1000, held
    assert held["verifier_accuracy"] == 1.0 and held["transitions"] > 50, held
