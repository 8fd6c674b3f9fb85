"""The coding workflow: generate -> run the visible examples -> repair, with the playbook's lessons
in its system prompt (``playbook.md``, the surface the curator proposer evolves).

The lessons are chosen by a context skill, ``skills/lessons/select.py`` (``select(playbook, task,
budget_tokens) -> str``, see ``ratchet.context.skills``), within PLAYBOOK_BUDGET_TOKENS: the
selection code is a surface too, which a proposer may rewrite and the gate judges.

It runs in a sandbox as a step function. Each call gets ``state``:
  state["task"]   {"task_id", "prompt", "entry_point"}   the problem (never its hidden tests)
  state["files"]  this harness's text files, e.g. "prompts/system.md"
  state["events"] what happened so far: {"kind": "model", "messages", "reply"} and
                  {"kind": "tests", "code", "passed", "timed_out", "output"}
and returns one action: {"call_model": messages}, {"run_tests": program} or {"answer": code}.
The evaluator makes the model call or runs the program (in another sandbox) and calls step again.
"""

import doctest
import re

MAX_REPAIRS = 1
PLAYBOOK_BUDGET_TOKENS = 300

try:  # the context skill skills/lessons/ (its select.py is a module of this candidate)
    from skills.lessons.select import select as select_lessons
except ImportError:
    select_lessons = None

QUOTES = '"' * 3
FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def step(state):
    task, events = state["task"], state["events"]
    replies = [e for e in events if e["kind"] == "model"]
    tests = [e for e in events if e["kind"] == "tests"]
    system = state["files"].get("prompts/system.md", "") + lessons(state["files"], task)
    if not replies:
        return {"call_model": [{"role": "system", "content": system},
                               {"role": "user", "content": generate_prompt(task)}]}
    code = solution(replies[-1]["reply"], task)
    examples = visible_examples(task["prompt"])
    if code is not None and examples and len(tests) < len(replies):
        return {"run_tests": code + "\n\n" + examples_program(examples)}
    failed = code is None or (tests and len(tests) == len(replies) and not tests[-1]["passed"])
    if failed and len(replies) <= MAX_REPAIRS:
        problem = "Your reply had no ```python code block." if code is None else (
            "Running the examples from the docstring gave:\n" + tests[-1]["output"][-1500:])
        return {"call_model": [{"role": "system", "content": system},
                               {"role": "user", "content": generate_prompt(task)},
                               {"role": "assistant", "content": replies[-1]["reply"]},
                               {"role": "user", "content": problem + "\nFix the function and reply with "
                                "the complete corrected code in one ```python block."}]}
    codes = [c for c in (solution(r["reply"], task) for r in replies) if c is not None]
    return {"answer": codes[-1] if codes else ""}  # the latest code there is


def lessons(files, task):
    """What the context skill chooses from the playbook for this task; nothing without a playbook
    or without the skill (a proposer may delete or rewrite it: the gate judges the result)."""
    playbook = files.get("playbook.md", "")
    if select_lessons is None or not playbook.strip():
        return ""
    return select_lessons(playbook, task["prompt"], PLAYBOOK_BUDGET_TOKENS)


def generate_prompt(task):
    return ("Complete this Python function. Reply with the complete function in one ```python block.\n\n"
            "```python\n" + task["prompt"] + "```")


def solution(reply, task):
    """The code of a reply, made a whole program that defines the entry point; None if there is none."""
    blocks = FENCE.findall(reply)
    code = max(blocks, key=len) if blocks else None
    if code is None and re.search(r"^def \w+\(", reply, re.MULTILINE):
        code = reply
    if code is None:
        return None
    if not re.search(r"^\s*def\s+" + re.escape(task["entry_point"]) + r"\s*\(", code, re.MULTILINE):
        code = task["prompt"] + code  # a body completing the signature
    imports = [line for line in task["prompt"].splitlines() if re.match(r"(import|from)\s", line)]
    missing = [line for line in imports if line not in code]
    return "\n".join(missing + [code.rstrip()]) + "\n"


def visible_examples(prompt):
    """(source, expected output) pairs of the docstring's ``>>>`` examples."""
    try:
        found = doctest.DocTestParser().get_examples(prompt)
    except ValueError:
        return []
    pairs = []
    for example in found:
        # the docstring's closing quotes follow the last example's output directly
        lines = [line for line in example.want.splitlines() if line.strip() not in (QUOTES, QUOTES.replace('"', "'"))]
        if "\n".join(lines).strip():
            pairs.append((example.source.strip(), "\n".join(lines).strip()))
    return pairs


def examples_program(examples):
    """A program that runs every example and fails listing the wrong ones."""
    lines = ["import ast as _ast", "_wrong = []"]
    for source, want in examples:
        lines.append(f"_check({source!r}, {want!r})")
    lines.append("if _wrong:\n    raise AssertionError('wrong results:\\n' + '\\n'.join(_wrong))")
    lines.append("print('all %d examples pass')" % len(examples))
    helper = (
        "def _check(source, want):\n"
        "    try:\n"
        "        got = eval(source)\n"
        "    except Exception as exc:\n"
        "        _wrong.append(f'{source} raised {type(exc).__name__}: {exc} (expected {want})')\n"
        "        return\n"
        "    try:\n"
        "        same = got == _ast.literal_eval(want)\n"
        "    except (ValueError, SyntaxError):\n"
        "        same = repr(got) == want\n"
        "    if not same:\n"
        "        _wrong.append(f'{source} returned {got!r}, expected {want}')\n"
    )
    return "\n".join(lines[:2] + [helper] + lines[2:]) + "\n"

