"""The reply journal a resumed run replays its model's replies from (``models.journal``): only the
replies recorded after the checkpoint, and only for the very request that was made. (A run on the
engine killed and resumed: test_engine_chaos.py.)"""

from __future__ import annotations

from ratchet.models import ScriptedModel
from ratchet.models.journal import JournaledModel, request_key
from ratchet.store import RunStore

REPLIES = "replies.jsonl"


def test_journal_replays_only_replies_recorded_after_the_checkpoint(tmp_path):
    run = RunStore(tmp_path).create_run("autoharness", {}, "journal")
    model = ScriptedModel(["first", "second", "third"])
    journal = JournaledModel(model, run, REPLIES)
    messages = [{"role": "user", "content": "write the harness"}]
    assert journal.complete(messages, temperature=0.2, seed=7).text == "first"
    assert journal.complete(messages, temperature=0.7, seed=8).text == "second"

    again = JournaledModel(model, run, REPLIES)
    assert again.resume(1) == 1  # call 0 came before the checkpoint; only call 1 is replayable
    # A request that differs in any parameter is not the one recorded: it goes to the model.
    assert again.complete(messages, temperature=0.7, seed=9).text == "third"
    assert again.complete(messages, temperature=0.7, seed=8).text == "second"
    assert again.replayed == 1 and len(model.calls) == 3
    assert request_key("a", messages, {"seed": 1}) != request_key("b", messages, {"seed": 1})
