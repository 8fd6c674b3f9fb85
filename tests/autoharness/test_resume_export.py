"""Resume after SIGKILL, export and the loader round trip, the harness library."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fakes import GOOD, LOOSE

from ratchet.autoharness.export import export_harness, load_harness
from ratchet.autoharness.library import HarnessLibrary
from ratchet.store import RunStore
from ratchet.store.files import read_json

WORKER = Path(__file__).with_name("resume_worker.py")
BOARD = "[GAME] Current Board:\n\n 0 | X | 2 \n---+---+---\n 3 | O | 5 \n---+---+---\n 6 | 7 | 8 \n"


def _run(store: Path, id_file: Path, resume: str = "-", delay: float = 0.0, *extra: str) -> dict:
    out = subprocess.run([sys.executable, str(WORKER), str(store), str(id_file), resume, str(delay), *extra],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result.pop("replayed")  # how the result was reached, not what it is
    return result


def _sent(calls: Path) -> int:
    """Replies the scripted endpoint has sent, across every process that used it."""
    return int(read_json(calls, 0))


def test_a_killed_search_resumes_to_the_same_result(tmp_path):
    # Every reply carries the endpoint's reply count, so a completed call made again would change
    # the result, and the count says how many calls the two processes made together.
    ref_calls, calls = tmp_path / "ref-calls.json", tmp_path / "calls.json"
    reference = _run(tmp_path / "ref", tmp_path / "ref.id", "-", 0.0, "--calls", str(ref_calls))
    assert reference["best_h"] == 1.0 and reference["iterations"] >= 3
    assert _sent(ref_calls) == reference["calls"]

    store, id_file, inflight = tmp_path / "store", tmp_path / "run.id", tmp_path / "inflight.json"
    proc = subprocess.Popen([sys.executable, str(WORKER), str(store), str(id_file), "-", "0.4", "--calls", str(calls),
                             "--inflight", str(inflight)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 90
    killed_at = None
    while time.time() < deadline and proc.poll() is None:
        if id_file.exists():
            state = RunStore(store).open_run(id_file.read_text()).load_checkpoint("autoharness")
            pending = read_json(inflight, None)
            # Kill while a reply is pending (well inside its 0.4 s), never in the instant between a
            # reply leaving the endpoint and its journal line reaching the disk: a reply lost there
            # is asked for again on resume, which is right, but makes the call count differ.
            if (state and state.get("iteration", 0) >= 2 and pending and pending["reply"] > _sent(calls)
                    and time.time() - pending["since"] < 0.2):
                os.killpg(proc.pid, signal.SIGKILL)
                killed_at = state["iteration"]
                break
        time.sleep(0.05)
    proc.wait(timeout=30)
    assert killed_at is not None, "the search finished before it could be killed; slow it down"
    assert proc.returncode == -signal.SIGKILL

    resumed = _run(store, id_file, id_file.read_text(), 0.0, "--calls", str(calls))
    assert resumed == reference
    assert _sent(calls) == _sent(ref_calls)


def test_export_and_load_round_trip(tmp_path):
    path = export_harness(GOOD, tmp_path / "harness_tictactoe.py", {"env": "TicTacToe-v0", "mode": "verifier", "score": 1.0, "run_id": "r1"})
    text = path.read_text()
    assert text.startswith("# AutoHarness") and "# env: TicTacToe-v0" in text and "# run_id: r1" in text
    # The file stands alone: a plain Python process with nothing of Ratchet on its path can use it.
    probe = ("import importlib.util as u, sys; s = u.spec_from_file_location('h', sys.argv[1]); m = u.module_from_spec(s); "
             "s.loader.exec_module(m); print(m.is_legal_action(sys.argv[2], '[1]'), m.is_legal_action(sys.argv[2], '[2]'))")
    out = subprocess.run([sys.executable, "-I", "-c", probe, str(path), BOARD], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "True"], out.stderr
    with load_harness(path, trusted=True) as h:
        assert h.is_legal_action(BOARD, "[1]") is False and h.is_legal_action(BOARD, "[8]") is True
        assert h.propose_action(BOARD, seed=1) in {"[0]", "[2]", "[3]", "[5]", "[6]", "[7]", "[8]"}


def test_loaded_harness_runs_in_the_sandbox_by_default(tmp_path):
    path = export_harness(GOOD, tmp_path / "h.py", {"env": "TicTacToe-v0"})
    with load_harness(path) as h:
        assert h.is_legal_action(BOARD, "[2]") is True and h.is_legal_action(BOARD, "[4]") is False
        assert type(h.runtime).__name__ == "Sandbox"


def test_library_keeps_the_best_and_finds_variants_and_similar_games(tmp_path):
    lib = HarnessLibrary(tmp_path)
    assert lib.add("TicTacToe-v0", "verifier", LOOSE, 0.6, run_id="a")
    assert lib.add("TicTacToe-v0", "verifier", GOOD, 1.0, run_id="b")
    assert not lib.add("TicTacToe-v0", "verifier", LOOSE, 0.5, run_id="c")  # worse: kept out
    lib.add("ConnectFour-v0", "verifier", LOOSE, 0.9)
    exact = lib.lookup("TicTacToe-v0", "verifier")
    assert exact[0]["env"] == "TicTacToe-v0" and exact[0]["code"].strip() == GOOD.strip()
    assert lib.lookup("TicTacToe-v0-large", "verifier")[0]["env"] == "TicTacToe-v0"  # a variant
    assert lib.lookup("UltimateTicTacToe-v0", "verifier")[0]["env"] == "TicTacToe-v0"  # a similar game
    assert lib.lookup("Sudoku-v0", "verifier") == []
