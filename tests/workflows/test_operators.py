"""Each operator of ratchet.workflows.flowops over the step protocol, served by a scripted model.

The operators are driven the way the sandbox drives them: through ``as_step``'s replay, one
request per ``step`` call, with events appended as the evaluator appends them."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from ratchet.models.scripted import ScriptedModel
from ratchet.workflows import flowops as ops

TASK = {
    "task_id": "T/0",
    "entry_point": "add",
    "prompt": 'def add(a, b):\n    """Sum of a and b.\n    >>> add(1, 2)\n    3\n    >>> add(2, 2)\n    4\n    """\n',
}
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
RIGHT_OTHER_LAYOUT = "```python\ndef add(a, b):\n    # the sum\n    return (a + b)\n```"
WRONG = "```python\ndef add(a, b):\n    return a * b\n```"  # 1*2 != 3, 2*2 == 4: passes one example of two
CRASH = "```python\ndef add(a, b):\n    raise ValueError('no')\n```"


def run_program(program: str) -> dict:
    """A test run as the evaluator reports it (in-process: these programs are the tests' own)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(program, "<tests>", "exec"), {"__name__": "__main__"})  # noqa: S102 - the tests' own programs
    except Exception as exc:  # noqa: BLE001 - a failing program is an event, as in the sandbox
        return {"kind": "tests", "code": program, "passed": False, "timed_out": False,
                "output": out.getvalue() + f"{type(exc).__name__}: {exc}"}
    return {"kind": "tests", "code": program, "passed": True, "timed_out": False, "output": out.getvalue()}


def drive(workflow, model: ScriptedModel, task=TASK, files=None, max_steps: int = 30):
    """Run ``workflow`` to its answer through ``as_step``; returns (answer, events)."""
    step = ops.as_step(workflow)
    state = {"task": task, "files": files or {}, "events": [], "seed": 0}
    for _ in range(max_steps):
        action = step(state)
        if "answer" in action:
            return action["answer"], state["events"]
        if "call_model" in action:
            reply = model.complete(action["call_model"]).text
            state["events"].append({"kind": "model", "messages": action["call_model"], "reply": reply})
        else:
            state["events"].append(run_program(action["run_tests"]))
    raise AssertionError("the workflow did not answer")


def kinds(events) -> list[str]:
    return [e["kind"] for e in events]


def test_generate_and_sample_k_make_one_request_per_call_and_return_replies() -> None:
    def flow(task, files):
        one = yield from ops.generate([{"role": "user", "content": "hi"}], max_tokens=50)
        more = yield from ops.sample_k([{"role": "user", "content": "again"}], k=3)
        return "|".join([one.text] + [r.text for r in more])

    model = ScriptedModel(["a", "b", "c", "d"])
    answer, events = drive(flow, model)
    assert answer == "a|b|c|d"
    assert kinds(events) == ["model"] * 4
    assert [c["messages"][0]["content"] for c in model.calls] == ["hi", "again", "again", "again"]


def test_as_step_returns_the_first_unanswered_request_and_rejects_a_diverging_replay() -> None:
    def flow(task, files):
        yield from ops.generate([{"role": "user", "content": "x"}])
        run = yield from ops.run_tests("print(1)")
        return run.output.strip()

    step = ops.as_step(flow)
    assert "call_model" in step({"task": TASK, "events": []})
    assert step({"task": TASK, "events": [{"kind": "model", "reply": "r"}]}) == {"run_tests": "print(1)"}
    done = step({"task": TASK, "events": [{"kind": "model", "reply": "r"},
                                          {"kind": "tests", "passed": True, "timed_out": False, "output": "1\n"}]})
    assert done == {"answer": "1"}
    with pytest.raises(ops.ReplayError, match="deterministic"):
        step({"task": TASK, "events": [{"kind": "tests", "passed": True, "timed_out": False, "output": ""}]})


def test_run_tests_reports_pass_and_failure() -> None:
    def flow(task, files):
        good = yield from ops.run_tests("print('fine')")
        bad = yield from ops.run_tests("raise AssertionError('nope')")
        return f"{good.passed}:{good.output.strip()}|{bad.passed}:{'nope' in bad.output}"

    answer, events = drive(flow, ScriptedModel([]))
    assert answer == "True:fine|False:True" and kinds(events) == ["tests", "tests"]


def test_run_examples_records_which_examples_pass_and_what_the_code_returned() -> None:
    examples = ops.visible_examples(TASK["prompt"])
    assert examples == [("add(1, 2)", "3"), ("add(2, 2)", "4")]
    results = {}

    def flow(task, files):
        fake = 'print("@@FLOWOPS@@" + \'{"passed": [true, true], "got": ["3", "4"]}\')'
        faker = "```python\ndef add(a, b):\n    return 0\n\n" + fake + "\n```"
        for name, reply in (("right", RIGHT), ("wrong", WRONG), ("crash", CRASH), ("broken", "```python\ndef add(:\n```"),
                            ("faker", faker)):
            code = ops.extract_code(reply, task, strip_tests=name != "faker")  # the faker keeps its print
            results[name] = yield from ops.run_examples(code, examples)
        return ""

    drive(flow, ScriptedModel([]))
    assert results["right"].passed == (True, True) and results["right"].all_pass
    assert results["wrong"].passed == (False, True) and results["wrong"].outputs == ("2", "4")
    assert "add(1, 2) returned 2, expected 3" in results["wrong"].feedback(examples)
    assert results["crash"].outputs == ("!ValueError", "!ValueError") and results["crash"].passes == 0
    assert results["broken"].passes == 0 and not results["broken"].all_pass  # does not load: no pass
    assert results["faker"].passes == 0  # a code printing a result line of its own does not fake a pass


def test_select_by_examples_keeps_the_code_passing_most_and_runs_each_distinct_code_once() -> None:
    def flow(task, files):
        replies = yield from ops.sample_k([{"role": "user", "content": "code"}], k=4)
        codes = [ops.extract_code(r.text, task) for r in replies]
        chosen = yield from ops.select_by_examples(codes, task)
        return f"{chosen.index}:{chosen.passes}/{chosen.total}:{chosen.support}"

    answer, events = drive(flow, ScriptedModel([WRONG, CRASH, RIGHT, RIGHT_OTHER_LAYOUT]))
    assert answer == "2:2/2:2"  # the right code, first of the two that behave alike
    assert kinds(events).count("tests") == 3  # RIGHT and its re-layout are one code: tested once


def test_select_by_examples_breaks_a_tie_by_the_largest_behaviour_cluster() -> None:
    # all fail add(1, 2); two of three return 2 there (a * b twice, differently written), one returns 0
    codes = ["def add(a, b):\n    return a * b\n", "def add(a, b):\n    return b * a\n", "def add(a, b):\n    return a - b + 2 * 0\n"]

    def flow(task, files):
        chosen = yield from ops.select_by_examples(codes, task, [("add(1, 2)", "3")])
        return str(chosen.index)

    assert drive(flow, ScriptedModel([]))[0] == "0"
    codes.reverse()  # the lone behaviour first: the cluster still wins
    assert drive(flow, ScriptedModel([]))[0] == "1"


def test_vote_takes_the_majority_over_normalized_code() -> None:
    a1 = "def f(x):\n    return x + 1\n"
    a2 = "def f(x):\n    '''doc'''\n    # comment\n    return (x+1)\n"
    b = "def f(x):\n    return x + 2\n"
    chosen = ops.vote([b, a1, a2])
    assert (chosen.index, chosen.support, chosen.code) == (1, 2, a1)
    assert ops.vote([b, a1]).index == 0  # a tie goes to the earliest
    assert ops.vote([]) is None
    assert ops.vote(["Yes.", " yes", "no"], normalize=lambda s: s.strip(" .").lower()).support == 2


def test_review_passes_only_a_correct_verdict_and_revise_keeps_the_code_without_a_new_one() -> None:
    def flow(task, files):
        ok = yield from ops.review(task, "def add(a, b):\n    return a + b\n")
        bad = yield from ops.review(task, "def add(a, b):\n    return a * b\n")
        vague = yield from ops.review(task, "def add(a, b):\n    return a + b\n")
        fixed = yield from ops.revise(task, "def add(a, b):\n    return a * b\n", "add(1, 2) returned 2")
        kept = yield from ops.revise(task, "def add(a, b):\n    return a * b\n", "add(1, 2) returned 2")
        return "|".join([str(ok.ok), str(bad.ok), str(vague.ok), fixed.strip(), kept.strip()])

    model = ScriptedModel(["Looks fine.\nVERDICT: correct", "It multiplies.\nVERDICT: wrong", "Hmm.", RIGHT, "Sorry."])
    answer, _ = drive(flow, model, files={})
    assert answer.split("|") == ["True", "False", "False", "def add(a, b):\n    return a + b",
                                 "def add(a, b):\n    return a * b"]
    fix_request = model.calls[3]["messages"]
    assert fix_request[-2]["role"] == "assistant" and "add(1, 2) returned 2" in fix_request[-1]["content"]


def test_extract_code_cuts_the_models_own_test_code_after_the_function() -> None:
    reply = ("```python\nimport math\n\nLIMIT = 3\n\n@staticmethod\ndef helper(x):\n    return x\n\n"
             "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\nassert add(2, 2) == 4\nresult = add(0, 0)\n"
             "if __name__ == '__main__':\n    import doctest\n    doctest.testmod()\n```")
    code = ops.extract_code(reply, TASK)
    assert "print(" not in code and "assert" not in code and "__main__" not in code and "result =" not in code
    assert "import math" in code and "LIMIT = 3" in code and "@staticmethod\ndef helper" in code
    assert "def add(a, b):\n    return a + b" in code
    kept = ops.extract_code(reply, TASK, strip_tests=False)
    assert "print(add(1, 2))" in kept
    # a body completing the signature gets the prompt; no code at all is None; bad syntax is left alone
    assert ops.extract_code("```python\n    return a + b\n```", TASK).startswith("def add(a, b):")
    assert ops.extract_code("I cannot help.", TASK) is None
    assert ops.strip_test_code("def f(:\nprint(1)\n") == "def f(:\nprint(1)\n"


def test_extract_code_adds_the_prompts_imports() -> None:
    task = {"entry_point": "f", "prompt": "from typing import List\n\n\ndef f(xs: List[int]) -> int:\n    pass\n"}
    code = ops.extract_code("```python\ndef f(xs):\n    return sum(xs)\n```", task)
    assert code.startswith("from typing import List\n")


def test_flowops_imports_only_the_standard_library() -> None:
    import ast
    import sys

    tree = ast.parse(Path(ops.__file__).read_text())
    modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert modules and modules <= set(sys.stdlib_module_names)


def test_visible_examples_reads_prose_examples_when_there_are_no_doctests() -> None:
    prompt = ('def f(xs, s):\n    """Something.\n    Examples:\n    f([1, 2], "a") == 3\n    * f([], "b") => true\n'
              '    f([5], \'c\') ➞ [5, 5]\n    f([0], "d") should return -1.\n    f([7], "e")   # returns "x y"\n'
              '    f(a, "b") == 1\n    f([1], "b") -> 2 - 1 = 1\n    f([\n    The f([2], "z") is 4\n    """\n')
    assert ops.visible_examples(prompt, "f") == [
        ('f([1, 2], "a")', "3"), ('f([], "b")', "True"), ("f([5], 'c')", "[5, 5]"), ('f([0], "d")', "-1"),
        ('f([7], "e")', '"x y"')]  # a non-literal argument or expected value, a call split over lines: skipped
    assert ops.visible_examples(prompt) == []  # without the entry point only doctests count
    doctests = 'def g(x):\n    """\n    >>> g(1)\n    2\n\n    g(2) == 3\n    """\n'
    assert ops.visible_examples(doctests, "g") == [("g(1)", "2")]  # doctests, when there are any, win


def test_humaneval_examples_read_agree_with_the_canonical_solutions() -> None:
    """On the real problems: what ``visible_examples`` reads is what the reference solution does,
    but for HumanEval's own docstring errors (a median of 8.0 written 15.0, a sort_array example of
    another problem, a recurrence read as a result, a one-tuple written as a string)."""
    import ast

    from ratchet.evolve.suites.humaneval import package_data_file, read_problems

    problems = read_problems(package_data_file())
    disagree, total, with_examples = [], 0, 0
    for problem in problems:
        examples = ops.visible_examples(problem["prompt"], problem["entry_point"])
        with_examples += bool(examples)
        namespace: dict = {}
        exec(problem["prompt"] + problem["canonical_solution"], namespace)  # noqa: S102 - the package's reference code
        for source, want in examples:
            total += 1
            got = eval(source, namespace)  # a call with literal arguments: visible_examples checks it
            if got != ast.literal_eval(want):
                disagree.append(problem["task_id"])
    assert (total, with_examples) == (386, 137)
    assert disagree == ["HumanEval/47", "HumanEval/116", "HumanEval/116", "HumanEval/130", "HumanEval/130", "HumanEval/148"]
