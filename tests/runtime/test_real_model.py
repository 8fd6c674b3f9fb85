"""The agent with the real embedded 0.5B model on one suite task (short; runs in CI)."""

from __future__ import annotations

import pytest

from ratchet.contracts import RatchetError
from ratchet.models import model_path
from ratchet.models.spec import load_model
from ratchet.runtime import HarnessWorkspace
from ratchet.runtime.suite import load_suite, run_suite
from ratchet.store import read_jsonl

MODEL = "qwen2.5-coder-0.5b"


@pytest.mark.real_model
@pytest.mark.timeout(900)
def test_the_small_model_drives_the_loop_through_the_text_protocol(tmp_path):
    try:
        model_path(MODEL)
    except RatchetError as exc:
        pytest.skip(f"model file absent: {exc} (run: ratchet models pull {MODEL})")
    task = next(t for t in load_suite("coding-basics") if t.id == "fahrenheit")
    model = load_model(f"local:{MODEL}", n_threads=1)  # one thread: a real-model test keeps to one core
    summary = run_suite([task], model, tmp_path, workspace=HarnessWorkspace(),
                        overrides=("step_limit=3", "max_tokens=200"))
    assert summary["done"] == 1 and summary["tokens"] > 0
    trace = read_jsonl(tmp_path / "tasks" / "fahrenheit" / "trace.jsonl")
    calls = [r for r in trace if r["type"] == "model_call"]
    assert 1 <= len(calls) <= 3 and all(r["completion_tokens"] > 0 for r in calls)
    # The reply format is one a 0.5B model can follow: at least one reply parsed into a tool call.
    assert any(r["reply"].get("tool_calls") for r in calls), [r["text"] for r in calls]
