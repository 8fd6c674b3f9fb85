"""The baseline LLM player with the real embedded model (short; runs in CI)."""

import pytest
from typer.testing import CliRunner

from ratchet.cli import app

pytestmark = pytest.mark.real_model

MODEL = "qwen2.5-coder-0.5b"


@pytest.fixture(scope="module")
def model_file():
    from ratchet.contracts import RatchetError
    from ratchet.models import model_path

    try:
        return model_path(MODEL)
    except RatchetError as exc:
        pytest.skip(f"model file absent: {exc} (run: ratchet models pull {MODEL})")


@pytest.mark.timeout(900)
def test_play_tictactoe_with_the_local_model(model_file, tmp_path) -> None:
    result = CliRunner().invoke(
        app,
        ["play", "--env", "TicTacToe-v0", "--agent", f"local:{MODEL}", "--episodes", "2", "--max-steps", "6",
         "--max-tokens", "48", "--retry-illegal", "--run-dir", str(tmp_path)],
        env={"COLUMNS": "160"},
    )
    assert result.exit_code == 0, result.output
    assert "legal-action rate" in result.output and "mean reward" in result.output and "tokens" in result.output
    assert "1 worker(s)" in result.output  # local models play in this process
