"""Task suites: the shipped Python suite judged out of process, single- and multi-turn."""

import json

import pytest

from ratchet.contracts import RatchetError
from ratchet.envs import list_envs, make
from ratchet.envs.answers import extract_code
from ratchet.envs.tasks import load_suite

GOOD = {
    "add": "def add(a, b):\n    return a + b",
    "reverse_words": "def reverse_words(s):\n    return ' '.join(reversed(s.split()))",
    "is_palindrome": "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]",
    "fizzbuzz": "def fizzbuzz(n):\n    return ['FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else str(i) for i in range(1, n + 1)]",
    "count_vowels": "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)",
    "running_max_two_turns": "def running_max(xs):\n    out = []\n    for x in xs:\n        out.append(x if not out else max(out[-1], x))\n    return out",
}


def fenced(code: str) -> str:
    return f"Here you go:\n```python\n{code}\n```\n"


def test_every_shipped_task_passes_a_correct_answer_and_fails_a_wrong_one() -> None:
    env = make("tasks/python-basics")
    assert env.num_players == 1 and len(env.tasks) == 6
    seen = set()
    for seed in range(len(env.tasks)):
        obs = env.reset(seed)
        task = env.tasks[seed]
        seen.add(task.id)
        for turn in range(len(task.turns) - 1):
            mid = env.step(fenced("def running_max(xs):\n    return xs"))
            assert not mid.done and mid.observation.text == task.turns[turn + 1]
        result = env.step(fenced(GOOD[task.id]))
        assert result.done and result.legal and result.rewards == {0: 1.0}, (task.id, result.info)
        env.reset(seed)
        for _ in range(len(task.turns) - 1):
            env.step("no idea")
        wrong = env.step(fenced("def nothing():\n    return 0"))
        assert wrong.done and wrong.legal and wrong.rewards == {0: 0.0}, task.id
        assert wrong.info["verdict"]["ok"] is False
    assert seen == set(GOOD)
    assert obs.text


def test_answer_without_code_is_the_illegal_move() -> None:
    env = make("tasks/python-basics")
    env.reset(0)
    result = env.step("I think you should add them.")
    assert result.done and not result.legal and "code" in result.illegal_reason


def test_verifier_timeout_and_crash_do_not_escape(tmp_path) -> None:
    suite = tmp_path / "slow.jsonl"
    suite.write_text(
        json.dumps({"id": "loop", "prompt": "p", "timeout_s": 2,
                    "verifier": {"command": ["{python}", "-c", "while True: pass"]}}) + "\n"
        + json.dumps({"id": "crash", "prompt": "p", "metadata": {"kind": "text"},
                      "verifier": {"command": ["{python}", "-c", "import sys; print(open(sys.argv[1]).read()); sys.exit(3)", "{answer_file}"]}}) + "\n"
    )
    env = make(f"tasks/{suite}")
    env.reset(0)
    slow = env.step(fenced("x = 1"))
    assert slow.rewards == {0: 0.0} and "timed out" in slow.info["verdict"]["output"]
    env.reset(1)
    crash = env.step("plain text answer")
    assert crash.legal and crash.rewards == {0: 0.0} and "plain text answer" in crash.info["verdict"]["output"]


def test_bad_suite_lines_name_the_line(tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "prompt": "p"}\n')
    with pytest.raises(RatchetError, match="bad.jsonl:1"):
        load_suite(bad)


def test_extract_code_and_listing() -> None:
    assert extract_code("```py\nx = 1\n```\nand\n```python\ny = 2\n```") == "y = 2\n"
    assert extract_code("no code") is None
    assert "tasks/python-basics" in [i.id for i in list_envs("tasks")]
