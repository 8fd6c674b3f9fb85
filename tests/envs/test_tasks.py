"""Task suites: the shipped Python suite judged out of process, single- and multi-turn."""

import json

import pytest

from ratchet.contracts import RatchetError
from ratchet.envs import list_envs, make
from ratchet.envs import tasks as task_suites
from ratchet.envs.answers import extract_code
from ratchet.envs.tasks import load_suite, python_tests
from ratchet.sandbox import isolation_report
from ratchet.sandbox.programs import ProgramResult

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


def test_a_suite_by_absolute_or_relative_path_keeps_its_path(tmp_path, monkeypatch) -> None:
    suite = tmp_path / "mine.jsonl"
    suite.write_text(json.dumps({"id": "echo", "prompt": "say hi", "metadata": {"kind": "text"},
                                 "verifier": {"command": ["{python}", "-c", "pass"]}}) + "\n")
    env = make(f"tasks:{suite}")  # the leading slash of an absolute path must survive the id's parsing
    assert env.reset(0).text.startswith("say hi")
    monkeypatch.chdir(tmp_path)
    assert make("tasks:mine.jsonl").reset(0).text.startswith("say hi")
    with pytest.raises(RatchetError, match="not found"):
        make(f"tasks:{tmp_path / 'missing.jsonl'}")
    with pytest.raises(RatchetError, match="not a .jsonl file"):
        make(f"tasks:{tmp_path}")


def test_python_tests_runs_the_candidate_code_in_the_sandbox(tmp_path, monkeypatch) -> None:
    task = {"metadata": {"tests": "assert add(2, 3) == 5"}}
    assert python_tests(fenced(GOOD["add"]), task) == (True, "passed")
    # printing the pass marker and exiting cleanly before the asserts is no pass
    ok, reason = python_tests(fenced("import sys\nprint('ALL TESTS PASSED')\nsys.exit(0)"), task)
    assert not ok and "SystemExit" in reason
    ran = []
    monkeypatch.setattr(task_suites, "run_once", lambda program, timeout_s: ran.append(program) or
                        ProgramResult(False, "stopped"))
    assert python_tests(fenced(GOOD["add"]), task) == (False, "stopped") and "assert add(2, 3) == 5" in ran[0]


@pytest.mark.skipif(not isolation_report()["filesystem_read_only"], reason="needs a read-only sandbox filesystem")
def test_python_tests_code_cannot_write_to_the_machine(tmp_path) -> None:
    probe = tmp_path / "probe.txt"
    ok, _ = python_tests(fenced(f"open({str(probe)!r}, 'w').write('x')\n" + GOOD["add"]),
                         {"metadata": {"tests": "assert add(2, 3) == 5"}})
    assert not ok and not probe.exists()
