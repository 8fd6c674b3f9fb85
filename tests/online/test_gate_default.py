"""The gate with nothing configured, through the real training loop: feedback that pushes a version
the wrong way is refused, the same loop with feedback the right way promotes, and the held-out
conversations never train.

The trainer is the real one (torch + peft, the real loss, optimizer and loop) on the tiny random
Llama of test_gate_collapse.py. No hook, no held-out file, no gate setting: the loop builds the
default gate from its queue. The judge's verdicts are the stand-in for the failure of the issue:
on the conversations that train, the judge heard the feedback backwards (it scored "Meh. Not
helpful." +1), while the held-out conversations carry the user's real verdicts.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from test_gate_collapse import trainer as tiny_trainer  # noqa: E402
from test_gate_heldout import sessions  # noqa: E402
from test_trainer import _wait, sample  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from ratchet.cli import app  # noqa: E402
from ratchet.online import status as status_mod  # noqa: E402
from ratchet.online.queue import TurnQueue  # noqa: E402
from ratchet.online.records import Sample  # noqa: E402
from ratchet.online.trainer import TrainerConfig, run_trainer_loop  # noqa: E402
from ratchet.online.versions import VersionStore  # noqa: E402


def judged(queue: TurnQueue, prompt: str, reply: str, reward: int, session: str, turn_id: str) -> None:
    s = sample(prompt, reply, reward, turn_id=turn_id)
    s = Sample(dataclasses.replace(s.turn, session_id=session), s.judgement)
    queue.add_turn(s.turn)
    queue.set_next_state(turn_id, "thanks" if reward > 0 else "No, not like that.")
    queue.add_judgement(s.judgement)


def run(tmp_path, wrong_way: bool) -> tuple[dict, TurnQueue, VersionStore, list[str]]:
    base = status_mod.online_dir(tmp_path / "run")
    queue = TurnQueue(base / status_mod.QUEUE_NAME)
    store = VersionStore(base / status_mod.VERSIONS_NAME)
    policy = tiny_trainer(1e-2)
    # Training settings only (one update per batch of 4); every gate setting is its default.
    config = TrainerConfig(signal="rl", batch_size=4, min_batch=4, micro_batch_size=4, ppo_epochs=2, lora_r=4,
                           lora_alpha=8, learning_rate=1e-2, kl_samples=0, convert_gguf=False, num_threads=1,
                           max_wait_s=0.0, poll_interval_s=0.02)
    assert config.heldout_path is None and config.gate == TrainerConfig().gate
    policy.config = config
    # The user's real verdicts, in conversations the default policy holds out: "ahoy" praised,
    # "hello" corrected (6 of each).
    held = sessions(config.gate.heldout.share, True, 12)
    real = [(f"held {i}", "ahoy", 1, held[i], f"hp{i}") for i in range(6)]
    real += [(f"held {i + 6}", "hello", -1, held[i + 6], f"hc{i}") for i in range(6)]
    # The conversations that train: heard backwards, or heard right.
    good, bad = (-1, 1) if wrong_way else (1, -1)
    train = sessions(config.gate.heldout.share, False, 4)
    heard = [(f"q{i}", "ahoy", good, train[i], f"ta{i}") for i in range(2)]
    heard += [(f"r{i}", "hello", bad, train[i + 2], f"tb{i}") for i in range(2)]
    # Judged before the trainer starts, they are decided in this order when it sets the default
    # policy: while the held-out set fills (fill_first at 0.75), the first conversation and the
    # fifth train and the others are held out; then the share's hash decides.
    for args in [heard[0], *real[:3], heard[2], *real[3:], heard[1], heard[3]]:
        judged(queue, *args)
    records: list[dict] = []
    stop = threading.Event()
    thread = threading.Thread(target=run_trainer_loop, args=(config, queue.path, store.root, stop, records.append),
                              kwargs={"trainer": policy}, daemon=True)
    thread.start()
    try:
        _wait(lambda: records)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    return records[0], queue, store, [f"hp{i}" for i in range(6)] + [f"hc{i}" for i in range(6)]


def test_feedback_that_pushes_the_wrong_way_is_refused_with_nothing_configured(tmp_path) -> None:
    record, queue, store, held = run(tmp_path, wrong_way=True)
    verdict = record["evaluation"]
    assert verdict["gate"] == "self_heldout" and verdict["fallback"] is None
    assert verdict["heldout_turns"] == 12 and (verdict["praised"], verdict["corrected"]) == (6, 6)
    # Five of them held out while the set was filling (hp0, hp1, hp2, hp3, hp4), the rest by the share.
    assert verdict["holdout"]["policy"]["policy"] == "fill_first" and verdict["holdout"]["early_turns"] == 5
    # The built-in checks pass: nothing but the held-out turns can tell this version is worse.
    assert verdict["checks"]["kl"]["passed"] and verdict["checks"]["tasks"]["passed"]
    assert "heldout" in verdict["failed"] and not verdict["promote"]
    assert verdict["checks"]["heldout"]["value"] < 0 and verdict["checks"]["heldout"]["p_wrong_way"] < 0.05
    assert not record["promoted"] and not store.get(1).promoted and store.current_number() == 0
    # The held-out conversations never trained.
    trained = {s.turn.turn_id for s in queue.heldout_samples()}
    assert trained == set(held) and queue.stats()["trained"] == 4 and queue.stats()["heldout"] == 12
    out = CliRunner().invoke(app, ["serve", "status", "--run", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "v1 not served: heldout: the held-out replies moved the wrong way" in text
    assert "12 held out for the gate (policy fill_first, 5 of them held out while the held-out set filled)" in text


def test_the_same_loop_promotes_feedback_that_pushes_the_right_way(tmp_path) -> None:
    record, _, store, _ = run(tmp_path, wrong_way=False)
    verdict = record["evaluation"]
    assert verdict["promote"] and verdict["failed"] == [] and verdict["checks"]["heldout"]["value"] > 0
    assert record["promoted"] and store.current_number() == 1
    assert verdict["score"] > verdict["baseline"]
