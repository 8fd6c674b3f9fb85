"""Garbage from the refiner: each kind becomes feedback for the next request or a counted failed
candidate, never a crashed run. The harness code runs in the real sandbox."""

from __future__ import annotations

import json

import pytest
from fakes import GOOD, FakeTicTacToe, fenced

import ratchet.autoharness.pipeline as pipeline
from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.library import HarnessLibrary
from ratchet.autoharness.pipeline import synthesize_game
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

SEVERAL = fenced("print('scratch work')") + "\nand then the harness:\n" + fenced(GOOD)
GARBAGE = {
    "no_code_block": "Move to the centre when it is free, otherwise take a corner.",
    "refusal": "I'm sorry, but I can't help with writing that code.",
    "syntax_error": fenced("def propose_action(board)\n    return '[4]'\n\ndef is_legal_action(board, action):\n    return True\n"),
    "wrong_function_names": fenced("def propose(board):\n    return '[4]'\n\ndef legal(board, action):\n    return True\n"),
    "endless_output": "```python\n" + "def propose_action(board):\n    x = [" + "1, " * 200_000,
    "non_utf8_replaced": fenced("def propose_action(board):\n    return '[\ufffd\ufffd]'\n\ndef is_legal_action(board, action):\n"
                                "    return action != '\ufffd'\n"),
    "non_utf8_surrogates": fenced("def propose_action(board):\n    return '[\udcff\udcfe]'  # \udc80\n\n"
                                  "def is_legal_action(board, action):\n    return True\n"),
    "several_blocks": SEVERAL,
}
#: What the run must make of each kind: a candidate stored as failed with no code in it ("no code"),
#: a candidate whose error text reaches the next request ("feedback", with a word of that text), or
#: a candidate built from the code the reply does hold ("used").
EXPECTED = {
    "no_code_block": ("no code", None),
    "refusal": ("no code", None),
    "endless_output": ("feedback", "SyntaxError"),  # cut at max_new_tokens inside its first function
    "syntax_error": ("feedback", "SyntaxError"),
    "wrong_function_names": ("feedback", "missing function(s): propose_action, is_legal_action"),
    "non_utf8_replaced": ("used", None),
    "non_utf8_surrogates": ("used", None),
    "several_blocks": ("used", None),  # the block that defines functions, not the scratch one
}


def _search(tmp_path, first_reply: str):
    """A short search whose first refiner reply is ``first_reply``; the others are a correct harness."""
    replies = iter([first_reply])

    def respond(messages):
        return next(replies, fenced(GOOD))

    model = ScriptedModel(respond)
    store = RunStore(tmp_path / "runs")
    cfg = AutoHarnessConfig(method="faithful", iterations=3, eval_envs=1, eval_steps=10, search_seeds=[0],
                            heldout_seeds=[9], max_new_tokens=400, library_dir=str(tmp_path / "lib"))
    run = store.create_run("autoharness", cfg.model_dump(), "garbage")
    report = synthesize_game(cfg, model, run, env_factory=lambda: FakeTicTacToe(), library=HarnessLibrary(tmp_path / "lib"))
    return report, run, store, model


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_reply_becomes_feedback_or_a_counted_failure(tmp_path, kind):
    report, run, store, model = _search(tmp_path, GARBAGE[kind])
    assert store.open_run(run.id).read_json("status.json")["status"] == "done"  # the run finished
    assert report["search"]["best_h"] == 1.0  # and went on to the good harness after the garbage
    rows = store.index.query("SELECT id, status, score FROM candidates WHERE run_id = ? ORDER BY created_at", (run.id,))
    first = dict(rows[0])
    expected, words = EXPECTED[kind]
    if expected == "no code":
        assert first["status"] == "failed"  # counted, with the reason kept beside it
        meta = store.open_run(run.id).read_json(f"candidates/{first['id']}/meta.json")
        assert "no code in the response" in json.dumps(meta)
    elif expected == "feedback":
        assert first["status"] in ("failed", "evaluated") and first["score"] == 0.0
        assert words in model.calls[1]["messages"][-1]["content"]  # the refiner is told what went wrong
    else:
        assert first["status"] == "evaluated" and first["score"] is not None
    if kind == "endless_output":
        kept = store.open_run(run.id).read_json(f"candidates/{first['id']}/meta.json")["meta"]["response"]
        assert len(kept) < 10 * 4 * 400  # cut near max_new_tokens, not the 600 kB the endpoint sent


def test_a_search_that_finds_nothing_skips_the_held_out_check(tmp_path, monkeypatch):
    def no_held_out(*args, **kwargs):
        raise AssertionError("the held-out check ran on a harness with h = 0")

    monkeypatch.setattr(pipeline, "code_heldout", no_held_out)
    broken = fenced("def propose_action(board):\n    raise ValueError('no idea')\n\n"
                    "def is_legal_action(board, action):\n    raise ValueError('no idea')\n")
    store = RunStore(tmp_path / "runs")
    cfg = AutoHarnessConfig(method="faithful", iterations=2, eval_envs=1, eval_steps=10, search_seeds=[0],
                            heldout_seeds=[9], library_dir=str(tmp_path / "lib"))
    run = store.create_run("autoharness", cfg.model_dump(), "nothing")
    report = synthesize_game(cfg, ScriptedModel([broken], cycle=True), run, env_factory=lambda: FakeTicTacToe(),
                             library=HarnessLibrary(tmp_path / "lib"))
    assert report["search"]["best_h"] == 0.0
    assert report["harness_alone"] is None and "best h is 0" in report["harness_alone_skipped"]
