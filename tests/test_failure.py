"""One failure type at every border: its JSON form, and runs stored before it was typed read back."""

from __future__ import annotations

import json
from dataclasses import asdict

from ratchet.contracts import Evaluation, Failure, TaskResult
from ratchet.evolve.cache import result_from_record
from ratchet.store import RunStore

#: A failure as the AutoHarness search stored it before failures were typed.
OLD = {"env_seed": 7, "step": 0, "player": 0, "board": " X | 1 | 2 ", "kind": "rejected_by_env", "function": "both",
       "action": "[0]", "verdict": True, "feedback": "the environment rejected it: cell 0 is already occupied"}


def test_a_failure_round_trips_through_its_json_form() -> None:
    failure = Failure("wrong_answer", "expected 3, got 4", "t1", {"output": "4", "lines": [1, 2]})
    record = json.loads(json.dumps(failure.to_record()))
    assert record == {"kind": "wrong_answer", "message": "expected 3, got 4", "task_id": "t1",
                      "detail": {"output": "4", "lines": [1, 2]}}
    assert Failure.from_record(record) == failure
    # The dataclass form the stores write through asdict is the same record.
    assert asdict(failure) == failure.to_record()
    assert Failure.from_record(failure) is failure


def test_an_untyped_dict_of_an_older_run_is_read_as_a_failure() -> None:
    failure = Failure.from_record(OLD)
    assert failure.kind == "rejected_by_env" and failure.message == OLD["feedback"] and failure.task_id is None
    assert failure.detail == {k: v for k, v in OLD.items() if k not in ("kind", "feedback")}
    assert Failure.from_record({"kind": "mine", "feedback": "no idea", "task_id": "g#1"}) == Failure("mine", "no idea", "g#1")
    assert Failure.from_record({"kind": "k", "message": "m", "extra": 1}) == Failure("k", "m", None, {"extra": 1})
    assert Failure.from_record({}) == Failure("failure", "")


def test_an_evaluation_reads_back_typed_from_its_stored_record(tmp_path) -> None:
    run = RunStore(tmp_path).create_run("autoharness", {})
    run.add_evaluation(Evaluation("c1", "search", 0.5, failures=[Failure("code_error", "boom", None, {"function": "both"})]))
    [stored] = run.evaluations("c1")
    again = Evaluation.from_record(stored)
    assert again.failures == [Failure("code_error", "boom", None, {"function": "both"})]
    assert (again.candidate_id, again.split, again.score) == ("c1", "search", 0.5)


def test_an_old_evaluation_with_dict_failures_is_indexed_again(tmp_path) -> None:
    store = RunStore(tmp_path)
    run = store.create_run("autoharness", {})
    folder = run.dir / "candidates" / "c1" / "evaluations"
    folder.mkdir(parents=True)
    (folder / "search-old.json").write_text(json.dumps(
        {"format_version": 1, "id": "old", "candidate_id": "c1", "split": "search", "score": 0.25, "metrics": {},
         "per_task": {}, "failures": [OLD], "created_at": 1.0}))
    run.reindex()
    [row] = run.evaluations("c1")
    assert Evaluation.from_record(row).failures == [Failure.from_record(OLD)]
    assert store.index.query_one("SELECT score FROM evaluations WHERE id = 'old'") == {"score": 0.25}


def test_a_cached_result_reads_back_typed_failures() -> None:
    result = TaskResult("t", 0, 0.0, "trace", (Failure("wrong_answer", "no", "t", {"output": ""}),), {"model_calls": 1.0})
    assert result_from_record(json.loads(json.dumps(asdict(result)))) == result


def test_the_dashboard_lists_old_and_typed_failures_alike() -> None:
    from ratchet.ui.views.autoharness import failure_fields

    typed = Failure.from_record(OLD).to_record()
    assert failure_fields(OLD) == failure_fields(typed)
    assert failure_fields(OLD) == {"kind": "rejected_by_env", **{k: v for k, v in OLD.items() if k not in ("kind", "feedback")},
                                   "feedback": OLD["feedback"]}
