"""The curriculum's orchestration with scripted models: the family split, the games gate promoting a
better version and refusing a worse one, and a curriculum killed at each phase resuming where it
stopped, redoing nothing finished.

Training game PigDice-v0 (chance), held-out TicTacToe-v0 (line), both the real games; harness code
runs in-process. The base model writes a harness that accepts every move (h < 1 on TicTacToe), v1's
writes a correct one, v2's the wrong one again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted import Killed, Models, Training
from typer.testing import CliRunner

from ratchet.contracts import RatchetError
from ratchet.curriculum import Curriculum, CurriculumConfig
from ratchet.curriculum.games import resolve, split
from ratchet.curriculum.loop import STATE, open_curriculum
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.online.queue import TurnQueue
from ratchet.online.status import QUEUE_NAME, VERSIONS_NAME, online_dir
from ratchet.online.versions import VersionStore
from ratchet.store import RunStore

pytest.importorskip("textarena")


def config(rounds: int = 1) -> CurriculumConfig:
    return CurriculumConfig.model_validate({
        "model": "local:smollm2-135m", "train_suite": "PigDice-v0", "heldout_suite": "TicTacToe-v0", "rounds": rounds,
        "train_seeds": 1, "heldout_seeds": [0, 1],
        "search": {"iterations": 1, "eval_steps": 20, "search_seeds": [0, 1], "heldout_seeds": [1000],
                   "ideas": {"samples_per_step": 2, "repair": False, "autofix": False}, "budget": {"max_calls": 2}}})


def curriculum(store: RunStore, cfg: CurriculumConfig, resume: str | None = None, *, models: Models | None = None,
               kill: str | None = None) -> tuple[Curriculum, Models, Training, list[str]]:
    run, cfg = open_curriculum(store, cfg, resume)
    models = models or Models()
    training = Training(Path(run.dir), kill)
    lines: list[str] = []
    return (Curriculum(cfg, run, store, models, training, runtime_factory=InProcessHarness, say=lines.append),
            models, training, lines)


def searches(store: RunStore) -> list[str]:
    return sorted(r for r in store.run_ids() if store.open_run(r).kind == "autoharness")


def test_families_split_and_an_overlap_is_refused_naming_the_games() -> None:
    train, heldout = split("autoharness-40/puzzle", "TicTacToe-v0,GuessTheNumber-v0")
    assert "TowerOfHanoi-v0" in train and heldout == ["TicTacToe-v0", "GuessTheNumber-v0"]
    with pytest.raises(RatchetError) as err:
        split("TicTacToe-v0,PigDice-v0", "ConnectFour-v0")
    assert "line: TicTacToe-v0 (train) and ConnectFour-v0 (held out)" in str(err.value)
    with pytest.raises(RatchetError, match="--train-suite 'Chess-v9': not a suite, and a game with no family"):
        resolve("Chess-v9", "--train-suite")
    with pytest.raises(RatchetError, match="no family 'lines'"):
        resolve("autoharness-40/lines", "--heldout-suite")


def test_a_game_this_machine_cannot_make_is_refused_before_any_search(tmp_path: Path, monkeypatch) -> None:
    from ratchet.envs import registry

    real = registry.env_factory_for

    def factory(game: str, **kw):
        if game == "TicTacToe-v0":
            raise RuntimeError("needs Python >= 3.12")
        return real(game, **kw)

    monkeypatch.setattr(registry, "env_factory_for", factory)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(RatchetError, match=r"cannot make 1 of the curriculum's games here: TicTacToe-v0 \(RuntimeError: needs"):
        open_curriculum(store, config(), None)
    assert store.run_ids() == []


def test_the_cli_refuses_an_overlap_before_making_a_run(tmp_path: Path) -> None:
    from ratchet.cli import app

    done = CliRunner().invoke(app, ["autoharness", "learn", "--train-suite", "TicTacToe-v0", "--heldout-suite",
                                    "ConnectFour-v0", "--store", str(tmp_path / "runs")])
    assert done.exit_code != 0 and "TicTacToe-v0 (train) and ConnectFour-v0 (held out)" in str(done.exception)
    assert not (tmp_path / "runs").exists() or RunStore(tmp_path / "runs").run_ids() == []


def test_the_gate_promotes_a_better_version_and_refuses_a_worse_one(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    c, _, training, lines = curriculum(store, config(rounds=2))
    state = c.execute()
    first, second = state["rounds"]
    assert first["incumbent"] == 0 and first["version"] == 1 and first["gate"]["promote"]
    assert second["incumbent"] == 1 and second["version"] == 2 and not second["gate"]["promote"]
    assert "solves 0 of 2 held-out searches, 2 fewer" in second["gate"]["reason"]
    versions = VersionStore(online_dir(Path(c.run.dir)) / VERSIONS_NAME)
    assert versions.current_number() == 1
    assert versions.get(1).promoted and json.loads((versions.root / "v000001" / "version.json").read_text())["promoted_by"].startswith("games gate")
    assert not versions.get(2).promoted
    # the held-out searches ran with each version's model, on the same seeds
    held = state["heldout"]
    assert set(held) == {"v0", "v1", "v2"} and all(set(v) == {"TicTacToe-v0#0", "TicTacToe-v0#1"} for v in held.values())
    assert [held[v]["TicTacToe-v0#0"]["result"]["solved"] for v in ("v0", "v1", "v2")] == [False, True, False]
    # every training search's samples were fed, once per round, as judged turns
    assert training.fed and all(n > 0 for n in training.fed)
    report = json.loads((Path(c.run.dir) / "learn.json").read_text())
    assert [(v["version"], v["status"], v["solved"]) for v in report["versions"]] == [
        (0, "base", 0), (1, "promoted", 2), (2, "refused", 0)]
    md = (Path(c.run.dir) / "learn.md").read_text()
    assert "| v1 (current) | promoted | 1 | v0 | 2/2 |" in md
    assert any("v1 promoted" in line for line in lines) and any("v2 refused" in line for line in lines)


def test_the_show_flag_prints_the_report(tmp_path: Path) -> None:
    from ratchet.cli import app

    store = RunStore(tmp_path / "runs")
    c, *_ = curriculum(store, config())
    c.execute()
    shown = CliRunner().invoke(app, ["autoharness", "learn", "--show", c.run.id, "--store", str(store.root)],
                               env={"COLUMNS": "300"})
    assert shown.exit_code == 0 and "## Held-out results per version" in shown.output and "| v1 (current) |" in shown.output


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """An uninterrupted one-round curriculum: what every resumed one must end with."""
    store = RunStore(tmp_path_factory.mktemp("ref") / "runs")
    c, models, training, _ = curriculum(store, config())
    state = c.execute()
    return {"state": state, "searches": len(searches(store)), "calls": models.calls, "versions": training.trained}


def _results(state: dict) -> dict:
    held = {v: {k: (e["result"]["best_h"], e["result"]["solved"]) for k, e in slot.items()}
            for v, slot in state["heldout"].items()}
    rounds = [(r["incumbent"], r["version"], r["gate"]["promote"], r["fed"]) for r in state["rounds"]]
    return {"heldout": held, "rounds": rounds}


# Calls in the reference: v0 held out (2 searches x 2 calls), the training search (2), v1 held out (4).
def progress(state: dict) -> tuple:
    """(v0 held-out searches done, training searches done, fed, version recorded, v1 searches done, gated)."""
    done = lambda slot: sum("result" in e for e in slot.values())
    r = state["rounds"][0] if state["rounds"] else {"train": {}, "fed": None, "version": None, "gate": None}
    return (done(state["heldout"].get("v0", {})), done(r["train"]), r["fed"] is not None, r["version"],
            done(state["heldout"].get("v1", {})), r["gate"] is not None)


@pytest.mark.parametrize(("phase", "kill_call", "kill", "where"), [
    ("a held-out search of the base", 3, None, (1, 0, False, None, 0, False)),
    ("a training search", 6, None, (2, 0, False, None, 0, False)),
    ("feeding", None, "feed", (2, 1, False, None, 0, False)),
    ("training, after the version was published", None, "train", (2, 1, True, None, 0, False)),
    ("a held-out search of the new version", 8, None, (2, 1, True, 1, 0, False)),
    ("the gate, after the promotion", None, "promote", (2, 1, True, 1, 2, False)),
])
def test_a_curriculum_killed_at_each_phase_resumes_where_it_stopped(tmp_path: Path, reference: dict, phase: str,
                                                                     kill_call: int | None, kill: str | None,
                                                                     where: tuple, monkeypatch) -> None:
    store = RunStore(tmp_path / "runs")
    c, models, training, _ = curriculum(store, config(), models=Models(kill_at=kill_call),
                                        kill=kill if kill in ("feed", "train") else None)
    if kill == "promote":
        original = VersionStore.promote

        def promote_then_die(self, number, *, by):
            original(self, number, by=by)
            raise Killed("killed after promoting")

        monkeypatch.setattr(VersionStore, "promote", promote_then_die)
    with pytest.raises(Killed):
        c.execute()
    monkeypatch.undo()
    killed_calls, killed_versions = models.calls, list(training.trained)
    assert progress(c.run.read_json(STATE)) == where, phase  # killed where the phase says
    resumed, models2, training2, _ = curriculum(store, config(), c.run.id)
    state = resumed.execute()
    assert _results(state) == _results(reference["state"]), phase
    # nothing finished was redone: the same searches (a killed one resumed in its own run), no second version
    assert len(searches(store)) == reference["searches"], phase
    assert len(killed_versions) + len(training2.trained) == len(reference["versions"]) == 1, phase
    # the model calls of both processes: at most the killed call again
    assert killed_calls + models2.calls <= reference["calls"] + 1, phase
    assert VersionStore(online_dir(Path(c.run.dir)) / VERSIONS_NAME).current_number() == 1
    # every turn in the queue once, a feed killed half-way included
    assert TurnQueue(online_dir(Path(c.run.dir)) / QUEUE_NAME).stats()["turns"] == state["rounds"][0]["fed"] > 0


def test_a_resume_keeps_its_config_and_may_only_add_rounds(tmp_path: Path) -> None:
    from ratchet.cli import app

    store = RunStore(tmp_path / "runs")
    c, *_ = curriculum(store, config())
    c.execute()
    refused = CliRunner().invoke(app, ["autoharness", "learn", "--resume", c.run.id, "--heldout-suite", "Mastermind-v0",
                                       "--store", str(store.root)])
    assert refused.exit_code != 0 and "--resume keeps the config the curriculum started with" in str(refused.exception)
    more, _ = open_curriculum(store, config(rounds=2), c.run.id)
    resumed, models, training, _ = curriculum(store, config(rounds=2), more.id)
    state = resumed.execute()
    # the first round is read, not redone; the second runs from the promoted v1
    assert [r["incumbent"] for r in state["rounds"]] == [0, 1] and len(training.trained) == 1
    assert models.asked.count(0) == 0  # nothing of v0 searched again
    not_a_curriculum = searches(store)[0]
    with pytest.raises(RatchetError, match=r"is not a curriculum \(its kind: autoharness\)"):
        open_curriculum(store, None, not_a_curriculum)


def test_a_round_whose_training_publishes_nothing_stops_and_trains_again_on_resume(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    c, _, training, lines = curriculum(store, config())
    training.train = lambda version: (None, "the fed turns taught nothing")
    state = c.execute()
    [r] = state["rounds"]
    assert r["version"] is None and r["gate"] is None and r["training"] == "the fed turns taught nothing"
    assert "round 1: no version: the fed turns taught nothing" in lines
    resumed, models, training2, _ = curriculum(store, config(), c.run.id)
    [r] = resumed.execute()["rounds"]
    assert r["version"] == 1 and r["gate"]["promote"] and training2.trained == [1]
    assert models.asked == [1, 1]  # only v1's held-out searches: nothing of the first attempt searched again
