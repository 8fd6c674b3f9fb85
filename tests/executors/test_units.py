"""Model calls inside a unit of work are journaled by unit and index: a rerun of the unit (a retry
after a lost worker, a resume after a killed driver) is given its replies back instead of paying
for them again, and pays only for what no earlier attempt got."""

from __future__ import annotations

import threading
import time

from ratchet.evolve.cache import REPLIES, JournaledModel
from ratchet.executors.units import ScopedModel, unit_scope
from ratchet.models import ScriptedModel
from ratchet.models.budget import AccountedModel, Accountant
from ratchet.models.request import context_window
from ratchet.store import RunStore


def _ask(model: ScopedModel, *prompts: str) -> list[str]:
    return [model.complete([{"role": "user", "content": p}], max_tokens=8, seed=1).text for p in prompts]


def _journal(run, inner: ScriptedModel) -> tuple[JournaledModel, Accountant]:
    accountant = Accountant()
    return JournaledModel(AccountedModel(inner, accountant), run), accountant


def test_a_rerun_unit_replays_what_an_earlier_attempt_was_given_and_pays_only_for_the_rest(tmp_path) -> None:
    run = RunStore(tmp_path).create_run("evolve", {})
    inner = ScriptedModel(lambda messages: "re: " + messages[-1]["content"])
    journal, accountant = _journal(run, inner)
    model = ScopedModel(journal)
    with unit_scope("u1"):
        first = _ask(model, "a", "b")  # an attempt whose worker then died
    with unit_scope("u1"):
        again = _ask(model, "a", "b", "c")  # the retry: the same two calls, then one more
    assert again[:2] == first and again[2] == "re: c"
    assert len(inner.calls) == accountant.snapshot()["calls"] == 3 and journal.replayed == 2
    with unit_scope("u2"):  # another unit asking the same is another call, paid
        _ask(model, "a")
    assert len(inner.calls) == 4

    # The driver killed and started again: a unit rerun after the resume replays from the file.
    resumed, accountant = _journal(run, inner)
    with unit_scope("u1"):
        assert _ask(ScopedModel(resumed), "a", "b", "c") == again
    assert accountant.snapshot()["calls"] == 0 and resumed.replayed == 3
    records = run.read_jsonl(REPLIES)
    slots = [(r["unit"], r["index"]) for r in records]
    assert slots == [("u1", 0), ("u1", 1), ("u1", 2), ("u2", 0)]  # each reply journaled once

    # A unit whose call at an index differs from the journaled one (not deterministic) pays for it.
    with unit_scope("u1"):
        assert _ask(ScopedModel(resumed), "a", "other") == ["re: a", "re: other"]
    assert accountant.snapshot()["calls"] == 1


def test_calls_outside_units_keep_the_step_journal_and_are_not_given_to_units(tmp_path) -> None:
    run = RunStore(tmp_path).create_run("evolve", {})
    inner = ScriptedModel(lambda messages: "re: " + messages[-1]["content"])
    journal, _ = _journal(run, inner)
    _ask(ScopedModel(journal), "a")  # outside any unit: a proposer's call
    with unit_scope("u1"):
        _ask(ScopedModel(journal), "a")
    resumed, accountant = _journal(run, inner)
    assert resumed.resume(0) == 1  # only the call outside units replays by request
    assert _ask(ScopedModel(resumed), "a", "a") == ["re: a", "re: a"]
    assert accountant.snapshot()["calls"] == 1 and resumed.replayed == 1


def test_two_attempts_of_one_unit_asking_at_once_pay_once(tmp_path) -> None:
    run = RunStore(tmp_path).create_run("evolve", {})

    def slow(messages) -> str:
        time.sleep(0.2)
        return "x"

    inner = ScriptedModel(slow)
    journal, accountant = _journal(run, inner)
    replies: list[str] = []

    def attempt() -> None:
        with unit_scope("u1"):
            replies.extend(_ask(ScopedModel(journal), "a"))

    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert replies == ["x", "x"] and accountant.snapshot()["calls"] == 1 and journal.replayed == 1
    assert len(run.read_jsonl(REPLIES)) == 1


def test_the_model_behind_the_unit_numbering_still_shows_its_context_window(tmp_path) -> None:
    """An agent evaluated in the engine's process asks a ScopedModel: its context policy must still
    find the embedded model's window (and tokenizer) to fit its prompt to."""
    class Windowed(ScriptedModel):
        context_tokens = 4096

        def count_tokens(self, messages) -> int:
            return 7 * len(messages)

    inner = Windowed(lambda messages: "ok")
    journal, _ = _journal(RunStore(tmp_path).create_run("evolve", {}), inner)
    assert context_window(ScopedModel(journal)) is inner
    assert context_window(ScopedModel(_journal(RunStore(tmp_path / "b").create_run("evolve", {}), ScriptedModel(["x"]))[0])) is None
