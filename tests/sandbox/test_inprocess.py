"""The sandbox's trusted twin: the same files and call surface, in this process."""

from __future__ import annotations

import sys

from ratchet.sandbox.inprocess import InProcessError, InProcessSandbox

FILES = {"helper.py": "def double(x):\n    return 2 * x\n",
         "harness.py": "import helper\n\ndef f(x):\n    from helper import double\n    return double(x)\n\ndef g(x):\n    return [][x]\n"}


def test_other_files_are_modules_while_the_program_loads_and_runs_and_not_after():
    box = InProcessSandbox(FILES)
    assert box.call("f", 4) == 8 and "helper" not in sys.modules
    assert box.call_many("f", [(1,), (2,)]) == [("ok", 2), ("ok", 4)]


def test_failures_are_feedback_from_the_programs_own_frames():
    box = InProcessSandbox(FILES)
    (status, err), = box.call_many("g", [(3,)])
    assert status == "error" and isinstance(err, InProcessError)
    assert 'File "harness.py", line 8, in g' in err.feedback() and "IndexError" in err.feedback() and "inprocess.py" not in err.feedback()
    broken = InProcessSandbox({"harness.py": "def f(:\n"})
    assert broken.load_error and "SyntaxError" in broken.load_error
    assert "defines no function 'h'" in str(InProcessSandbox(FILES).call_many("h", [()])[0][1])


def test_a_module_of_the_same_name_already_imported_is_put_back_after_loading(monkeypatch):
    theirs = type(sys)("helper")
    monkeypatch.setitem(sys.modules, "helper", theirs)
    box = InProcessSandbox(FILES)
    assert sys.modules["helper"] is theirs
    assert box.call("f", 4) == 8 and sys.modules["helper"] is theirs
