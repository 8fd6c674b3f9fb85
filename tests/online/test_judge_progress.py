"""A tool call repeated with the same output back is judged 0 by every judge, never +1."""

from __future__ import annotations

import json

import pytest

from ratchet.online.judge import RuleJudge, build_judge, repeats_without_progress
from ratchet.online.records import Turn
from ratchet.online.tool_calls import next_state_text

BASH = {"type": "function", "function": {"name": "bash", "description": "run a command",
                                         "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}


def _call(command: str, call_id: str = "c1") -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}


def _turn(history: list[dict], reply: str) -> Turn:
    messages = [{"role": "user", "content": "fix fahrenheit.py"}, *history]
    return Turn("t", "s", False, "main", messages, reply, [1], [2], [-0.1], 0, finish_reason="tool_calls",
                tools=[BASH])


def _reply(command: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": command}}) + "\n</tool_call>"


def _state(output: str) -> str:
    return next_state_text([{"role": "assistant", "content": ""}, {"role": "tool", "content": output}], "")


ECHO = [_call("echo 'Fizz'"), {"role": "tool", "tool_call_id": "c1", "content": "Fizz"}]


@pytest.mark.parametrize("kind", ["rule", "classifier"])
def test_the_same_call_with_the_same_output_is_not_rewarded_again(kind: str) -> None:
    judge = build_judge(kind, learn="combine")
    first = judge.judge(_turn([], _reply("echo 'Fizz'")), _state("Fizz"))
    assert first.reward == 1
    again = judge.judge(_turn(ECHO, _reply("echo 'Fizz'")), _state("Fizz"))
    assert again.reward == 0 and again.votes == [0] and again.hint is None and again.judge.endswith(":repeat")


def test_what_is_not_a_repeat_without_progress_keeps_its_verdict() -> None:
    judge = build_judge("rule", learn="combine")
    # A new output (the file changed in between): progress, rewarded.
    assert judge.judge(_turn(ECHO, _reply("echo 'Fizz'")), _state("Buzz")).reward == 1
    # Another command.
    assert judge.judge(_turn(ECHO, _reply("python -m pytest -q")), _state("Fizz")).reward == 1
    # A repeated failure stays a failure.
    failing = [_call("pytest -q"), {"role": "tool", "content": "1 failed, 1 passed"}]
    assert judge.judge(_turn(failing, _reply("pytest -q")), _state("1 failed, 1 passed")).reward == -1
    # A person's message after the call is not a tool output.
    assert not repeats_without_progress(_turn(ECHO, _reply("echo 'Fizz'")), "thanks!")


def test_arguments_are_compared_as_json_and_an_earlier_repeat_counts_too() -> None:
    spaced = '<tool_call>\n{"name": "bash", "arguments": {"command":   "echo \'Fizz\'"}}\n</tool_call>'
    assert repeats_without_progress(_turn(ECHO, spaced), _state("Fizz"))
    # A, B, A: the third call repeats the first with the first's output.
    history = [*ECHO, _call("ls", "c2"), {"role": "tool", "tool_call_id": "c2", "content": "fahrenheit.py"}]
    assert repeats_without_progress(_turn(history, _reply("echo 'Fizz'")), _state("Fizz"))
    # Without tools offered, a reply makes no calls.
    bare = Turn("t", "s", False, "main", [{"role": "user", "content": "x"}, *ECHO], _reply("echo 'Fizz'"), [1], [2],
                [-0.1], 0)
    assert not repeats_without_progress(bare, _state("Fizz"))
    assert RuleJudge().judge(bare, _state("Fizz")).reward == 1  # the guard is build_judge's, on every kind
