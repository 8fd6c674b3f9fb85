"""Judges: voting, ties, unparseable votes, hints, rule-based verdicts."""

from __future__ import annotations

from ratchet.contracts import Completion, Usage
from ratchet.online.judge import (
    ModelJudge,
    RuleJudge,
    build_judge,
    instruction_of,
    majority,
    parse_hint,
    parse_vote,
)
from ratchet.online.records import Turn
from ratchet.online.sessions import SESSION_ENDED

TURN = Turn("t1", "s", False, "main", [{"role": "user", "content": "sort a list"}], "sorted(x)", [1], [2], [-0.1], 0)


class Canned:
    """A Model that answers from a list, recording the calls."""

    name = "canned"

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []

    def complete(self, messages, *, temperature=0.0, max_tokens=512, stop=None, seed=None, logprobs=False,
                 grammar=None):
        self.calls.append({"messages": messages, "temperature": temperature, "seed": seed})
        return Completion(self.answers.pop(0), Usage(), 0.0, self.name)


def test_majority_and_ties():
    assert majority([1, 1, -1]) == 1
    assert majority([-1, -1, 1]) == -1
    assert majority([1, -1]) == 0  # tie
    assert majority([1, -1, 0]) == 0  # three-way tie
    assert majority([1, None, None]) == 1  # unparseable ignored
    assert majority([None, None]) == 0
    assert majority([]) == 0
    assert majority([0, 0, 1]) == 0


def test_parse_vote_takes_last_box_and_rejects_out_of_range():
    assert parse_vote("maybe \\boxed{-1} ... final \\boxed{1}") == 1
    assert parse_vote("\\boxed{ -1 }") == -1
    assert parse_vote("\\boxed{2}") is None
    assert parse_vote("no verdict") is None
    assert parse_vote("-1\nno hint") == -1  # a bare verdict on its own line
    assert parse_vote("1: the user moves on, thanks the assistant") is None  # an echo of the rubric is not a vote
    assert parse_hint("\\boxed{1} [HINT_START] Use tabs. [HINT_END]") == "Use tabs."
    assert parse_hint("\\boxed{1}") is None


def test_model_judge_votes_m_times_at_temperature():
    model = Canned(["good \\boxed{1}", "\\boxed{-1}", "garbage", "\\boxed{1}"])
    judge = ModelJudge(model, votes=4, rewards=True, hints=False)
    j = judge.judge(TURN, "thanks, that worked")
    assert j.reward == 1 and j.votes == [1, -1, 1] and j.hint is None
    assert len(model.calls) == 4
    assert all(c["temperature"] == 0.6 for c in model.calls)
    assert len({c["seed"] for c in model.calls}) == 4  # votes can differ
    prompt = model.calls[0]["messages"][1]["content"]
    assert "thanks, that worked" in prompt and "sorted(x)" in prompt


def test_model_judge_tie_gives_zero():
    j = ModelJudge(Canned(["\\boxed{1}", "\\boxed{-1}"]), votes=2, hints=False).judge(TURN, "hm")
    assert j.reward == 0 and j.votes == [1, -1]


def test_model_judge_keeps_longest_hint_among_positive_votes():
    answers = [
        "\\boxed{1} [HINT_START]Sort in place.[HINT_END]",
        "\\boxed{1} [HINT_START]The user wants the list sorted in place with list.sort().[HINT_END]",
        "\\boxed{-1} [HINT_START]An even longer hint that must be ignored because the vote is negative.[HINT_END]",
    ]
    j = ModelJudge(Canned(answers), votes=3, rewards=False, hints=True).judge(TURN, "no, in place")
    assert j.hint == "The user wants the list sorted in place with list.sort()."
    assert j.reward == 0 and j.votes == []


def test_model_judge_no_hint_when_no_positive_vote():
    j = ModelJudge(Canned(["\\boxed{-1}"] * 3), votes=3, rewards=False).judge(TURN, "ok")
    assert j.hint is None


def test_failed_judge_calls_count_as_unparseable():
    class Flaky(Canned):
        def complete(self, *a, **k):
            if len(self.calls) == 0:
                self.calls.append({})
                raise RuntimeError("backend down")
            return super().complete(*a, **k)

    j = ModelJudge(Flaky(["\\boxed{-1}", "\\boxed{-1}"]), votes=3, hints=False).judge(TURN, "wrong")
    assert j.reward == -1 and j.votes == [-1, -1]


def test_rule_judge_verdicts():
    judge = RuleJudge(hints=False)
    assert judge.vote("Thanks, that's perfect!") == 1
    assert judge.vote("No, I meant descending order") == -1
    assert judge.vote("thanks, but please redo it with tabs") == -1  # a change request is negative
    assert judge.vote("Can you try again?") == -1
    assert judge.vote("what is the capital of France?") == 0
    assert judge.vote("tool: exit code 0, 3 files listed") == 1
    assert judge.vote("tool: Traceback (most recent call last): ValueError") == -1
    assert judge.vote(SESSION_ENDED) == 0


def test_rule_judge_hint_is_the_correction():
    j = RuleJudge(hints=True).judge(TURN, "No, I meant in place")
    assert j.reward == -1 and "No, I meant in place" in j.hint
    assert RuleJudge(hints=True).judge(TURN, "thanks").hint is None


def test_build_judge_by_learning_mode():
    assert build_judge("rule", learn="binary").inner.hints is False
    opd = build_judge("model", learn="opd", model=Canned([])).inner
    assert opd.hints and not opd.rewards
    both = build_judge("model", learn="combine", model=Canned([])).inner
    assert both.hints and both.rewards


def test_rule_judge_hint_states_the_instruction_without_the_complaint():
    correction = "No, that's not how I asked. Always start your reply with the greeting 'Ahoy!'. Please answer again."
    assert instruction_of(correction) == "Always start your reply with the greeting 'Ahoy!'."
    j = RuleJudge(hints=True).judge(TURN, correction)
    assert j.reward == -1 and j.hint == "Always start your reply with the greeting 'Ahoy!'."
    # Nothing but complaint: the whole correction is the hint; the old style keeps it whole too.
    assert RuleJudge(hints=True).judge(TURN, "No, wrong.").hint == "The user's follow-up was: No, wrong."
    assert RuleJudge(hints=True, hint_style="followup").judge(TURN, correction).hint.endswith("Please answer again.")
