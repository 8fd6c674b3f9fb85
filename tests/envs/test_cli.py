"""`ratchet envs list` and `ratchet play` from the command line."""


import pytest
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.store import RunStore

runner = CliRunner()


def test_play_prints_the_report_and_writes_a_run(tmp_path) -> None:
    result = runner.invoke(
        app, ["play", "--env", "TicTacToe-v0", "--agent", "random", "--episodes", "4", "--workers", "1",
              "--run-dir", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    for text in ("legal-action rate", "mean reward", "win rate", "s/episode", "illegal-move reasons", "run:"):
        assert text in result.output
    store = RunStore(tmp_path)
    (row,) = store.list_runs(kind="play")
    run = store.open_run(row["id"])
    report = run.read_json("rollout_report.json")
    assert report["episodes"] == 4 and 0 <= report["legal_rate"] < 1
    assert len(run.episodes()) == 4


def test_play_unknown_env_is_a_clean_error(tmp_path) -> None:
    result = runner.invoke(app, ["play", "--env", "TicTacTo-v0", "--episodes", "1", "--no-store"])
    assert result.exit_code != 0
    assert "unknown environment" in str(result.exception) or "unknown environment" in result.output


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_envs_list_suite_shows_every_id_with_players(py312: str) -> None:
    result = runner.invoke(app, ["envs", "list", "--suite", "autoharness-145"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "145/145 available here" in result.output
    for env_id in ("Chess-v0", "Sudoku-v0-hard", "TicTacToe-v0", "WildTicTacToe-v0"):
        assert env_id in result.output
