from __future__ import annotations

import asyncio
import threading

import pytest

from ratchet.contracts import BudgetExceeded, LLMCall
from ratchet.models import Accountant, AccountedModel, BudgetConfig, ScriptedModel

MSGS = [{"role": "user", "content": "x" * 40}]  # 10 prompt tokens by the scripted estimate


def test_call_limit_stops_before_the_call_and_records():
    seen: list[LLMCall] = []
    accountant = Accountant(BudgetConfig(max_calls=2), on_call=seen.append)
    inner = ScriptedModel(["a" * 8], cycle=True)
    model = AccountedModel(inner, accountant, purpose="test")
    model.complete(MSGS)
    model.complete(MSGS)
    with pytest.raises(BudgetExceeded) as err:
        model.complete(MSGS)
    assert "max_calls=2" in str(err.value)
    assert len(inner.calls) == 2  # the third call never reached the model
    assert [c.purpose for c in seen] == ["test", "test"] and seen[0].prompt_tokens == 10
    snap = accountant.snapshot()
    assert snap["calls"] == 2 and snap["tokens"] == 24 and snap["remaining"]["calls"] == 0


def test_token_limit():
    accountant = Accountant(BudgetConfig(max_tokens=25))
    model = AccountedModel(ScriptedModel(["a" * 8], cycle=True), accountant)
    model.complete(MSGS)  # 12 tokens
    model.complete(MSGS)  # 24 tokens, still under 25
    model.complete(MSGS)  # 36: this call was allowed (under the limit before it), the next is not
    with pytest.raises(BudgetExceeded, match="max_tokens=25"):
        model.complete(MSGS)
    assert accountant.snapshot()["tokens"] == 36


def test_usd_limit_with_prices_by_short_name():
    config = BudgetConfig(max_usd=0.001, prices={"gpt-x": {"prompt_usd_per_1m": 20.0, "completion_usd_per_1m": 80.0}})
    seen: list[LLMCall] = []
    accountant = Accountant(config, on_call=seen.append)
    model = AccountedModel(ScriptedModel(["a" * 40], cycle=True, name="openai:gpt-x"), accountant)
    calls = 0
    with pytest.raises(BudgetExceeded, match="max_usd=0.001"):
        while True:
            model.complete(MSGS)
            calls += 1
    # each call: 10 prompt tokens * 20/1e6 + 10 completion * 80/1e6 = 0.001 -> one call spends it all
    assert calls == 1 and seen[0].cost_usd == pytest.approx(0.001)
    assert accountant.snapshot()["remaining"]["usd"] == 0.0


def test_wall_limit():
    accountant = Accountant(BudgetConfig(max_wall_s=0.0))
    with pytest.raises(BudgetExceeded, match="max_wall_s"):
        AccountedModel(ScriptedModel(), accountant).complete(MSGS)


def test_failed_calls_are_recorded_and_reraised():
    seen: list[LLMCall] = []
    accountant = Accountant(on_call=seen.append)
    model = AccountedModel(ScriptedModel([]), accountant, purpose="p")
    with pytest.raises(Exception, match="ran out"):
        model.complete(MSGS)
    assert len(seen) == 1 and not seen[0].ok and "ran out" in seen[0].error
    assert accountant.snapshot()["failed_calls"] == 1 and accountant.snapshot()["in_flight"] == 0


def test_async_calls_are_accounted():
    accountant = Accountant(BudgetConfig(max_calls=1))
    model = AccountedModel(ScriptedModel(["ok"]), accountant)
    assert asyncio.run(model.acomplete(MSGS)).text == "ok"
    with pytest.raises(BudgetExceeded):
        asyncio.run(model.acomplete(MSGS))


def test_parallel_callers_never_overshoot_max_calls():
    accountant = Accountant(BudgetConfig(max_calls=5))
    gate = threading.Barrier(12)

    def slow(messages):
        return "ok"

    model = AccountedModel(ScriptedModel(slow), accountant)
    outcomes: list[str] = []

    def worker():
        gate.wait()
        try:
            model.complete(MSGS)
            outcomes.append("ok")
        except BudgetExceeded:
            outcomes.append("stopped")

    threads = [threading.Thread(target=worker) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 5 and accountant.snapshot()["calls"] == 5


def test_unlimited_by_default():
    accountant = Accountant()
    for _ in range(50):
        accountant.check()
    assert accountant.snapshot()["remaining"] == {"calls": None, "tokens": None, "wall_s": None, "usd": None}
