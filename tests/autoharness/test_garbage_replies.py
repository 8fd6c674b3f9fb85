"""Garbage from the refiner on the engine: each kind becomes a step that proposed nothing with its
reason recorded, or a judged candidate, never a crashed run. The harness code runs in the real sandbox."""

from __future__ import annotations

import json

import pytest
from fakes import GOOD, fenced

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import synthesize_on_engine
from ratchet.autoharness.library import HarnessLibrary
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
#: What the run on the engine must make of each kind: a step that proposed nothing, with the
#: reason in its event ("no proposal", with a word of the reason), a candidate whose evaluation
#: holds the error ("failure", with a word of it), or a candidate built from the code the reply does
#: hold ("used").
EXPECTED = {
    "no_code_block": ("no proposal", "no code in the reply"),
    "refusal": ("no proposal", "no code in the reply"),
    "endless_output": ("no proposal", "SyntaxError"),  # cut at max_new_tokens inside its first function
    "syntax_error": ("no proposal", "SyntaxError"),
    "wrong_function_names": ("failure", "missing function(s): propose_action, is_legal_action"),
    "non_utf8_replaced": ("used", None),
    "non_utf8_surrogates": ("used", None),
    "several_blocks": ("used", None),  # the block that defines functions, not the scratch one
}
#: The kinds whose error the next request shows the refiner (``critic.PreviousReply``).
TOLD = ["endless_output", "syntax_error", "wrong_function_names"]


def _search(tmp_path, first_reply: str, iterations: int = 3):
    """A short search on the engine whose first refiner reply is ``first_reply``; the others are a
    correct harness. Twelve search seeds leave the gate six held-in games."""
    replies = iter([first_reply])

    def respond(messages):
        return next(replies, fenced(GOOD))

    model = ScriptedModel(respond)
    store = RunStore(tmp_path / "runs")
    cfg = AutoHarnessConfig(env="TicTacToe-v0", model="scripted:", method="faithful", iterations=iterations, eval_steps=10,
                            search_seeds=list(range(12)), heldout_seeds=[100], max_new_tokens=400,
                            library_dir=str(tmp_path / "lib"))
    run = store.create_run("autoharness", cfg.model_dump(), "garbage")
    report = synthesize_on_engine(cfg, model, run, description="Tic Tac Toe", library=HarnessLibrary(tmp_path / "lib"))
    return report, run, store, model


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_reply_becomes_a_recorded_reason_or_a_judged_candidate(tmp_path, kind):
    report, run, store, model = _search(tmp_path, GARBAGE[kind])
    assert report["search"]["stop_reason"] == "done"  # the run finished
    assert report["search"]["best_h"] == 1.0  # and went on to the good harness after the garbage
    [first, *_] = [e for e in run.read_jsonl("evolve/events.jsonl") if e.get("kind") == "step"]
    expected, words = EXPECTED[kind]
    if expected == "no proposal":
        assert first["status"] == "no_proposal" and "child" not in first and words in first["reason"]
        assert first["model_calls"] == 1  # counted against the budget
    elif expected == "failure":
        failures = json.dumps([e["failures"] for e in run.evaluations(first["child"])])
        assert first["status"] == "rejected" and words in failures
        assert dict(store.index.query("SELECT score FROM candidates WHERE id = ?", (first["child"],))[0])["score"] == 0.0
    else:
        assert first["child"] and dict(store.index.query(
            "SELECT score FROM candidates WHERE id = ?", (first["child"],))[0])["score"] is not None


@pytest.mark.parametrize("kind", TOLD)
def test_the_refiner_is_told_what_was_wrong_with_its_reply(tmp_path, kind):
    _, _, _, model = _search(tmp_path, GARBAGE[kind], iterations=2)
    assert EXPECTED[kind][1] in model.calls[1]["messages"][-1]["content"]


def test_a_search_that_finds_nothing_skips_the_held_out_check(tmp_path, monkeypatch):
    from ratchet.autoharness import engine, heldout

    def no_held_out(*args, **kwargs):
        raise AssertionError("the held-out check ran on a harness with h = 0")

    broken = ("def propose_action(board):\n    raise ValueError('no idea')\n\n"
              "def is_legal_action(board, action):\n    raise ValueError('no idea')\n")
    monkeypatch.setattr(heldout, "code_heldout", no_held_out)  # the report stage's
    monkeypatch.setattr(engine, "starting_harness", lambda cfg, library=None: broken)  # a start that plays no move
    store = RunStore(tmp_path / "runs")
    cfg = AutoHarnessConfig(env="TicTacToe-v0", model="scripted:", method="faithful", iterations=2, eval_steps=10,
                            search_seeds=list(range(12)), heldout_seeds=[100], library_dir=str(tmp_path / "lib"))
    run = store.create_run("autoharness", cfg.model_dump(), "nothing")
    report = engine.synthesize_on_engine(cfg, ScriptedModel([fenced(broken)], cycle=True), run, description="Tic Tac Toe",
                                         library=HarnessLibrary(tmp_path / "lib"))
    assert report["search"]["best_h"] == 0.0 and report["search"]["llm_calls"] == 2
    assert report["harness_alone"] is None and report["before"] is None
    assert HarnessLibrary(tmp_path / "lib").lookup("TicTacToe-v0", "verifier") == []  # nothing kept
