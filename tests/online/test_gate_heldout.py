"""The default gate on the server's own held-out conversations: the split in the queue, the paired
held-out check, the text checks inferred from corrections, and the fallback when too few turns
are held out. Scripted scorers (no model); the real trainer loop is in test_gate_default.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ratchet.online.evaluation import BUILTIN_TASKS, EvaluationHook, GateConfig, refusal_line
from ratchet.online.gate import SelfHeldOutGate, has_bullets, infer_checks, language_of
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn, holds_out


def sessions(share: float, held: bool, n: int, prefix: str = "conv") -> list[str]:
    """``n`` session ids on the held-out side of ``share`` (or on the training side)."""
    found = [f"{prefix}-{i}" for i in range(1000) if holds_out(f"{prefix}-{i}", share) == held]
    return found[:n]


def add(queue: TurnQueue, turn_id: str, session: str, reply: str, reward: int, next_state: str = "thanks",
        prompt: str | None = None, hint: str | None = None, finish_reason: str | None = None,
        tools: list | None = None) -> None:
    queue.add_turn(Turn(turn_id, session, False, "main", [{"role": "user", "content": prompt or f"q {turn_id}"}],
                        reply, [1, 2], [3], [-0.5], 0, finish_reason=finish_reason, tools=tools or []))
    queue.set_next_state(turn_id, next_state)
    queue.add_judgement(Judgement(turn_id, reward, [reward], hint, next_state, "rule"))


# ------------------------------------------------------------------ the split


def test_the_hash_split_is_stable_and_close_to_the_share() -> None:
    ids = [f"session-{i}" for i in range(4000)]
    share = sum(holds_out(s, 0.2) for s in ids) / len(ids)
    assert 0.17 < share < 0.23
    assert [holds_out(s, 0.2) for s in ids[:50]] == [holds_out(s, 0.2) for s in ids[:50]]
    assert not any(holds_out(s, 0.0) for s in ids)
    # A conversation held out at 10% stays held out at 20% (the split is a threshold on one hash).
    assert all(holds_out(s, 0.2) for s in ids if holds_out(s, 0.1))


def test_held_out_conversations_never_train_and_the_gate_reads_them(tmp_path) -> None:
    queue = TurnQueue(tmp_path / "q.sqlite")
    held, trained = sessions(0.2, True, 3), sessions(0.2, False, 3)
    # Judged before the share is set: moved when it is.
    add(queue, "early-held", held[0], "ahoy", 1)
    add(queue, "early-train", trained[0], "ahoy", 1)
    assert queue.hold_out(0.2) == 1 and queue.heldout_share() == pytest.approx(0.2)
    # Judged after: held out at once; a whole conversation goes to one side.
    for i, s in enumerate(held + trained):
        add(queue, f"a{i}", s, "ahoy", 1)
        add(queue, f"b{i}", s, "hello", -1)
    add(queue, "neutral", held[1], "ok", 0)  # excluded as before: no signal either way
    taken = queue.take_batch(100)
    taken_sessions = {s.turn.session_id for s in taken}
    assert taken_sessions == set(trained) and len(taken) == 7
    gate_turns = queue.heldout_samples()
    assert {s.turn.session_id for s in gate_turns} == set(held) and len(gate_turns) == 7
    assert gate_turns[0].turn.turn_id == "early-held"  # oldest first
    stats = queue.stats()
    assert stats["heldout"] == 7 and stats["claimed"] == 7 and stats["excluded"] == 1
    # Released claims return to the pool, never to the gate's side; held-out turns are never claimed.
    queue.release([s.turn.turn_id for s in taken])
    assert {s.turn.session_id for s in queue.take_batch(100)} == set(trained)


def test_no_share_holds_nothing_out(tmp_path) -> None:
    queue = TurnQueue(tmp_path / "q.sqlite")
    for i, s in enumerate(sessions(0.2, True, 2)):
        add(queue, f"t{i}", s, "ahoy", 1)
    assert len(queue.take_batch(10)) == 2 and queue.heldout_samples() == []
    with pytest.raises(ValueError, match="share"):
        queue.hold_out(1.0)


def test_from_config_builds_the_self_held_out_gate_only_when_nothing_else_is_set(tmp_path) -> None:
    queue = TurnQueue(tmp_path / "q.sqlite")
    gate = EvaluationHook.from_config(None, gate=GateConfig(), queue=queue)
    assert isinstance(gate, SelfHeldOutGate) and queue.heldout_share() == pytest.approx(0.2)
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"messages": [{"role": "user", "content": "hi"}], "preferred": "a", "dispreferred": "b"}\n')
    assert isinstance(EvaluationHook.from_config(cases, gate=GateConfig(), queue=queue), EvaluationHook)
    assert queue.heldout_share() == 0.0  # a held-out file is the gate's data: nothing more is held out
    assert EvaluationHook.from_config(None, gate=GateConfig(builtin=False), queue=queue) is None
    off = EvaluationHook.from_config(None, gate=GateConfig(heldout={"share": 0}), queue=queue)
    assert isinstance(off, EvaluationHook) and queue.heldout_share() == 0.0


# ------------------------------------------------------------------ the held-out check


class Scorer:
    """Per-token log-probs of replies from a table that a step can shift, and greedy replies by a rule.

    The built-in tasks are answered (so only the held-out checks can refuse) unless ``collapsed``.
    """

    def __init__(self, logprobs: dict[str, float], reply: str | Callable[[str], str] = "The answer, in a few words.") -> None:
        self.version = 0
        self.logprobs = dict(logprobs)
        self.reply = reply
        self.kl = 0.05
        self.generated = 0
        self.scored = 0

    def step(self, shift: dict[str, float], reply: str | Callable[[str], str] | None = None) -> None:
        """A candidate: the table shifted, maybe another way of replying (the version number stays)."""
        self.logprobs = {k: v + shift.get(k, 0.0) for k, v in self.logprobs.items()}
        self.reply = reply or self.reply

    def mean_token_logprob(self, messages, response, *, base=False, end_of_turn=False, tools=None) -> float:
        self.scored += 1
        return self.logprobs[response]

    def sequence_logprob(self, messages, response, *, base=False) -> float:
        return self.mean_token_logprob(messages, response, base=base) * 3

    def response_kl_to_base(self, pairs) -> float:
        return self.kl

    def generate(self, messages, max_tokens, *, base=False) -> str:
        tasks = dict(BUILTIN_TASKS)
        content = messages[-1]["content"]
        if content in tasks:
            return f"It is {tasks[content]}."
        self.generated += 1
        return self.reply(content) if callable(self.reply) else self.reply


def held_queue(tmp_path, praised: int, corrected: int, correction: str = "No, I wanted the other one.") -> TurnQueue:
    queue = TurnQueue(tmp_path / "q.sqlite")
    queue.hold_out(0.2)
    held = sessions(0.2, True, praised + corrected)
    for i in range(praised):
        add(queue, f"p{i}", held[i], "ahoy", 1)
    for i in range(corrected):
        add(queue, f"c{i}", held[praised + i], "hello", -1, next_state=correction)
    return queue


def self_gate(queue, **settings) -> SelfHeldOutGate:
    hook = EvaluationHook.from_config(None, gate=GateConfig(heldout=settings), queue=queue)
    assert isinstance(hook, SelfHeldOutGate)
    return hook


@pytest.mark.parametrize(("shift", "promote", "failed"), [
    # Praised replies more likely, corrected ones less: the way the feedback asked.
    ({"ahoy": 0.3, "hello": -0.3}, True, []),
    # Both the wrong way: refused on the whole and on each kind.
    ({"ahoy": -0.3, "hello": 0.3}, False, ["heldout", "heldout_praised", "heldout_corrected"]),
    # Corrected replies made more likely, though praised ones rose more: still refused.
    ({"ahoy": 0.5, "hello": 0.3}, False, ["heldout_corrected"]),
    # A move the wrong way smaller than the tolerance is noise, however consistent.
    ({"ahoy": -0.01, "hello": 0.01}, True, []),
])
def test_the_held_out_check_refuses_a_move_the_wrong_way(tmp_path, shift, promote, failed) -> None:
    gate = self_gate(held_queue(tmp_path, 5, 5))
    scorer = Scorer({"ahoy": -1.0, "hello": -1.0})
    baseline = gate.score(scorer)
    scorer.step(shift)
    verdict = gate.evaluate(scorer, baseline)
    assert verdict["promote"] is promote and verdict["failed"] == failed
    assert verdict["fallback"] is None and verdict["heldout_turns"] == 10
    assert {"kl", "tasks", "heldout"} <= set(verdict["checks"])
    check = verdict["checks"]["heldout"]
    assert check["value"] == pytest.approx((shift["ahoy"] - shift["hello"]) / 2)
    assert verdict["score"] - verdict["baseline"] == pytest.approx(check["value"])
    if failed:
        assert check["p_wrong_way"] < 0.05 or "heldout" not in failed
        assert "moved the wrong way" in refusal_line(verdict)


def first_version(tmp_path, policy: str) -> dict:
    """A scripted run up to the first version: conversations arrive one at a time, each a first reply
    the user corrects ("hello") and a second one, written after the correction, that it praises
    ("ahoy") — as in the 24-conversation runs, where the first reply of nearly every conversation
    was corrected. The trainer takes its first batch once 4 training turns wait (``min_batch``);
    its candidate moved the preference the wrong way: corrected replies more likely, praised less."""
    queue = TurnQueue(tmp_path / f"{policy}.sqlite")
    gate = self_gate(queue, policy=policy)
    i = 0
    while (lambda s: s["judged"] - s["heldout"] - s["excluded"])(queue.stats()) < 4:  # nothing claimed yet
        conversation = f"user-c{i}"
        add(queue, f"c{i}a", conversation, "hello", -1, next_state="No, not like that.")
        add(queue, f"c{i}b", conversation, "ahoy", 1)
        i += 1
    assert len(queue.take_batch(8)) >= 4  # the first update's batch
    scorer = Scorer({"ahoy": -1.0, "hello": -1.0})
    baseline = gate.score(scorer)
    scorer.step({"hello": 0.3, "ahoy": -0.1})
    return gate.evaluate(scorer, baseline)


def test_the_default_policy_refuses_a_wrong_way_first_version_the_fixed_share_lets_through(tmp_path) -> None:
    verdict = first_version(tmp_path, "fill_first")
    assert verdict["fallback"] is None and not verdict["promote"] and "heldout" in verdict["failed"]
    assert verdict["heldout_turns"] >= 5 and verdict["checks"]["heldout"]["p_wrong_way"] < 0.05
    assert verdict["holdout"]["policy"]["policy"] == "fill_first" and verdict["holdout"]["early_turns"] >= 5
    # The same conversations and candidate with the hash share alone: too few held-out turns at the
    # first version, which the KL bound and the tasks let through.
    fixed = first_version(tmp_path, "fixed")
    assert fixed["heldout_turns"] < 5 and fixed["fallback"] and fixed["promote"]
    assert "(hold-out policy fixed, share 0.2)" in fixed["fallback"]


def test_too_few_held_out_turns_fall_back_to_kl_and_tasks_and_say_so(tmp_path) -> None:
    gate = self_gate(held_queue(tmp_path, 2, 1))
    scorer = Scorer({"ahoy": -1.0, "hello": -1.0})
    baseline = gate.score(scorer)
    scorer.step({"ahoy": -2.0, "hello": 2.0})  # the wrong way, but on 3 turns nothing can be told
    verdict = gate.evaluate(scorer, baseline)
    assert verdict["promote"] and set(verdict["checks"]) == {"kl", "tasks"}
    assert verdict["score"] is None and verdict["baseline"] is None  # no "eval +0.00" it did not measure
    assert "3 praised or corrected held-out turns, 5 needed" in verdict["fallback"]
    assert "KL bound and the guard tasks only" in verdict["fallback"]
    # Which policy held out, and what it held out early, in the record and its fallback line.
    assert verdict["holdout"]["policy"]["policy"] == "fill_first" and verdict["holdout"]["turns"] == 3
    assert "(hold-out policy fill_first, 0 of the 3 held-out turns held out while the set filled)" in verdict["fallback"]
    # The fallback still refuses what it can see.
    scorer.kl = 3.0
    assert gate.evaluate(scorer, baseline)["failed"] == ["kl"]


def test_the_current_version_is_measured_once_and_new_held_out_turns_join(tmp_path) -> None:
    queue = held_queue(tmp_path, 5, 0)
    gate = self_gate(queue)
    scorer = Scorer({"ahoy": -1.0, "hello": -1.0})
    gate.score(scorer)
    assert scorer.scored == 5
    gate.score(scorer)  # the loop asks before every update: nothing new, nothing scored
    assert scorer.scored == 5
    add(queue, "late", sessions(0.2, True, 6)[5], "hello", -1)
    gate.score(scorer)
    assert scorer.scored == 6
    scorer.version = 1  # promoted: every turn is measured again on the new weights
    gate.score(scorer)
    assert scorer.scored == 12


class StopScorer(Scorer):
    """Per-token log-probs of a reply's words and, apart, of its end-of-turn token after it; and
    the scoring calls it got, as (reply, end_of_turn, tools)."""

    def __init__(self, words: dict[str, float], stop: dict[str, float]) -> None:
        super().__init__(words)
        self.stop = dict(stop)
        self.calls: list[tuple[str, bool, object]] = []

    def mean_token_logprob(self, messages, response, *, base=False, end_of_turn=False, tools=None) -> float:
        self.scored += 1
        self.calls.append((response, end_of_turn, tools))
        n = len(response.split())
        if not end_of_turn:
            return self.logprobs[response]
        return (n * self.logprobs[response] + self.stop[response]) / (n + 1)


def test_a_reply_that_stopped_is_scored_with_its_end_of_turn_and_one_cut_at_the_limit_without(tmp_path) -> None:
    # Feedback asked for short replies: the praised ones are short and stopped; the corrected ones
    # are long and were cut at the limit. The candidate learnt to stop after a short reply (its
    # end-of-turn much likelier there) at a small cost on the words themselves. Scored without the
    # stop, the praised replies seem to fall and the right candidate is refused (what the 0.5B
    # bench saw); scored as served, it is promoted.
    queue = TurnQueue(tmp_path / "q.sqlite")
    queue.hold_out(0.2)
    held = sessions(0.2, True, 10)
    short, long_ = "Use sorted(x).", " ".join(["word"] * 12)
    tool = [{"type": "function", "function": {"name": "ls", "description": "", "parameters": {"type": "object"}}}]
    for i in range(5):
        add(queue, f"p{i}", held[i], short, 1, finish_reason="stop", tools=tool if i == 0 else None)
        add(queue, f"c{i}", held[5 + i], long_, -1, next_state="Too long.", finish_reason="length")
    gate = self_gate(queue, text_checks=False)
    scorer = StopScorer({short: -1.0, long_: -1.0}, {short: -4.0})
    baseline = gate.score(scorer)
    assert (short, True, tool) in scorer.calls and (short, True, None) in scorer.calls
    assert (long_, False, None) in scorer.calls and not any(r == long_ and eot for r, eot, _ in scorer.calls)
    scorer.step({short: -0.05, long_: -0.2})
    scorer.stop[short] = -0.5
    verdict = gate.evaluate(scorer, baseline)
    assert verdict["promote"] and verdict["failed"] == []
    assert verdict["checks"]["heldout_praised"]["value"] > 0
    # A turn from before finish reasons were kept is scored as before: without a stop.
    add(queue, "old", sessions(0.2, True, 11)[10], short, 1)
    scorer.calls.clear()
    gate.score(scorer)
    assert scorer.calls == [(short, False, None)]


# ------------------------------------------------------------------ text checks


def test_checks_are_inferred_from_what_corrections_ask() -> None:
    names = lambda texts: [c.name for c, _ in infer_checks(texts)]
    assert names(["Too long. Just one short sentence, please.", "I just wanted a quick answer, not an essay."]) == ["shorter"]
    assert names(["Can you go into more detail?"]) == ["longer"]
    assert names(["Shorter please", "more detail", "more detail please"]) == ["longer"]  # the more asked wins
    assert names(["Shorter please", "more detail"]) == []  # a tie: neither
    assert names(["Use bullet points", "Answer in French, please"]) == ["bullets", "language_french"]
    assert names(["Auf Deutsch bitte"]) == ["language_german"]
    assert names(["That code won't run.", "Meh."]) == []
    assert has_bullets("- one\n- two") and not has_bullets("one - two")
    assert language_of("Le chat est sur la table et il dort.") == "french"
    assert language_of("The cat is on the table and it sleeps.") == "english"


def test_a_correction_for_shorter_answers_refuses_a_candidate_whose_replies_grow(tmp_path) -> None:
    queue = held_queue(tmp_path, 3, 3, correction="Too long. Just one short sentence, please.")
    gate = self_gate(queue)
    scorer = Scorer({"ahoy": -1.0, "hello": -1.0}, reply=" ".join(["word"] * 20))
    baseline = gate.score(scorer)
    assert scorer.generated == 6  # the current version's replies to the held-out prompts
    scorer.step({"ahoy": 0.2, "hello": -0.2}, reply=" ".join(["word"] * 30))  # log-probs fine, replies longer
    verdict = gate.evaluate(scorer, baseline)
    assert verdict["failed"] == ["text_shorter"] and not verdict["promote"]
    check = verdict["checks"]["text_shorter"]
    assert (check["value"], check["current"], check["limit"], check["asked"]) == (30, 20, pytest.approx(22), 3)
    assert check["changes"] == [10] * 6 and check["p_wrong_way"] == pytest.approx(1 / 64)
    assert "mean words per reply 30.00 vs the current version's 20.00" in refusal_line(verdict)
    assert "paired p = 0.016" in refusal_line(verdict)
    scorer.step({}, reply=" ".join(["word"] * 8))  # shorter: passes
    assert gate.evaluate(scorer, baseline)["promote"]


def test_a_length_record_gives_each_prompts_change_and_a_paired_p_that_does_not_decide(tmp_path) -> None:
    # One reply that grew moves the mean of six past the slack: refused, and the record shows that
    # the other five got shorter (p far from significant), so a reader can tell noise from a trend.
    queue = held_queue(tmp_path, 3, 3, correction="Too long. Just one short sentence, please.")
    gate = self_gate(queue)
    scorer = Scorer({"ahoy": -1.0, "hello": -1.0}, reply=" ".join(["word"] * 12))
    baseline = gate.score(scorer)
    prompts = sorted({s.turn.messages[-1]["content"] for s in queue.heldout_samples(64)})
    assert len(prompts) == 6
    lengths = dict(zip(prompts, [40, 10, 10, 10, 10, 10]))
    scorer.step({}, reply=lambda content: " ".join(["word"] * lengths[content]))
    verdict = gate.evaluate(scorer, baseline)
    check = verdict["checks"]["text_shorter"]
    assert (check["value"], check["limit"]) == (15, pytest.approx(13.2)) and verdict["failed"] == ["text_shorter"]
    assert sorted(check["changes"]) == [-2] * 5 + [28] and check["p_wrong_way"] > 0.3
    assert "paired p = " in refusal_line(verdict)
    lengths.update(dict(zip(prompts, [13, 13, 13, 13, 13, 13])))  # within the slack on every prompt
    verdict = gate.evaluate(scorer, baseline)
    assert verdict["promote"] and verdict["checks"]["text_shorter"]["p_wrong_way"] == pytest.approx(1 / 64)


def test_a_share_check_refuses_two_replies_that_lost_the_form(tmp_path) -> None:
    # Bullets asked for: losing them in two of six replies refuses without a test (see Share).
    queue = held_queue(tmp_path, 3, 3, correction="Use bullet points please.")
    gate = self_gate(queue)
    scorer = Scorer({"ahoy": -1.0, "hello": -1.0}, reply="- one\n- two")
    baseline = gate.score(scorer)
    prompts = sorted({s.turn.messages[-1]["content"] for s in queue.heldout_samples(64)})
    scorer.step({}, reply=lambda content: "one, two" if content in prompts[:2] else "- one\n- two")
    verdict = gate.evaluate(scorer, baseline)
    check = verdict["checks"]["text_bullets"]
    assert (check["value"], check["current"]) == (pytest.approx(4 / 6), 1.0)
    assert verdict["failed"] == ["text_bullets"] and "p_wrong_way" not in check
    scorer.step({}, reply=lambda content: "one, two" if content == prompts[0] else "- one\n- two")
    assert gate.evaluate(scorer, baseline)["promote"]


def test_text_checks_wait_for_enough_held_out_turns(tmp_path) -> None:
    gate = self_gate(held_queue(tmp_path, 1, 2, correction="Shorter please."))
    scorer = Scorer({"ahoy": -1.0, "hello": -1.0})
    baseline = gate.score(scorer)
    assert scorer.generated == 0
    scorer.step({}, reply=" ".join(["word"] * 50))
    verdict = gate.evaluate(scorer, baseline)
    assert verdict["promote"] and verdict["fallback"] and not any(n.startswith("text_") for n in verdict["checks"])


def test_the_gate_reaches_a_relayed_queue(tmp_path, monkeypatch) -> None:
    # A trainer on a Ray node holds the serving machine's queue through the relay: every call the
    # gate makes must be one the serving side answers (relayed.QUEUE_CALLS).
    from collections import Counter
    from types import SimpleNamespace

    from ratchet.online import relayed

    serving = SimpleNamespace(_queue=held_queue(tmp_path, 5, 5, correction="Shorter, please."), answered=Counter())
    monkeypatch.setattr(relayed, "relay_call", lambda relay, request: relayed.StoreGateway._dispatch(serving, request))
    gate = EvaluationHook.from_config(None, gate=GateConfig(), queue=relayed.RelayedQueue(relay=None))
    assert isinstance(gate, SelfHeldOutGate)
    scorer = Scorer({"ahoy": -1.0, "hello": -1.0})
    baseline = gate.score(scorer)
    scorer.step({"ahoy": -0.3, "hello": 0.3})
    assert "heldout" in gate.evaluate(scorer, baseline)["failed"]
    assert {"queue.hold_out", "queue.heldout_samples", "queue.corrections", "queue.holdout"} <= set(serving.answered)
