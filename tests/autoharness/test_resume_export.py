"""Export and the loader round trip, the harness library (resume after SIGKILL: test_engine_chaos.py)."""

from __future__ import annotations

import subprocess
import sys

from fakes import GOOD, LOOSE

from ratchet.autoharness.export import export_harness, load_harness
from ratchet.autoharness.library import HarnessLibrary

BOARD = "[GAME] Current Board:\n\n 0 | X | 2 \n---+---+---\n 3 | O | 5 \n---+---+---\n 6 | 7 | 8 \n"


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
