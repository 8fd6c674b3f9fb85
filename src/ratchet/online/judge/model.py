"""The model judge: a process reward model.

:class:`ModelJudge` — any :class:`ratchet.contracts.Model` prompted with
  the turn and its next state, ``votes`` samples at temperature 0.6, the verdict in ``\\boxed{}``;
  the majority wins, a tie gives 0, unparseable votes are ignored. In hint mode (on-policy
  distillation) the judge answers ``\\boxed{1}`` plus a hint between [HINT_START] and [HINT_END],
  or ``\\boxed{-1}`` when the next state holds nothing useful; the longest hint among positive
  votes is kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ratchet.contracts import Model
from ratchet.online.records import Judgement, Turn


def majority(votes: Sequence[int | None]) -> int:
    """The most common parseable vote; 0 on a tie between the most common values or no votes."""
    counted = Counter(v for v in votes if v is not None)
    if not counted:
        return 0
    ranked = counted.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return 0
    return int(ranked[0][0])


_BOXED = re.compile(r"\\boxed\{\s*([+-]?\d+)\s*\}")
_HINT = re.compile(r"\[HINT_START\](.*?)\[HINT_END\]", re.DOTALL)


_BARE = re.compile(r"^\s*([+-]?[01])\s*$")


def parse_vote(text: str) -> int | None:
    """The LAST ``\\boxed{1|-1|0}`` of an answer; None when there is none or it is out of range.

    Small judges sometimes drop the box and answer a bare ``-1`` on a line of its own (first or
    last line); that is read too. Anything else is unparseable and ignored by the vote.
    """
    found = _BOXED.findall(text or "")
    if not found:
        lines = [line for line in (text or "").strip().splitlines() if line.strip()]
        bare = [m.group(1) for line in (lines[:1] + lines[-1:]) if (m := _BARE.match(line))]
        if not bare:
            return None
        found = bare[-1:]
    value = int(found[-1])
    return value if value in (-1, 0, 1) else None


def parse_hint(text: str) -> str | None:
    match = _HINT.search(text or "")
    hint = match.group(1).strip() if match else ""
    return hint or None


# ---------------------------------------------------------------------------------------------
# Model judge (process reward model)
# ---------------------------------------------------------------------------------------------

PRM_SYSTEM = """You are a process reward model. You see one turn of a conversation between a user and an AI \
assistant: the conversation so far, the assistant's reply, and what happened NEXT (the user's next message \
or the tool's next output). Judge from the next state whether the reply was good:
- \\boxed{1}: the user moves on, thanks the assistant, or the tool call succeeded.
- \\boxed{-1}: the user asks to redo or retry, corrects the assistant ("no, I meant ..."), rephrases the \
same request, or the tool/environment reports an error. A change request IS negative feedback.
- \\boxed{0}: the next state says nothing about the reply's quality.
Think briefly, then end with exactly one \\boxed{} verdict."""

HINT_SYSTEM = """You help an AI assistant learn from hindsight. You see one turn of a conversation: the \
conversation so far, the assistant's reply, and what happened NEXT (the user's next message or a tool's \
output). If the next state reveals something the assistant should have done differently (a preference, a \
correction, a missing detail), answer \\boxed{1} and write a hint of 1-3 sentences, addressed to the \
assistant, between [HINT_START] and [HINT_END]. If it reveals nothing useful, answer \\boxed{-1} and no hint."""


def _transcript(messages: Sequence[dict[str, Any]], limit: int = 6000) -> str:
    lines = [f"[{m.get('role', 'user')}] {m.get('content') or ''}" for m in messages]
    text = "\n".join(lines)
    return text[-limit:]


def judge_prompt(system: str, turn: Turn, next_state: str) -> list[dict[str, str]]:
    user = (
        f"## Conversation so far\n{_transcript(turn.messages)}\n\n"
        f"## Assistant's reply\n{turn.response_text}\n\n"
        f"## Next state\n{next_state}\n\n"
        "End your answer with the verdict in \\boxed{}."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


class ModelJudge:
    """m votes of a chat model; ``rewards`` and/or ``hints`` per the learning mode."""

    def __init__(
        self,
        model: Model,
        *,
        votes: int = 3,
        temperature: float = 0.6,
        max_tokens: int = 256,
        rewards: bool = True,
        hints: bool = True,
        seed: int = 0,
    ) -> None:
        self.model = model
        self.name = f"model:{getattr(model, 'name', 'judge')}"
        self.votes = votes
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.rewards = rewards
        self.hints = hints
        self.seed = seed

    def _ask(self, system: str, turn: Turn, next_state: str) -> list[str]:
        prompt = judge_prompt(system, turn, next_state)
        answers = []
        for i in range(self.votes):
            try:
                completion = self.model.complete(
                    prompt, temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed + i
                )
                answers.append(completion.text)
            except Exception as exc:  # a failed vote is an unparseable vote, not a crashed judge
                answers.append(f"(judge call failed: {exc})")
        return answers

    def judge(self, turn: Turn, next_state: str) -> Judgement:
        votes: list[int] = []
        reward = 0
        if self.rewards:
            parsed = [parse_vote(a) for a in self._ask(PRM_SYSTEM, turn, next_state)]
            votes = [v for v in parsed if v is not None]
            reward = majority(parsed)
        hint = None
        if self.hints:
            candidates = []
            for answer in self._ask(HINT_SYSTEM, turn, next_state):
                if parse_vote(answer) == 1 and (h := parse_hint(answer)) and len(h) > 10:
                    candidates.append(h)
            hint = max(candidates, key=len) if candidates else None
        return Judgement(turn.turn_id, reward, votes, hint, next_state, self.name)
