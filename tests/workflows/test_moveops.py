"""The move operators (ratchet.workflows.moveops) driven the way the sandbox drives them, and the
move spec (ratchet.workflows.movespec): its validation, its call cap per move, its compiled
workflow replayed through ``as_step``, and the games' best-of-k detector."""

from __future__ import annotations

import sys

import pytest

from ratchet.contracts import RatchetError
from ratchet.models.scripted import ScriptedModel
from ratchet.workflows import flowops
from ratchet.workflows import moveops as mo
from ratchet.workflows.games import vote_size
from ratchet.workflows.movespec import (
    MOVE_MENU,
    compile_move_spec,
    parse_move_spec,
    vote_spec,
)
from tests.workflows.test_operators import drive, kinds

# as TextArena writes it (GuessTheNumber-v0 seed 100 after [7], [7])
OBS = ("You are playing Guess The Number. Guess a number between 1 and 20, like [5].\n\n"
       "[Player] [7]\n\n[GAME] The target number is higher.\n\n"
       "[Player] [7]\n\n[GAME] You attempted an invalid move. Reason: Invalid move. Player 0 has already guessed "
       "the number. Please resubmit a valid move.\n")
TASK = {"game": "GuessTheNumber-v0", "observation": OBS, "feedback": None, "turn": 2}
FILES = {"prompts/system.md": "Reply with your move in square brackets."}


def test_extract_move_takes_the_last_bracket_or_a_short_bare_line() -> None:
    assert mo.extract_move("I think [3] is low, so [12]") == "[12]"
    assert mo.extract_move(" up. ") == "[up]"
    assert mo.extract_move("[ A C ]") == "[A C]"
    assert mo.extract_move("I would rather explain the rules of this game at some length") is None
    assert mo.extract_move("") is None


def test_vote_moves_picks_the_majority_normalized_and_ties_to_the_earliest() -> None:
    chosen = mo.vote_moves(["[Hit]", "[stand]", "[ Stand ]", "[hit ]", "[Stand]"])
    assert (chosen.code, chosen.index, chosen.support) == ("[stand]", 1, 3)
    assert mo.vote_moves(["[a]", "[b]"]).code == "[a]" and mo.vote_moves([]) is None


def test_refused_moves_are_the_players_moves_the_game_answered_as_invalid() -> None:
    assert mo.refused_moves(TASK) == {"[7]"}
    answered = OBS.split("\n\n[Player] [7]\n\n[GAME] You attempted")[0]
    assert mo.refused_moves({**TASK, "observation": answered}) == set()  # "higher" is no refusal
    # the moves a refusal suggests are not refused; the feedback on a refused move marks the latest one
    blackjack = ("[GAME] Hand 1/5\n\n[Player] [fold]\n\n[GAME] You attempted an invalid move. Reason: Invalid action. "
                 "Use '[Hit]' or '[Stand]'.\n\n[Player] [Hit]\n\n[GAME] Your hand: 4, 9, 5\n")
    assert mo.refused_moves({"observation": blackjack}) == {"[fold]"}
    assert mo.refused_moves({"observation": blackjack, "feedback": "Invalid action."}) == {"[fold]", "[hit]"}
    assert mo.avoid_refused(["[7]", "[12]", "[9]"], TASK) == ["[12]", "[9]", "[7]"]
    assert mo.avoid_refused(["[7]"], TASK) == ["[7]"]  # all refused: kept, not emptied


def test_move_messages_carry_the_system_prompt_feedback_and_the_notes() -> None:
    plain = mo.move_messages({**TASK, "feedback": "Try again."}, FILES)
    assert [m["role"] for m in plain] == ["system", "user"] and plain[1]["content"].endswith("Try again.")
    noted = mo.move_messages(TASK, FILES, notes="go higher than 7")
    assert [m["role"] for m in noted] == ["system", "user", "assistant", "user"]
    assert noted[2]["content"] == "go higher than 7" and noted[3]["content"] == mo.ANSWER_PROMPT
    assert mo.move_messages(TASK, {})[0]["role"] == "user"  # no system prompt file: none sent


def test_think_then_sample_sends_the_reasoning_before_asking_for_the_move() -> None:
    model = ScriptedModel(["The number is above 7, so 12 halves the rest.", "[12]", "[12]"])
    answer, events = drive(lambda t, f: mo.run_move_plan(
        [{"op": "think", "max_tokens": 64}, {"op": "sample", "k": 2}, {"op": "vote"}], t, f), model, TASK, FILES)
    assert answer == "[12]" and kinds(events) == ["model"] * 3
    assert mo.THINK_PROMPT in model.calls[0]["messages"][-1]["content"]
    assert model.calls[1]["messages"][2]["content"].startswith("The number is above 7")


def test_vote_and_avoid_refused_pick_the_move_in_plan_order() -> None:
    replies = ["[7]", "Let me say [7]", "[9]"]
    voted, _ = drive(lambda t, f: mo.run_move_plan([{"op": "sample", "k": 3}, {"op": "vote"}], t, f),
                     ScriptedModel(list(replies)), TASK, FILES)
    assert voted == "[7]"  # the majority, refused or not
    fresh, _ = drive(lambda t, f: mo.run_move_plan(
        [{"op": "sample", "k": 3}, {"op": "vote"}, {"op": "avoid_refused"}], t, f), ScriptedModel(list(replies)), TASK, FILES)
    assert fresh == "[9]"  # the majority was refused by the game: the next one the game has not refused


def test_review_keeps_an_ok_move_and_puts_a_revised_one_first() -> None:
    plan = [{"op": "sample", "k": 1}, {"op": "review"}]
    kept, events = drive(lambda t, f: mo.run_move_plan(plan, t, f), ScriptedModel(["[9]", "Fine.\nVERDICT: ok"]),
                         TASK, FILES)
    assert kept == "[9]" and len(events) == 2
    model = ScriptedModel(["[7]", "7 was refused.\nVERDICT: wrong", "[10]"])
    revised, events = drive(lambda t, f: mo.run_move_plan(plan, t, f), model, TASK, FILES)
    assert revised == "[10]" and len(events) == 3
    assert "Proposed move: [7]" in model.calls[1]["messages"][-1]["content"]
    no_verdict, _ = drive(lambda t, f: mo.run_move_plan(plan, t, f), ScriptedModel(["[7]", "hmm", "[7]"]), TASK, FILES)
    assert no_verdict == "[7]"  # a review without a verdict counts as wrong; a revision to the same move changes nothing


def test_a_plan_without_any_extractable_move_answers_the_raw_reply() -> None:
    answer, _ = drive(lambda t, f: mo.run_move_plan([{"op": "sample", "k": 1}, {"op": "vote"}], t, f),
                      ScriptedModel(["I cannot decide what to do in this game right now"]), TASK, FILES)
    assert answer == "I cannot decide what to do in this game right now"


# ------------------------------------------------------------------------------ the move spec


def test_a_move_spec_counts_its_calls_per_move_and_is_held_to_the_cap() -> None:
    spec = parse_move_spec("{name: t, steps: [{op: think}, {op: sample, k: 2}, {op: vote}, {op: review}]}")
    assert spec.max_model_calls() == 5
    assert parse_move_spec("[{op: sample, k: 3}, {op: vote}]").max_model_calls() == 3  # a bare list of steps
    with pytest.raises(RatchetError, match="5 model calls per move, more than the run's cap of 4"):
        parse_move_spec("{steps: [{op: think}, {op: sample, k: 2}, {op: vote}, {op: review}]}", max_model_calls=4)


@pytest.mark.parametrize("text, message", [
    ("{steps: [{op: vote}, {op: sample}]}", "step 1 is 'vote'"),
    ("{steps: [{op: think}]}", "no `sample` step"),
    ("{steps: [{op: sample, k: 9}]}", "step 1 (sample) field `k`"),
    ("{steps: [{op: sample}, {op: revise}]}", "step 2: unknown op 'revise'"),
    ("{steps: [{op: sample, votes: 2}]}", "step 1 (sample) field `votes`"),
    ("just words", "must be a mapping"),
])
def test_a_malformed_move_spec_is_refused_naming_the_step(text: str, message: str) -> None:
    with pytest.raises(RatchetError) as error:
        parse_move_spec(text)
    assert message in str(error.value), str(error.value)


def test_a_compiled_move_spec_replays_its_plan_through_as_step(monkeypatch) -> None:
    files = compile_move_spec(parse_move_spec("{name: tv, steps: [{op: think}, {op: sample, k: 2}, {op: vote}]}"))
    source = files["workflow.py"]
    assert "At most 3 model calls per move" in source and "from moveops import run_move_plan" in source
    namespace: dict = {}
    # the sandbox imports the libraries as top-level modules; here the project's copies stand in
    monkeypatch.setitem(sys.modules, "flowops", flowops)
    monkeypatch.setitem(sys.modules, "moveops", mo)
    exec(compile(source, "workflow.py", "exec"), namespace)  # noqa: S102 - the compiled workflow under test
    state = {"task": TASK, "files": FILES, "events": [], "seed": 0}
    model = ScriptedModel(["think: above 7", "[11]", "[11]"])
    for _ in range(5):
        action = namespace["step"](state)
        if "answer" in action:
            break
        state["events"].append({"kind": "model", "reply": model.complete(action["call_model"]).text})
    assert action == {"answer": "[11]"} and len(state["events"]) == 3


def test_the_games_best_of_k_is_recognized_and_nothing_else_is() -> None:
    def files(text: str) -> dict[str, str]:
        return compile_move_spec(parse_move_spec(text))

    assert vote_size(compile_move_spec(vote_spec(3))) == 3
    assert vote_size(compile_move_spec(vote_spec(2, 16))) == 2  # the original's reply budget kept
    assert vote_size(files("[{op: sample, k: 1, max_tokens: 16}]")) == 1  # one sample is best-of-1
    assert vote_size(files("[{op: sample, k: 3}]")) is None  # three samples, the first answered: not a vote
    assert vote_size(files("[{op: think}, {op: sample, k: 3}, {op: vote}]")) is None
    assert vote_size(files("[{op: sample, k: 3}, {op: vote}, {op: avoid_refused}]")) is None
    assert vote_size({"workflow.py": "def step(state):\n    return {'answer': '[1]'}\n"}) is None  # hand-written
    assert MOVE_MENU.parse is parse_move_spec and MOVE_MENU.first == ("think", "sample")
