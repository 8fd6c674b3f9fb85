"""Every one of the paper's 145 games makes, resets and steps here, and reports illegal moves."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from ratchet.envs import list_envs, suite_ids

from .smoke import smoke


def _smoke(env_id: str) -> dict:
    try:
        return smoke(env_id)
    except Exception as exc:  # reported per game below
        return {"id": env_id, "exception": f"{type(exc).__name__}: {exc}"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_all_145_games_step_and_flag_illegal_moves(py312: str) -> None:
    ids = suite_ids("autoharness-145")
    assert len(ids) == 145 and len(set(ids)) == 145
    # Two processes: CI has two cores; the slowest reset (Sudoku-v0-hard) takes several seconds.
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")) as pool:
        results = list(pool.map(_smoke, ids))
    problems = {}
    for r in results:
        if "exception" in r:
            problems[r["id"]] = r["exception"]
        elif r["errors"]:
            problems[r["id"]] = f"game code crashed: {r['errors']}"
        elif not r["flagged"] or not all(reason.strip() for reason in r["flagged"]):
            problems[r["id"]] = f"no illegal move flagged with a reason: {r['flagged']}"
        elif r["leftover_hints"]:
            problems[r["id"]] = f"move hints left in observations: {r['leftover_hints'][:2]}"
    assert not problems, problems


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_list_envs_reports_all_145_available(py312: str) -> None:
    infos = {i.id: i for i in list_envs("autoharness-145")}
    assert len(infos) == 145
    missing = {k: v.reason for k, v in infos.items() if not v.available}
    assert not missing, missing
    assert sum(i.num_players == 1 for i in infos.values()) == 44
    assert infos["Chess-v0"].needs_python == ">=3.12"
    assert infos["Minesweeper-v0"].losing_invalid_note
