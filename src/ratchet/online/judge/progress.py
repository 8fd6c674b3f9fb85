"""A tool call that repeats an earlier one and gets the same output back made no progress.

Every judge reads a tool's output by whether it reports an error, so a successful call is +1. An
agent that runs ``echo 'Fizz'`` eight times in a row (measured: the 0.5B under mini-swe-agent's
tool-call config, ``bench/results/miniswe_toolcalls.md``) would be rewarded eight times for doing
nothing, and Binary RL would teach it to loop. :class:`RepeatGuard` wraps any judge: a turn whose
reply makes exactly the calls of an earlier reply in the same conversation, and whose tool output
is exactly what that earlier call got, is judged 0 (no reward, no hint) instead of +1. A repeated
call that fails keeps its -1; a repeated call with a new output (a file changed in between) keeps
its verdict: only a repeat that learned nothing new is neutralised.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ratchet.online.judge.rules import is_tool_output
from ratchet.online.records import Judgement, Turn
from ratchet.online.tool_calls import Tool, split_reply

Calls = tuple[tuple[str, str], ...]


def _canonical(arguments: Any) -> str:
    """Arguments as sorted JSON, so ``{"a":1,"b":2}`` and ``{"b": 2, "a": 1}`` are one call."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return arguments.strip()
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def _message_calls(message: Mapping[str, Any]) -> Calls:
    return tuple((str((c.get("function") or {}).get("name")), _canonical((c.get("function") or {}).get("arguments")))
                 for c in message.get("tool_calls") or [])


def _reply_calls(turn: Turn) -> Calls:
    tools = [Tool(t["function"]["name"]) for t in turn.tools if isinstance(t, dict) and t.get("function")]
    if not tools:
        return ()
    return tuple((c.name, _canonical(c.arguments)) for c in split_reply(turn.response_text, tools).calls)


def _earlier_outcomes(messages: Sequence[Mapping[str, Any]]) -> set[tuple[Calls, str]]:
    """(calls, what followed them) for every earlier assistant reply that made calls, what followed
    rendered as the judge reads a next state (``role: content`` lines)."""
    out = set()
    assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"] + [len(messages)]
    for i, end in zip(assistants, assistants[1:], strict=False):
        calls = _message_calls(messages[i])
        if calls:
            follow = "\n".join(f"{m.get('role')}: {m.get('content') or ''}" for m in messages[i + 1:end])
            out.add((calls, follow.strip()))
    return out


def repeats_without_progress(turn: Turn, next_state: str) -> bool:
    """Whether ``turn``'s reply repeats calls made earlier in its conversation and ``next_state``
    (the tool's output) is exactly what those calls got then."""
    if not is_tool_output(next_state):
        return False
    calls = _reply_calls(turn)
    return bool(calls) and (calls, next_state.strip()) in _earlier_outcomes(turn.messages)


class RepeatGuard:
    """Any judge, with a successful repeat of an earlier call and its output judged 0."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name

    def judge(self, turn: Turn, next_state: str) -> Judgement:
        verdict = self.inner.judge(turn, next_state)
        if verdict.reward > 0 and repeats_without_progress(turn, next_state):
            return replace(verdict, reward=0, votes=[0], hint=None, judge=f"{verdict.judge}:repeat")
        return verdict
