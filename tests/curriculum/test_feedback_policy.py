"""The feedback policy with scripted models: failure types read from the searches' records, each
strategy's routing of failed samples to the trainer, the model strategy's malformed answer, the
table of which step removed each type over two rounds, a resume keeping the decisions, and the
types left to the weights hidden from the next round's refiner (a resume keeping that too).

PigDice-v0 is trained on (its refiner asks for the body of ``legal_moves``), TicTacToe-v0 held out.
The base model's PigDice bodies fail two ways (one raises, one lists only ``[roll]``), v1's is right;
on TicTacToe the base writes the harness that accepts every move, v1 the correct one, so v1 is
promoted and round 2 searches PigDice with v1 (v2 writes the base's replies again)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import FIXED, LOOSE, fenced
from pydantic import ValidationError
from scripted import Killed, Models, Training
from test_curriculum import config

from ratchet.curriculum import Curriculum, CurriculumConfig
from ratchet.curriculum.failures import FailureType, of_kinds, typed_samples
from ratchet.curriculum.loop import STATE, open_curriculum
from ratchet.curriculum.policy import ANSWER_GRAMMAR, Action, AskModel
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.evolve.proposers.critic import SAMPLES_FILE
from ratchet.models import ScriptedModel
from ratchet.online.queue import TurnQueue
from ratchet.online.status import QUEUE_NAME, online_dir
from ratchet.online.verdicts import verdict_turns
from ratchet.store import RunStore

pytest.importorskip("textarena")

RAISES, ROLL_ONLY, RIGHT = "    return 1/0\n", "    return ['[roll]']\n", "    return ['[roll]', '[hold]']\n"
#: Per version and game, the replies in turn.
REPLIES = {0: {"PigDice": [ROLL_ONLY, RAISES], "TicTacToe": [fenced(LOOSE)]},
           1: {"PigDice": [RIGHT], "TicTacToe": [fenced(FIXED)]}}
REPLIES[2] = REPLIES[0]


class Replies(Models):
    """A scripted model per version answering by game (:data:`REPLIES`), and the feedback policy's
    question with ``answer(failure type)``; ``questions`` keeps the types asked."""

    def __init__(self, answer: Any = lambda t: "both", kill_at: int | None = None) -> None:
        super().__init__({}, kill_at)
        self.answer, self.questions = answer, []

    def __call__(self, version: int) -> ScriptedModel:
        self.asked.append(version)
        count: dict[str, int] = {}

        def reply(messages: Any) -> str:
            text = json.dumps(messages)
            if "Answer with one word" in text:
                failure = next(t for t in FailureType if f"failed this way: {t.value} (" in text)
                self.questions.append(failure.value)
                return self.answer(failure.value)
            self.calls += 1
            if self.kill_at is not None and self.calls == self.kill_at:
                raise Killed(f"killed at call {self.calls}")
            game = "PigDice" if "PigDice" in text else "TicTacToe"
            options = REPLIES[version][game]
            count[game] = count.get(game, -1) + 1
            return options[count[game] % len(options)]

        return ScriptedModel(reply, name=f"scripted@v{version}")


def feedback_config(rounds: int = 1, **feedback: Any) -> CurriculumConfig:
    data = config(rounds).model_dump()
    data["feedback"] = feedback
    return CurriculumConfig.model_validate(data)


def run_curriculum(store: RunStore, cfg: CurriculumConfig, resume: str | None = None, *, models: Replies | None = None,
                   kill: str | None = None) -> tuple[Curriculum, Replies, Training]:
    run, cfg = open_curriculum(store, cfg, resume)
    models = models or Replies()
    training = Training(Path(run.dir), kill)
    return Curriculum(cfg, run, store, models, training, runtime_factory=InProcessHarness, say=lambda line: None), models, training


def typed(c: Curriculum, round_: int = 0) -> dict[str, str]:
    """Turn id -> failure type of a round's failed samples."""
    runs = [c.store.open_run(e["run_id"]) for e in c.state["rounds"][round_]["train"].values()]
    return {s.turn_id: s.type.value for run in runs for s in typed_samples(run)}


def test_samples_are_typed_from_the_evaluators_records(tmp_path: Path) -> None:
    run = RunStore(tmp_path / "runs").create_run("autoharness", {"model": "scripted"}, "records")
    request = [{"role": "user", "content": "refine harness.py"}]
    samples = [
        {"reply": "a", "code": None, "screen": None, "reason": "no code in the reply"},
        {"reply": "b", "code": None, "screen": None, "reason": "SyntaxError: invalid syntax (line 3)"},
        {"reply": "c", "code": "c1", "screen": None, "reason": "the refined harness.py is identical to the parent's"},
        {"reply": "d", "code": "d1", "screen": 0.4, "reason": None,
         "findings": "3× false_accept, 1× code_error; for example, is_legal_action said True, but 4× lost"},
        {"reply": "e", "code": "e1", "screen": 0.5, "reason": None, "findings": "2× wrong_legal_actions; for example …"},
        {"reply": "f", "code": "f1", "screen": 0.2, "reason": None},
        {"reply": "g", "code": "g1", "screen": 1.0, "reason": None},
        {"reply": "h", "code": "e1", "screen": None, "reason": None},  # the code of "e" again
    ]
    run.append_jsonl(SAMPLES_FILE, {"proposer": "harness_refiner", "parent": "p", "surface": "harness.py",
                                    "refiner": "main", "request": request, "samples": samples, "kept": None, "at": 1.0})
    by_reply = {t.response_text: t.turn_id for t, _ in verdict_turns(run)}
    types = {s.turn_id: s.type for s in typed_samples(run)}
    assert {reply: types.get(tid) for reply, tid in by_reply.items()} == {
        "a": FailureType.WRONG_FORMAT, "b": FailureType.CODE_ERROR, "c": FailureType.NO_CHANGE,
        "d": FailureType.CODE_ERROR,  # code that raises blocks before its wrong legality (and "lost" is the example's text)
        "e": FailureType.ILLEGAL_MOVE, "f": FailureType.LOW_SCORE, "g": None, "h": FailureType.ILLEGAL_MOVE}
    assert of_kinds(["lost", "rejected_by_env"]) == FailureType.ILLEGAL_MOVE
    assert of_kinds(["timeout", "lost"]) == FailureType.TIMEOUT
    assert of_kinds([]) == FailureType.LOW_SCORE and of_kinds(["a_new_kind"]) == FailureType.OTHER


def test_a_by_type_mapping_naming_no_type_fails_at_load() -> None:
    with pytest.raises(ValidationError, match="by_type"):
        feedback_config(policy="by_type", by_type={"illegal": "harness"})


def test_the_searches_hidden_types_are_the_policy_s_to_set() -> None:
    data = config().model_dump()
    data["search"]["hide_failure_types"] = ["code_error"]
    with pytest.raises(ValidationError, match="set per round by the feedback policy"):
        CurriculumConfig.model_validate(data)
    data["search"]["hide_failure_types"] = ["illegal"]
    with pytest.raises(ValidationError, match="'illegal' is no failure type; the types are wrong_format, no_change"):
        CurriculumConfig.model_validate(data)


@pytest.mark.parametrize(("feedback", "fed_types"), [
    ({}, {"code_error", "illegal_move"}),
    ({"policy": "weights"}, {"code_error", "illegal_move"}),
    ({"policy": "harness"}, set()),
    ({"policy": "by_type", "by_type": {"code_error": "harness"}}, {"illegal_move"}),
])
def test_each_strategy_routes_the_failed_samples(tmp_path: Path, feedback: dict, fed_types: set[str]) -> None:
    store = RunStore(tmp_path / "runs")
    c, _, training = run_curriculum(store, feedback_config(**feedback))
    [r] = c.execute()["rounds"]
    failed = typed(c)
    assert sorted(failed.values()) == ["code_error", "illegal_move"] and r["failures"] == {"code_error": 1, "illegal_move": 1}
    queue = TurnQueue(online_dir(Path(c.run.dir)) / QUEUE_NAME)
    in_queue = {t for run_id in (e["run_id"] for e in r["train"].values())
                for t in queue.session_turn_ids(next(t.session_id for t, _ in verdict_turns(store.open_run(run_id))))}
    assert {failed[t] for t in in_queue} == fed_types and r["fed"] == len(in_queue)
    assert r["withheld"] == 2 - len(fed_types)
    assert {d["action"] for d in r["decisions"].values()} == (
        {"both"} if not feedback else {feedback["policy"]} if feedback["policy"] != "by_type" else {"harness", "both"})
    if feedback.get("policy") == "harness":  # nothing fed: no update, nothing for the games gate
        assert training.trained == [] and r["version"] is None and not r["gate"]["promote"]
        assert r["gate"]["reason"].startswith("no weight update: the feedback policy left every failed sample")
    else:
        assert training.trained == [1] and r["gate"]["promote"]


def test_the_model_strategy_reads_one_word_and_falls_back_to_both_on_a_malformed_answer() -> None:
    model = ScriptedModel(["Harness.", "I would say weights"])
    decisions = AskModel(lambda: model).decide({"code_error": 3, "illegal_move": 1}, 8)
    assert decisions["code_error"].action == Action.HARNESS and decisions["code_error"].fallback is None
    wrong = decisions["illegal_move"]
    assert wrong.action == Action.BOTH and wrong.answer == "I would say weights" and "malformed answer" in wrong.fallback
    assert [c["params"]["grammar"] for c in model.calls] == [ANSWER_GRAMMAR] * 2
    assert "3 failed this way: code_error" in json.dumps(model.calls[0])


def test_the_model_strategy_asks_the_rounds_version_and_its_answers_route(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    models = Replies(answer=lambda t: "harness" if t == "code_error" else "maybe")
    c, _, _ = run_curriculum(store, feedback_config(policy="model"), models=models)
    [r] = c.execute()["rounds"]
    assert sorted(models.questions) == ["code_error", "illegal_move"]
    assert r["decisions"]["code_error"] == {"action": "harness", "by": "model", "answer": "harness", "fallback": None}
    assert r["decisions"]["illegal_move"]["action"] == "both" and "malformed" in r["decisions"]["illegal_move"]["fallback"]
    assert r["withheld"] == 1 and r["fed"] == 1


def test_the_table_says_which_types_went_down_across_two_rounds(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    c, _, _ = run_curriculum(store, feedback_config(rounds=2, policy="by_type", by_type={"code_error": "harness"}))
    first, second = c.execute()["rounds"]
    assert first["gate"]["promote"] and second["incumbent"] == 1
    assert first["failures"] == {"code_error": 1, "illegal_move": 1} and second["failures"] == {}
    report = json.loads((Path(c.run.dir) / "learn.json").read_text())
    assert [(f["round"], f["type"], f["before"], f["samples"], f["action"], f["after"], f["next_samples"], f["down"])
            for f in report["feedback"]] == [(1, "code_error", 1, 2, "harness", 0, 1, True),
                                             (1, "illegal_move", 1, 2, "both", 0, 1, True)]
    md = (Path(c.run.dir) / "learn.md").read_text()
    assert "| 1 | code_error | 1/2 | harness (by_type) | yes | 0/1 | yes |" in md


def test_a_resumed_round_keeps_its_decisions(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    c, models, _ = run_curriculum(store, feedback_config(policy="model"), models=Replies(answer=lambda t: "harness"),
                                  kill="feed")
    with pytest.raises(Killed):
        c.execute()
    saved = c.run.read_json(STATE)["rounds"][0]
    assert saved["fed"] is None and {d["action"] for d in saved["decisions"].values()} == {"harness"}
    again = Replies(answer=lambda t: "weights")
    resumed, _, training = run_curriculum(store, feedback_config(policy="model"), c.run.id, models=again)
    [r] = resumed.execute()["rounds"]
    assert again.questions == [] and r["decisions"] == saved["decisions"]
    assert r["fed"] == 0 and r["withheld"] == 2 and training.trained == []
    assert TurnQueue(online_dir(Path(c.run.dir)) / QUEUE_NAME).stats()["turns"] == 0


class Recording(Replies):
    """:class:`Replies` whose v1 writes the base's PigDice bodies again (its TicTacToe harness still
    right, so it is promoted), keeping every PigDice request per version."""

    def __init__(self, answer: Any = lambda t: "both") -> None:
        super().__init__(answer)
        self.pig: dict[int, list[str]] = {}

    def __call__(self, version: int) -> ScriptedModel:
        inner = super().__call__(version)

        def reply(messages: Any) -> str:
            text = json.dumps(messages)
            if "PigDice" in text and "Answer with one word" not in text:
                self.pig.setdefault(version, []).append(" ".join(m["content"] for m in messages))
                if version == 1:
                    return REPLIES[0]["PigDice"][len(self.pig[1]) % 2]
            return inner.complete(messages).text

        return ScriptedModel(reply, name=inner.name)


def test_the_next_round_hides_the_types_left_to_the_weights_and_a_resume_keeps_it(tmp_path: Path) -> None:
    from test_hidden_failures import failures_of, leaked

    data = feedback_config(rounds=2, policy="by_type", by_type={"illegal_move": "weights", "code_error": "harness"}).model_dump()
    data["search"].update(iterations=2, budget={"max_calls": 4})  # a second request, refining a sample that failed
    cfg = CurriculumConfig.model_validate(data)
    store = RunStore(tmp_path / "runs")
    models = Recording()
    c, _, _ = run_curriculum(store, cfg, models=models)
    first, second = c.execute()["rounds"]
    assert first["decisions"]["illegal_move"]["action"] == "weights" and first["gate"]["promote"]
    assert first["hidden"] == [] and second["hidden"] == ["illegal_move"]  # weights only: not code_error (harness)
    runs = lambda r: [store.open_run(e["run_id"]) for e in r["train"].values()]  # noqa: E731
    assert [e["hidden"] for e in second["train"].values()] == [["illegal_move"]]
    assert [run.config["hide_failure_types"] for run in runs(second)] == [["illegal_move"]]
    assert [run.config["hide_failure_types"] for run in runs(first)] == [[]]
    assert all(store.open_run(e["run_id"]).config["hide_failure_types"] == []  # held-out searches hide nothing
               for slot in c.state["heldout"].values() for e in slot.values())
    # What the model was asked: round 1's refinement showed the illegal moves (the control), round 2's none.
    illegal = lambda r: [f for run in runs(r) for f in failures_of(run, {FailureType.ILLEGAL_MOVE})]  # noqa: E731
    assert illegal(first) and illegal(second), "both rounds' searches recorded illegal moves (scored)"
    assert leaked(models.pig[0], illegal(first)) and leaked(models.pig[1], illegal(second)) == set()
    md = (Path(c.run.dir) / "learn.md").read_text()
    assert "| 1 | illegal_move | " in md and "| weights (by_type) | no |" in md and "| harness (by_type) | yes |" in md
    # A resumed round uses its recorded setting, whatever the last round's decisions say now.
    state = c.run.read_json(STATE)
    state["rounds"][0]["decisions"]["illegal_move"]["action"] = "both"
    entry = next(iter(state["rounds"][1]["train"].values()))
    state["rounds"][1].update(fed=None, version=None, gate=None, training=None, failures=None, decisions=None)
    entry.pop("result")  # as if killed while the search ran: resumed in its own run
    c.run.write_json(STATE, state)
    resumed, _, _ = run_curriculum(store, cfg, c.run.id, models=Recording())
    again = resumed.execute()["rounds"][1]
    assert again["hidden"] == ["illegal_move"] and next(iter(again["train"].values()))["hidden"] == ["illegal_move"]
    assert store.open_run(next(iter(again["train"].values()))["run_id"]).config["hide_failure_types"] == ["illegal_move"]
