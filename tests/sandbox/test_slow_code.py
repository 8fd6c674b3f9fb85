"""Slow and odd code: a load that times out is not retried, its error names the line, a timeout deep in
the standard library still shows the candidate's own line, and a candidate has a time budget."""

from __future__ import annotations

import os
import sys
import time

import pytest

from ratchet.sandbox import HarnessCodeError, HarnessTimeout


def test_a_load_that_times_out_names_its_line_and_is_not_retried(make):
    sb = make(
        """
        def warm_up():
            n = 0
            while True:
                n += 1
        warm_up()
        """,
        start_timeout_s=1.0,
    )
    began = time.perf_counter()
    with pytest.raises(HarnessTimeout) as first:
        sb.call("ping")
    message, tail = first.value.message, first.value.traceback_tail
    assert "harness.py:4" in message or "harness.py:5" in message  # the loop, inside warm_up
    assert 'File "harness.py", line 6, in <module>' in tail and "in warm_up" in tail
    for _ in range(5):
        with pytest.raises(HarnessTimeout) as again:
            sb.call("ping")
        assert again.value is first.value
    assert sb.stats["starts"] == 1
    # One start timeout, not six (each later call used to start a worker and wait again).
    assert time.perf_counter() - began < 1.0 + 5.0


def test_a_load_that_ignores_the_timeout_is_killed_once_and_remembered(make):
    # A module-level loop that swallows the load alarm (a BaseException) and loops on.
    stubborn = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n"
    sb = make(
        stubborn,
        start_timeout_s=0.5,
        kill_grace_s=0.2,
    )
    with pytest.raises(HarnessTimeout, match="ignored the in-process timeout"):
        sb.start()
    with pytest.raises(HarnessTimeout, match="not retried"):
        sb.call("ping")
    assert sb.stats["starts"] == 1


def test_a_timeout_inside_the_standard_library_shows_the_candidates_line(make):
    sb = make(
        """
        import copy
        def propose_action(board):
            nested = []
            for _ in range(400):
                nested = [nested, {"a": [1, 2, 3]}]
            while True:
                copy.deepcopy(nested)
        """
    )
    with pytest.raises(HarnessTimeout) as info:
        sb.call("propose_action", "board", timeout_s=0.5)
    tail = info.value.traceback_tail
    assert 'File "harness.py", line 8, in propose_action' in tail
    assert "harness.py:8" in info.value.message
    assert "<stdlib>/copy.py" in tail and "library frames omitted" in tail
    # No absolute host path: neither the interpreter's prefix nor the sandbox's directories.
    for host_path in (os.path.dirname(os.__file__), sys.prefix, sys.base_prefix, "/tmp/"):
        assert host_path not in tail and host_path not in info.value.message
    assert len(tail.splitlines()) <= 15


def test_a_candidate_that_spends_its_budget_fails_fast(make):
    sb = make(
        """
        import time
        def slow(board):
            time.sleep(0.3)
            return "ok"
        """,
        candidate_budget_s=1.0,
    )
    results = [sb.call_many("slow", [("b",)])[0] for _ in range(8)]
    ok = [r for r in results if r[0] == "ok"]
    spent = [r[1] for r in results if r[0] == "error"]
    assert 2 <= len(ok) <= 4  # about a second's worth of calls (plus the start)
    assert spent and all(isinstance(e, HarnessTimeout) and e.limit == "budget" for e in spent)
    assert "candidate_budget_s" in spent[0].message
    began = time.perf_counter()
    with pytest.raises(HarnessTimeout, match="budget"):
        sb.call("slow", "b")
    assert time.perf_counter() - began < 0.1


def test_undecodable_bytes_in_the_code_are_a_code_error(make):
    sb = make("def propose_action(board):\n    return '\udcff'\n")
    with pytest.raises(HarnessCodeError, match="SyntaxError|utf-8"):
        sb.call("propose_action", "board")
