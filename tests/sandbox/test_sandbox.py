"""The Sandbox's contract: loading, calls, batches, seeds, imports, restarts, errors."""

from __future__ import annotations

import json
import os
import random
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from ratchet.sandbox import (
    HarnessCodeError,
    HarnessCrashed,
    HarnessError,
    HarnessImportError,
    HarnessSkipped,
    HarnessTimeout,
    Sandbox,
    SandboxConfig,
)
from ratchet.sandbox.errors import error_from_reply

HARNESS = textwrap.dedent(
    """
    import random
    calls = 0

    def is_legal_action(board, action):
        return action in board.split()

    def propose_action(board):
        global calls
        calls += 1
        return random.choice(board.split())

    def count():
        return calls

    def echo(*args):
        return list(args)

    def draws(n):
        return [random.random() for _ in range(n)]

    def fail(message):
        print("about to fail")
        raise ValueError(message)

    def talk():
        print("hello")
        return "said"
    """
)


@pytest.fixture
def sb():
    with Sandbox({"harness.py": HARNESS}) as sandbox:
        yield sandbox


def test_calls_return_plain_values(sb):
    assert sb.call("is_legal_action", "a b c", "b") is True
    assert sb.call("is_legal_action", "a b c", "z") is False
    value = {"k": [1, 2.5, None, True, "é✓"], "nested": {"x": []}}
    assert sb.call("echo", value, "s", 3) == [value, "s", 3]
    assert sb.call("talk") == "said"  # printing does not disturb the protocol


def test_functions_and_has_function(sb):
    assert {"is_legal_action", "propose_action"} <= set(sb.functions())
    assert sb.has_function("propose_action") and not sb.has_function("nope")
    with pytest.raises(HarnessCodeError, match="no function named 'nope'"):
        sb.call("nope")


def test_worker_is_persistent_and_restart_gives_a_fresh_one(sb):
    for _ in range(5):
        sb.call("propose_action", "a b")
    assert sb.call("count") == 5
    pid = sb.worker_pid
    sb.restart()
    assert sb.call("count") == 0 and sb.worker_pid != pid
    assert sb.stats["starts"] == 2


def test_seeds_make_calls_reproducible_and_leave_the_parent_stream_alone(sb):
    state = random.getstate()
    assert sb.call("draws", 5, seed=7) == sb.call("draws", 5, seed=7)
    assert sb.call("draws", 5, seed=7) != sb.call("draws", 5, seed=8)
    assert sb.call("draws", 3) == sb.call("draws", 3, seed=0)  # no seed means seed 0
    first = sb.call("draws", 3, seed=11)
    sb.restart()
    assert sb.call("draws", 3, seed=11) == first
    assert random.getstate() == state


def test_call_many_matches_single_calls_with_consecutive_seeds(sb):
    boards = [("a b c d e f g",)] * 20
    batch = sb.call_many("propose_action", boards, seed=100)
    assert all(status == "ok" for status, _ in batch)
    singles = [sb.call("propose_action", *args, seed=100 + i) for i, args in enumerate(boards)]
    assert [value for _, value in batch] == singles
    assert len(set(singles)) > 1
    assert sb.call_many("propose_action", []) == []


def test_call_many_keeps_going_after_soft_errors(sb):
    out = sb.call_many("fail", [("one",), ("two",)]) + sb.call_many("echo", [(1,), (2,)])
    assert [s for s, _ in out] == ["error", "error", "ok", "ok"]
    assert isinstance(out[0][1], HarnessCodeError) and "one" in out[0][1].message


def test_call_many_skips_the_rest_after_a_killed_item():
    code = textwrap.dedent(
        """
        def f(x):
            if x == 1:
                while True:
                    try:
                        while True:
                            pass
                    except BaseException:
                        pass
            return x
        """
    )
    with Sandbox({"harness.py": code}, config=SandboxConfig(call_timeout_s=0.3, kill_grace_s=0.2)) as sb:
        out = sb.call_many("f", [(0,), (1,), (2,), (3,)])
        assert out[0] == ("ok", 0)
        assert isinstance(out[1][1], HarnessTimeout)
        assert all(isinstance(e, HarnessSkipped) for _, e in out[2:])
        assert sb.call("f", 5) == 5


def test_code_errors_carry_a_clean_traceback_tail_and_printed_output(sb):
    with pytest.raises(HarnessCodeError) as info:
        sb.call("fail", "bad board")
    error = info.value
    assert error.kind == "code" and "ValueError: bad board" in error.message
    assert 'File "harness.py"' in error.traceback_tail
    assert "worker.py" not in error.traceback_tail and "/tmp/" not in error.traceback_tail
    assert len(error.traceback_tail.splitlines()) <= 15
    assert "about to fail" in error.output_tail
    feedback = error.feedback()
    assert feedback.startswith("Code error: ValueError: bad board") and "about to fail" in feedback
    assert json.loads(json.dumps(error.to_dict()))["kind"] == "code"
    assert sb.call("is_legal_action", "a", "a") is True


def test_syntax_error_names_file_and_line_and_is_sticky():
    bad = {"harness.py": "import helper\n", "helper.py": "x = 1\ndef broken(:\n    pass\n"}
    with Sandbox(bad) as sb:
        with pytest.raises(HarnessCodeError) as info:
            sb.call("anything")
        assert "helper.py:2" in info.value.message
        assert "SyntaxError" in info.value.traceback_tail and "harness.py" in info.value.traceback_tail
        with pytest.raises(HarnessCodeError):
            sb.has_function("anything")
        assert sb.stats["starts"] == 1  # the broken code is not started again


def test_runtime_error_at_load():
    with Sandbox({"harness.py": "x = 1\ny = 1 / 0\n"}) as sb:
        with pytest.raises(HarnessCodeError, match="ZeroDivisionError") as info:
            sb.start()
        assert 'File "harness.py", line 2' in info.value.traceback_tail


def test_denied_and_missing_imports_at_load():
    cases = [
        ("subprocess", "'subprocess' is not allowed"),
        ("requests", "requests"),
        ("numpy.not_a_module", "not_a_module"),
    ]
    for module, message in cases:
        with (
            Sandbox({"harness.py": f"import {module}\n"}) as sb,
            pytest.raises(HarnessImportError, match=message),
        ):
            sb.start()


def test_import_allow_list_is_configurable_and_covers_preloaded_modules():
    code = textwrap.dedent(
        """
        def use(name):
            import importlib
            return importlib.import_module(name).__name__
        def direct_json():
            import json
            return "json"
        def direct_math():
            import math
            return math.floor(2.5)
        """
    )
    with Sandbox({"harness.py": code}, config=SandboxConfig(allowed_imports=["math", "importlib"])) as sb:
        assert sb.call("direct_math") == 2
        with pytest.raises(HarnessImportError, match="'json'"):
            sb.call("direct_json")  # json is loaded in the worker already; still refused
        with pytest.raises(HarnessImportError, match="'fractions'"):
            sb.call("use", "fractions")
    with Sandbox({"harness.py": code}) as sb:
        assert sb.call("use", "fractions") == "fractions"
        with pytest.raises(HarnessImportError, match="ctypes"):
            sb.call("use", "ctypes")


def test_only_allowed_modules_of_ratchet_import():
    code = "def load(name):\n    import importlib\n    return importlib.import_module(name).__name__\n"
    config = SandboxConfig(allowed_imports=["@stdlib", "ratchet.contracts"])
    with Sandbox({"harness.py": code}, config=config) as sb:
        assert sb.call("load", "ratchet.contracts") == "ratchet.contracts"
        with pytest.raises(HarnessImportError, match="ratchet.config"):
            sb.call("load", "ratchet.config")
        with pytest.raises(HarnessImportError, match="ratchet.sandbox"):
            sb.call("load", "ratchet.sandbox.sandbox")


def test_extra_import_paths_are_visible_read_only(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "boardlib.py").write_text("def cells(board):\n    return board.split()\n")
    code = "import boardlib\ndef n(board):\n    return len(boardlib.cells(board))\n"
    config = SandboxConfig(extra_import_paths=[lib], allowed_imports=["@stdlib", "boardlib"])
    with Sandbox({"harness.py": code}, config=config) as sb:
        assert sb.call("n", "a b c") == 3


def test_numpy_works_under_the_default_memory_limit_and_is_seeded():
    code = textwrap.dedent(
        """
        import numpy as np
        def total(n):
            return int(np.arange(n).sum())
        def noise():
            return np.random.rand(3).tolist()
        """
    )
    with Sandbox({"harness.py": code}) as sb:
        assert sb.call("total", 1000) == 499500
        assert sb.call("noise", seed=3) == sb.call("noise", seed=3)
        assert sb.call("noise", seed=3) != sb.call("noise", seed=4)


def test_hash_order_is_stable_across_workers():
    code = "def order():\n    return list({'alpha', 'beta', 'gamma', 'delta', 'eps'})\n"
    with Sandbox({"harness.py": code}) as a, Sandbox({"harness.py": code}) as b:
        assert a.call("order") == b.call("order")


def test_multi_file_candidates_and_scratch(tmp_path):
    files = {
        "harness.py": "from pkg.rules import legal\ndef f(b, a):\n    return legal(b, a)\n"
        "def save(text):\n    open('note.txt', 'w').write(text)\n    return open('note.txt').read()\n",
        "pkg/__init__.py": "",
        "pkg/rules.py": "def legal(b, a):\n    return a in b\n",
    }
    scratch = tmp_path / "scratch"
    with Sandbox(files, config=SandboxConfig(scratch_dir=scratch)) as sb:
        assert sb.call("f", "abc", "b") is True
        assert sb.call("save", "kept") == "kept"
    assert (scratch / "note.txt").read_text() == "kept"  # a given scratch dir is kept


def test_close_removes_its_files_and_refuses_calls():
    sb = Sandbox({"harness.py": HARNESS})
    sb.call("count")
    scratch = sb.scratch_dir
    assert scratch.exists()
    sb.close()
    sb.close()
    assert not scratch.exists()
    with pytest.raises(HarnessCrashed, match="closed"):
        sb.call("count")


def test_worker_recycles_near_its_cpu_budget():
    code = "import time\ndef burn(s):\n    end = time.process_time() + s\n    while time.process_time() < end:\n        pass\n    return 1\n"
    with Sandbox({"harness.py": code}, config=SandboxConfig(cpu_seconds=1, call_timeout_s=10)) as sb:
        assert sb.call("burn", 0.85) == 1  # past 80% of the budget: the worker asks to be recycled
        assert sb.call("burn", 0.0) == 1
        assert sb.stats["starts"] == 2


def test_bad_arguments_and_bad_files_are_caller_errors():
    with pytest.raises(HarnessCodeError, match="entry"):
        Sandbox({"other.py": ""})
    with pytest.raises(HarnessCodeError, match="bad file name"):
        Sandbox({"harness.py": "", "../escape.py": ""})
    with Sandbox({"harness.py": HARNESS}) as sb, pytest.raises(TypeError):
        sb.call("echo", object())


def test_error_from_malformed_reply_is_a_crash():
    assert isinstance(error_from_reply("nonsense"), HarnessCrashed)
    error = error_from_reply({"kind": "import", "message": "m", "tb": "a\n" * 40})
    assert isinstance(error, HarnessImportError) and len(error.traceback_tail.splitlines()) == 15
    assert isinstance(error, HarnessError) and error.hint is None


def test_every_config_field_is_documented():
    for name, info in SandboxConfig.model_fields.items():
        assert info.description, name
    with pytest.raises(ValidationError):
        SandboxConfig(not_a_field=1)


def test_no_worker_left_after_close():
    sb = Sandbox({"harness.py": HARNESS})
    sb.call("count")
    pid = sb.worker_pid
    sb.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not Path(sb._root).exists()


def test_errors_survive_pickling_with_every_field():
    import pickle

    code = {"harness.py": "def loop():\n    while True:\n        pass\n"}
    with Sandbox(code) as sb, pytest.raises(HarnessTimeout) as info:
        sb.call("loop", timeout_s=0.3)
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is HarnessTimeout and copy.limit == "wall"
    assert copy.to_dict() == info.value.to_dict() and copy.feedback() == info.value.feedback()
