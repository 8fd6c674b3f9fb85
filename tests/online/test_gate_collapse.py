"""The promotion gate on a real trainer: an update that collapses the model is refused in the
training loop, though the margin the old gate looked at improved; it stays on disk and is not served.

The trainer is the real one (torch + peft, the real loss, optimizer and loop) on a tiny random
Llama whose output layer is initialised wide enough for a LoRA to move its logits (the default
0.02 init keeps every distribution near uniform whatever the adapter does). The gate measures
what it measures on the real model: log-probs by teacher forcing and the exact KL to the base.
"""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from test_trainer import CharTokenizer, _wait, sample  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from ratchet.cli import app  # noqa: E402
from ratchet.online import status as status_mod  # noqa: E402
from ratchet.online.evaluation import EvaluationHook, GateConfig, GuardCase, HeldOutCase  # noqa: E402
from ratchet.online.policy import version_store_source  # noqa: E402
from ratchet.online.queue import TurnQueue  # noqa: E402
from ratchet.online.trainer import Trainer, TrainerConfig  # noqa: E402
from ratchet.online.trainer_loop import run_trainer_loop  # noqa: E402
from ratchet.online.versions import VersionStore  # noqa: E402

CASES = [HeldOutCase([{"role": "user", "content": f"held {i}"}], preferred="ahoy", dispreferred="hello")
         for i in range(3)]
GUARD = [GuardCase([{"role": "user", "content": f"what is {i}"}], f"it is {i} of them") for i in range(4)]


def trainer(learning_rate: float) -> Trainer:
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                   initializer_range=0.3)
    model = transformers.AutoModelForCausalLM.from_config(cfg).float()
    # Six optimizer steps per update on one batch: at lr 0.1 the old settings' overshoot in miniature.
    config = TrainerConfig(signal="rl", batch_size=4, min_batch=4, micro_batch_size=4, ppo_epochs=6, lora_r=4,
                           lora_alpha=8, learning_rate=learning_rate, kl_samples=0, convert_gguf=False, num_threads=1,
                           max_wait_s=0.0, poll_interval_s=0.02)
    return Trainer(config, model, CharTokenizer())


@pytest.mark.parametrize(("learning_rate", "served"), [(1e-3, True), (1e-1, False)], ids=["gentle", "collapsing"])
def test_a_collapsing_update_is_refused_and_kept_unserved(tmp_path, learning_rate, served):
    base = status_mod.online_dir(tmp_path / "run")
    queue = TurnQueue(base / status_mod.QUEUE_NAME)
    store = VersionStore(base / status_mod.VERSIONS_NAME)
    policy = trainer(learning_rate)
    initial = policy.lora_state()
    hook = EvaluationHook(CASES, tolerance=0.5, guard=GUARD, gate=GateConfig(builtin=False))
    for s in [sample(f"q{i}", "ahoy", 1, turn_id=f"a{i}") for i in range(2)] + \
             [sample(f"r{i}", "hello", -1, turn_id=f"b{i}") for i in range(2)]:
        queue.add_turn(s.turn)
        queue.set_next_state(s.turn.turn_id, "thanks")
        queue.add_judgement(s.judgement)
    records: list[dict] = []
    stop = threading.Event()
    thread = threading.Thread(target=run_trainer_loop, args=(policy.config, queue.path, store.root, stop,
                                                             records.append),
                              kwargs={"trainer": policy, "hook": hook}, daemon=True)
    thread.start()
    try:
        _wait(lambda: records)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    verdict = records[0]["evaluation"]
    # What the old gate compared, the held-out margin, improved either way.
    assert verdict["score"] > verdict["baseline"] and verdict["checks"]["preference"]["passed"]
    version = store.get(1)
    assert version.adapter_dir is not None and (version.adapter_dir / "adapter_config.json").is_file()  # on disk
    if served:
        assert verdict["promote"] and version.promoted and store.current_number() == 1
        assert verdict["checks"]["kl"]["value"] < 0.1
        return
    # The collapse: far from the base, the neutral references much less likely.
    assert verdict["checks"]["kl"]["value"] > 1.0 and {"kl", "guard"} <= set(verdict["failed"])
    assert not verdict["promote"] and not version.promoted and store.current_number() == 0
    assert version_store_source(store.root)() == (0, None)  # serving keeps the base weights
    # The trainer went back to the weights it had (the update left no trace).
    assert policy.version == 0 and all(torch.equal(initial[k], v) for k, v in policy.lora_state().items())
    out = CliRunner().invoke(app, ["serve", "status", "--run", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "v1 not served:" in text and "kl: " in text and "guard: per-token log p(reference) changed" in text
