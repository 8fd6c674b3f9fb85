"""The operator-level spec: parsing (clear errors), its cost bound, and a compiled plan's behaviour."""

from __future__ import annotations

import sys

import pytest

from ratchet.contracts import RatchetError
from ratchet.models.scripted import ScriptedModel
from ratchet.workflows import compile_spec, flowops, parse_spec
from tests.workflows.test_operators import CRASH, RIGHT, WRONG, drive, kinds

GOOD = """
name: sample-select-revise
steps:
  - {op: sample, k: 3}
  - {op: strip_tests}
  - {op: select_by_examples}
  - {op: revise, rounds: 2}
"""


def test_a_valid_spec_parses_and_bounds_its_model_calls() -> None:
    spec = parse_spec(GOOD)
    assert spec.name == "sample-select-revise"
    assert [s.op for s in spec.steps] == ["sample", "strip_tests", "select_by_examples", "revise"]
    assert spec.max_model_calls() == 5
    assert parse_spec('[{"op": "sample", "k": 2}, {"op": "review"}]').max_model_calls() == 4  # JSON, bare list
    with pytest.raises(RatchetError, match="5 model calls per task, more than the run's cap of 4"):
        parse_spec(GOOD, max_model_calls=4)


@pytest.mark.parametrize("text, message", [
    ("steps: [{op: smaple, k: 2}]", "step 1: unknown op 'smaple'"),
    ("steps: [{k: 2}]", "step 1: has no `op`"),
    ("steps: [{op: sample, k: 0}]", "step 1 (sample) field `k`: Input should be greater than or equal to 1"),
    ("steps: [{op: sample, k: 9}]", "step 1 (sample) field `k`"),
    ("steps: [{op: sample}, {op: revise, times: 2}]", "step 2 (revise) field `times`: Extra inputs"),
    ("steps: [{op: sample}, {op: vote, k: 2}]", "step 2 (vote) field `k`: Extra inputs"),
    ("steps: [sample]", "step 1"),
    ("steps: []", "field `steps`"),
    ("name: x", "field `steps`: Field required"),
    ("[{op: vote}]", "step 1 is 'vote', but the pool is empty"),
    ("steps: [{op: sample, k: 2}", "not YAML/JSON"),
    ("42", "must be a mapping with `steps`"),
])
def test_a_malformed_spec_is_rejected_naming_the_step_and_field(text, message) -> None:
    with pytest.raises(RatchetError) as caught:
        parse_spec(text)
    assert message in str(caught.value)
    assert caught.value.hint  # says how to write it


def test_a_compiled_spec_is_a_workflow_without_a_library_copy(monkeypatch) -> None:
    files = compile_spec(parse_spec(GOOD))
    assert set(files) == {"workflow.py"}  # the workflow suites put flowops beside it in the sandbox
    monkeypatch.setitem(sys.modules, "flowops", flowops)  # importable by that name, as in the sandbox
    namespace: dict = {}
    exec(compile(files["workflow.py"], "workflow.py", "exec"), namespace)  # noqa: S102 - a compiled spec, ours
    assert namespace["PLAN"] == parse_spec(GOOD).plan()
    assert callable(namespace["step"])


def plan_answer(text: str, replies: list[str]):
    spec = parse_spec(text)

    def flow(task, files):
        return (yield from flowops.run_plan(spec.plan(), task, files))

    model = ScriptedModel(replies)
    answer, events = drive(flow, model)
    return answer, events, model


def test_plan_sample_select_revise_picks_the_passing_code_without_revising() -> None:
    answer, events, _model = plan_answer(GOOD, [WRONG, CRASH, RIGHT])
    assert "return a + b" in answer
    assert kinds(events) == ["model"] * 3 + ["tests"] * 3  # the chosen code passes: no revise call


def test_plan_revise_repairs_a_failing_first_code_and_stops_when_it_passes() -> None:
    answer, events, model = plan_answer(GOOD, [WRONG, WRONG, CRASH, RIGHT])
    assert "return a + b" in answer
    # 3 samples, 2 distinct codes tested, 1 repair, its check; the second round is not needed
    assert kinds(events) == ["model"] * 3 + ["tests"] * 2 + ["model", "tests"]
    assert "add(1, 2) returned 2, expected 3" in model.calls[3]["messages"][-1]["content"]


def test_plan_filter_and_vote_answer_the_majority_of_passing_codes() -> None:
    spec = "steps: [{op: sample, k: 4}, {op: filter_passing}, {op: vote}]"
    right_variant = "```python\ndef add(a, b):\n    return b + a\n```"
    answer, _events, _ = plan_answer(spec, [WRONG, right_variant, RIGHT, RIGHT])
    assert answer.strip().endswith("return a + b")  # two identical passing codes outvote the variant
    answer, _, _ = plan_answer("steps: [{op: sample, k: 3}, {op: vote}]", [WRONG, WRONG, RIGHT])
    assert answer.strip().endswith("return a * b")  # an unfiltered vote follows the majority, wrong or not


def test_plan_review_asks_for_a_fix_only_on_a_wrong_verdict() -> None:
    spec = "steps: [{op: sample}, {op: review}]"
    answer, events, _ = plan_answer(spec, [WRONG, "VERDICT: wrong", RIGHT])
    assert answer.strip().endswith("return a + b") and kinds(events) == ["model"] * 3
    answer, events, _ = plan_answer(spec, [RIGHT, "VERDICT: correct"])
    assert answer.strip().endswith("return a + b") and kinds(events) == ["model"] * 2


def test_plan_strip_tests_is_what_removes_the_models_test_code() -> None:
    noisy = "```python\ndef add(a, b):\n    return a + b\n\nprint(add(1, 2))\n```"
    kept, _, _ = plan_answer("steps: [{op: sample}]", [noisy])
    stripped, _, _ = plan_answer("steps: [{op: sample}, {op: strip_tests}]", [noisy])
    assert "print(" in kept and "print(" not in stripped
    assert plan_answer("steps: [{op: sample}]", ["no code here"])[0] == ""  # an empty pool answers nothing
