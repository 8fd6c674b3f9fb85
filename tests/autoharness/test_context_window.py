"""A refiner request cut to the model's context window. Measured: the 1.5B (4,096 tokens) failed a
64-cell board game with "Requested tokens (4876) exceed context window": its whole-harness
refinement shows failed steps, example boards and the helper library's output on a board, each a
board long. The search gives up the least needed parts first (``search.SHRINK``) until the request
and its reply fit, and says plainly when even the shortest request does not."""

from __future__ import annotations

import pytest
from fakes import LOOSE, RULES, FakeTicTacToe, MemoryRun, fenced

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.contracts import RatchetError
from ratchet.models import AccountedModel, Accountant, BudgetConfig, ScriptedModel
from ratchet.models.request import context_window


class SmallWindow(ScriptedModel):
    """A scripted refiner with a context window, counting 4 characters a token."""

    def __init__(self, responses, context_tokens: int) -> None:
        super().__init__(responses, cycle=True)
        self.context_tokens = context_tokens

    def count_tokens(self, messages) -> int:
        return sum(len(str(m.get("content", ""))) // 4 + 8 for m in messages)


def search(model, **kw) -> Synthesis:
    cfg = AutoHarnessConfig(method="ratchet", eval_envs=3, eval_steps=30, iterations=4, search_seeds=[0, 1, 2],
                            transitions_per_seed=30, max_new_tokens=300,
                            ideas={"samples_per_step": 1, "library_seed": False, "induce": False, "repair": False, "scaffold": False}, **kw)
    cfg.budget.max_calls = 4
    # Behind the accountant, as the pipeline wraps it: the window is found through the wrapper.
    wrapped = AccountedModel(model, Accountant(BudgetConfig()))
    return Synthesis(cfg, wrapped, MemoryRun(), lambda: FakeTicTacToe(), InProcessHarness,
                     hint_env_factory=lambda: FakeTicTacToe(hints=True), description=RULES.format(p=0))


def test_every_request_and_its_reply_fit_the_window_and_the_search_runs_its_calls():
    wide = SmallWindow([fenced(LOOSE)], 100_000)
    search(wide).run_search()
    longest = max(wide.count_tokens(c["messages"]) for c in wide.calls)
    narrow = SmallWindow([fenced(LOOSE)], longest + 300 - 150)  # the longest request no longer fits as it is
    result = search(narrow).run_search()
    assert result.calls == len(wide.calls) == 4
    assert all(narrow.count_tokens(c["messages"]) + 300 <= narrow.context_tokens for c in narrow.calls)
    # What was cut is the failed steps: the refinement still shows the code and asks for the fix.
    cut = [c["messages"][-1]["content"] for c in narrow.calls][-1]
    assert "Current code:" in cut and "Fix " in cut
    assert cut.count("Failure ") < [c["messages"][-1]["content"] for c in wide.calls][-1].count("Failure ")


def test_a_window_too_small_for_the_shortest_request_is_a_clear_error():
    with pytest.raises(RatchetError, match=r"TicTacToe-v0: the refiner's shortest request is \d+ tokens, and scripted reads 400") as err:
        search(SmallWindow([fenced(LOOSE)], 400)).run_search()
    assert "larger context window" in err.value.hint


def test_the_window_is_found_behind_wrappers_and_absent_for_a_model_that_does_not_say():
    model = SmallWindow([], 1000)
    assert context_window(AccountedModel(model, Accountant(BudgetConfig()))) is model
    assert context_window(ScriptedModel([])) is None
