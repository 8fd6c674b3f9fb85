"""A tiny curriculum with SmolLM2-135M, end to end through the real pieces: its searches in
llama.cpp (``local:smollm2-135m@vN``), their verdicts scored and trained on by the online trainer in
torch, the update converted for llama.cpp and published as v1, v1's held-out search, and the games
gate's decision. One training game and one held-out game, two model calls a search."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratchet.curriculum import CurriculumConfig
from ratchet.curriculum.loop import learn
from ratchet.online.queue import TurnQueue
from ratchet.online.status import QUEUE_NAME, VERSIONS_NAME, online_dir
from ratchet.online.versions import VersionStore
from ratchet.store import RunStore

MODEL = "smollm2-135m"


@pytest.mark.real_model
def test_a_tiny_curriculum_makes_a_version_and_the_games_gate_decides(tmp_path: Path) -> None:
    for module in ("torch", "peft", "gguf", "llama_cpp", "textarena"):
        pytest.importorskip(module)
    from ratchet.models.registry import is_verified

    if not is_verified(MODEL, rehash=False):
        pytest.skip(f"{MODEL} is not pulled (ratchet models pull {MODEL})")
    config = CurriculumConfig.model_validate({
        "model": f"local:{MODEL}", "train_suite": "PigDice-v0", "heldout_suite": "TicTacToe-v0", "rounds": 1,
        "train_seeds": 1, "heldout_seeds": [0], "threads": 1,
        "search": {"iterations": 1, "eval_steps": 10, "search_seeds": [0, 1], "heldout_seeds": [1000],
                   "transitions_per_seed": 20, "max_new_tokens": 96,
                   "ideas": {"samples_per_step": 2, "repair": False, "autofix": False}, "budget": {"max_calls": 2}},
        "trainer": {"num_threads": 1, "lora_r": 4, "lora_alpha": 8, "max_seq_len": 4096, "kl_samples": 0,
                    "batch_size": 8, "min_batch": 1, "max_wait_s": 0, "poll_interval_s": 0.1},
        "train_timeout_s": 300})
    lines: list[str] = []
    run, report = learn(config, RunStore(tmp_path / "runs"), say=lines.append)
    [round_] = run.read_json("curriculum/state.json")["rounds"]
    assert round_["fed"] and round_["fed"] > 0, lines
    assert round_["version"] == 1, lines
    versions = VersionStore(online_dir(Path(run.dir)) / VERSIONS_NAME)
    v1 = versions.get(1)
    assert v1.lora_gguf is not None and v1.metrics["evaluation"]["promote"] is False  # published for the games gate
    # the update learned from the verdicts' hints (the hinted base distilled along the model's replies); a
    # request cut by max_seq_len loses its hint and teaches nothing (measured: loss 0 at 512 tokens)
    assert v1.metrics["distill_kl"] > 0 and v1.metrics["grad_norm"] > 1e-4 and v1.metrics["hinted"] == round_["fed"]
    assert TurnQueue(online_dir(Path(run.dir)) / QUEUE_NAME).stats()["trained"] == round_["fed"]
    # v1's held-out search ran with v1's adapter in llama.cpp
    held = run.read_json("curriculum/state.json")["heldout"]
    assert held["v1"]["TicTacToe-v0#0"]["result"]["model"].startswith(f"local:{MODEL}@v1+")
    assert held["v0"]["TicTacToe-v0#0"]["result"]["model"] == f"local:{MODEL}@v0"
    # the gate decided, and the store follows its decision
    gate = round_["gate"]
    assert isinstance(gate["promote"], bool) and gate["reason"]
    assert versions.current_number() == (1 if gate["promote"] else 0)
    assert [v["version"] for v in report["versions"]] == [0, 1]
    assert report["versions"][1]["status"] == ("promoted" if gate["promote"] else "refused")
    assert run.status()["status"] == "done"
