"""The opening: what the runtime puts under the task before the first model call."""

from __future__ import annotations

from ratchet.runtime import ContextConfig, PermissionPolicy
from ratchet.runtime.config import FileTreeConfig, TaskFilesConfig

from .conftest import tool_reply

BOTH = ContextConfig(opening=[FileTreeConfig(), TaskFilesConfig()])


def first_message(agent, task: str) -> str:
    agent.run(task)
    return agent.messages[1]["content"]


def make_repo(workdir):
    (workdir / "pkg").mkdir()
    (workdir / "pkg" / "shapes.py").write_text("class Square:\n    def area(self):\n        return 4\n")
    (workdir / "tests").mkdir()
    (workdir / "tests" / "test_shapes.py").write_text("from pkg.shapes import Square\n\ndef test_area():\n    assert Square().area() == 9\n")
    (workdir / "tests" / "test_other.py").write_text("def test_x():\n    assert True\n")


def test_named_paths_defined_names_and_their_tests_are_shown(make_agent, workdir):
    make_repo(workdir)
    text = first_message(make_agent([tool_reply("submit", summary="s")], context=BOTH),
                         "Square.area() is wrong; and calc.py has add()")
    task, tree, shown = text.split("\n\n", 2)
    assert task == "Square.area() is wrong; and calc.py has add()"
    assert tree.splitlines()[0] == "Files in the repository:" and "pkg/shapes.py" in tree and "notes.txt" in tree
    order = [line for line in shown.splitlines() if line.startswith("==>")]
    assert order == ["==> calc.py <==", "==> pkg/shapes.py <==", "==> tests/test_shapes.py <=="]
    assert "     3\t        return 4" in shown and "test_other" not in shown
    assert shown.endswith("\n\n" + TaskFilesConfig().closing)


def test_nothing_is_shown_without_openings_or_when_the_policy_hides_it(make_agent, workdir):
    make_repo(workdir)
    plain = first_message(make_agent([tool_reply("submit", summary="s")], context=ContextConfig()), "fix calc.py")
    assert plain == "fix calc.py"
    hidden = make_agent([tool_reply("submit", summary="s")], context=BOTH,
                        policy=PermissionPolicy(readable=["notes.txt", "pkg*"]))
    text = first_message(hidden, "fix calc.py and Square.area()")
    assert "calc.py" not in text.split("\n\n", 1)[1] and "==> pkg/shapes.py <==" in text
    assert "tests/" not in text


def test_files_past_the_budget_are_named_not_shown(make_agent, workdir):
    (workdir / "big.py").write_text("x = 1\n" * 400)
    agent = make_agent([tool_reply("submit", summary="s")],
                       context=ContextConfig(opening=[TaskFilesConfig(max_chars=300, closing="")]))
    text = first_message(agent, "big.py and calc.py")
    assert "==> calc.py <==" in text and "==> big.py" not in text
    assert text.rstrip().endswith("Not shown (too long; use read): big.py")


def test_the_shipped_workspace_opens_with_the_tree_and_the_task_files(make_agent, workdir):
    from ratchet.runtime import HarnessWorkspace

    agent = make_agent([tool_reply("submit", summary="s")], context=HarnessWorkspace().context_config())
    text = first_message(agent, "add() in calc.py subtracts")
    assert "Files in the repository:\ncalc.py\nnotes.txt" in text and "==> calc.py <==" in text


def test_test_output_runs_the_tasks_command_once_and_shows_its_tail(make_agent, workdir):
    from ratchet.runtime.config import TestOutputConfig

    make_repo(workdir)
    agent = make_agent([tool_reply("submit", summary="s")], context=ContextConfig(opening=[TestOutputConfig()]))
    text = first_message(agent, "Square.area() is wrong.\nIts tests run with `python -m pytest -q -p no:cacheprovider`.")
    section = text.split("\n\n", 1)[1]
    assert section.startswith("The tests' output before any change (`python -m pytest -q -p no:cacheprovider`):")
    assert "assert 4 == 9" in section and "1 failed, 1 passed" in section and section.endswith("[exit code 1]")
    # no command in the task and none configured: no section; a configured one wins
    assert first_message(make_agent([tool_reply("submit", summary="s")],
                                    context=ContextConfig(opening=[TestOutputConfig()])), "fix it") == "fix it"
    short = make_agent([tool_reply("submit", summary="s")],
                       context=ContextConfig(opening=[TestOutputConfig(command="echo $((6*7))", max_chars=200)]))
    assert first_message(short, "fix `ignored`").endswith("(`echo $((6*7))`):\n42\n\n[exit code 0]")


def test_test_output_keeps_the_tail_and_obeys_the_policy(make_agent, workdir):
    from ratchet.runtime.config import TestOutputConfig

    long = make_agent([tool_reply("submit", summary="s")],
                      context=ContextConfig(opening=[TestOutputConfig(command="seq 1 2000", max_chars=200)]))
    section = first_message(long, "t").split("\n\n", 1)[1]
    assert "[... the first" in section and section.endswith("2000\n\n[exit code 0]") and "\n1\n" not in section
    denied = make_agent([tool_reply("submit", summary="s")], policy=PermissionPolicy(allowed_commands=["git *"]),
                        context=ContextConfig(opening=[TestOutputConfig(command="python -m pytest")]))
    text = first_message(denied, "t")
    assert "error: " in text and "python -m pytest" in text and "passed" not in text
    assert (denied.run_dir / "denials.jsonl").exists()
