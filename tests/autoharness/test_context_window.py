"""A refiner request cut to the model's context window. Measured: the 1.5B (4,096 tokens) failed a
64-cell board game with "Requested tokens (4876) exceed context window": its whole-harness
refinement shows failed steps, example boards and the helper library's output on a board, each a
board long. The refiner's proposer on the engine gives up the least needed parts first until the
request and its reply fit, and says plainly when even the shortest request does not
(test_engine_ideas.py); it finds the window behind the wrappers the engine puts around a model."""

from __future__ import annotations

from windowed import SmallWindow

from ratchet.models import AccountedModel, Accountant, BudgetConfig, ScriptedModel
from ratchet.models.request import context_window


def test_the_window_is_found_behind_wrappers_and_absent_for_a_model_that_does_not_say():
    model = SmallWindow([], 1000)
    assert context_window(AccountedModel(model, Accountant(BudgetConfig()))) is model
    assert context_window(ScriptedModel([])) is None
