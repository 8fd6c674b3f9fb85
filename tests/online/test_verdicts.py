"""A finished harness search's samples become judged turns (``ratchet.online.verdicts``): rewarded
against the other samples of their request, hinted with what the evaluation revealed, fed to the
queue once, and trained on by the one trainer.

The searches are AutoHarness on the engine (TicTacToe, fitted rules off) answered by a scripted
model with the 0.5B's own replies (``tests/autoharness/data/tictactoe_05b_replies.json``): three
wrong ``legal_moves`` and the one the search kept.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import run_on_engine
from ratchet.evolve.proposers.critic import SAMPLES_FILE
from ratchet.models import ScriptedModel
from ratchet.online.queue import TurnQueue
from ratchet.online.verdicts import HINT_CHARS, feed, relative_rewards, request_hash, verdict_turns
from ratchet.store import RunStore

pytest.importorskip("textarena")

DATA = Path(__file__).parents[1] / "autoharness" / "data" / "tictactoe_05b_replies.json"
REPLIES = json.loads(DATA.read_text())
KEPT, WRONG = REPLIES["kept"], REPLIES["wrong"]


def search(tmp_path: Path, replies: list[str], max_calls: int, samples: int = 4, repair: bool = False) -> object:
    """A finished AutoHarness run on the engine whose model answers ``replies`` in order
    (``repair``: the step repairs its samples; off, each is proposed as the model wrote it)."""
    cfg = AutoHarnessConfig.model_validate({
        "env": "TicTacToe-v0", "model": "scripted:", "heldout_seeds": [1000], "eval_steps": 20,
        "ideas": {"induce": False, "library_seed": False, "samples_per_step": samples, "repair": repair, "autofix": repair},
        "library_dir": str(tmp_path / "lib"), "budget": {"max_calls": max_calls}})
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, name="verdicts")
    run_on_engine(cfg, ScriptedModel(replies), run)
    return run


class ByteTokenizer:
    """Bytes as token ids and a plain chat template: what ``feed`` needs of a tokenizer."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode())

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True):
        return self.encode("".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>")


class FlatPolicy:
    """A policy that gives every reply token log-prob -1 (the trainer recomputes nothing here)."""

    tokenizer = ByteTokenizer()

    def __init__(self) -> None:
        self.scored = 0

    def score(self, sequences, starts, *, base=False):
        self.scored += len(sequences)
        return [[-1.0] * (len(s) - start) for s, start in zip(sequences, starts, strict=True)]


def test_relative_rewards_compare_each_score_with_the_mean_of_the_others() -> None:
    assert relative_rewards([1.0, 0.0, 0.027, 0.0]) == [1, -1, -1, -1]
    assert relative_rewards([0.6, 0.2, 0.4]) == [1, -1, 0]  # 0.4 is the others' mean exactly
    assert relative_rewards([0.5, 0.5]) == [0, 0]
    assert relative_rewards([1.0]) == [0]  # alone: nothing to compare with


def test_a_finished_search_yields_each_sample_judged_against_its_request(tmp_path: Path) -> None:
    # One step, four samples screened: the three wrong ones below the others' mean, the kept one above.
    run = search(tmp_path, [WRONG["blank_is_space"], WRONG["inverted"], WRONG["hard_coded"], KEPT], max_calls=4)
    [record] = run.read_jsonl(SAMPLES_FILE)
    assert [s["screen"] for s in record["samples"]][-1] == 1.0 and record["kept"] == record["samples"][-1]["code"]
    pairs = verdict_turns(run)
    assert [t.response_text for t, _ in pairs] == [s["reply"] for s in record["samples"]]
    assert [j.reward for _, j in pairs] == [-1, -1, -1, 1]
    # one request, one group: a single session for the four samples, named by run and request
    assert {t.session_id for t, _ in pairs} == {f"verdict:{run.id}:{request_hash(record['request'])[:16]}"}
    turn, kept = pairs[-1]
    assert turn.messages == record["request"] and turn.policy_version == 0
    assert kept.source == "judge" and kept.judge == "verdict:harness_refiner"
    # the kept sample's hint: what its games and the gate said, beside its screen
    assert "scored 1.00 of 1" in kept.hint and "h 1.00" in kept.hint and "It was kept" in kept.hint
    worst = pairs[0][1]
    assert "scored 0.00 of 1" in worst.hint and "best code written for this request scored 1.00" in worst.hint
    # ... and what the screen found wrong: its error types and a counterexample, a board and its legal list
    third = pairs[2][1]
    assert "What it got wrong: 36× wrong_legal_actions" in third.hint, third.hint
    assert "but the legal actions on this board are" in third.hint and len(third.hint) <= HINT_CHARS
    assert "What it got wrong" not in kept.hint  # the kept one screened 1.0: nothing wrong on the check
    assert not pairs[0][0].response_token_ids  # no policy given: not tokenized


def test_a_reply_with_no_code_scores_zero_and_its_hint_says_why(tmp_path: Path) -> None:
    run = search(tmp_path, ["I would write a function that lists the empty cells.", KEPT], max_calls=2)
    pairs = verdict_turns(run)
    assert [j.reward for _, j in pairs] == [-1, 1]
    assert pairs[0][1].hint.startswith("Your reply gave no usable new code:")
    assert pairs[0][1].next_state == run.read_jsonl(SAMPLES_FILE)[0]["samples"][0]["reason"]


def test_a_lone_sample_has_no_reward_and_its_hint_is_what_its_games_revealed(tmp_path: Path) -> None:
    # One sample per request: nothing to compare it with (reward 0), so it teaches by its hint alone.
    run = search(tmp_path, [WRONG["hard_coded"]], max_calls=1, samples=1)
    [(turn, judgement)] = verdict_turns(run)
    assert judgement.reward == 0 and turn.response_text == WRONG["hard_coded"]
    assert "It was rejected" in judgement.hint and "What failed:" in judgement.hint


def test_a_repaired_sample_scores_what_the_model_wrote_and_its_hint_says_what_the_repair_changed(tmp_path: Path) -> None:
    # One sample one comparison from right: the step proposes it repaired (kept at h 1.0). The
    # turn is the model's reply, scored by its own screen; the hint names the change and the games.
    run = search(tmp_path, [WRONG["inverted"]], max_calls=1, samples=1, repair=True)
    [record] = run.read_jsonl(SAMPLES_FILE)
    [sample] = record["samples"]
    assert sample["repair"]["after"] == 1.0 and record["kept"] == sample["repair"]["code"]
    [(turn, judgement)] = verdict_turns(run)
    assert turn.response_text == WRONG["inverted"] and judgement.next_state == f"score {sample['screen']:.4f}"
    assert sample["screen"] < 1.0
    assert "A small change (line 17: `in` → `not in`) made it score 1.00. When your code" in judgement.hint, judgement.hint
    assert "It was kept" in judgement.hint  # the repaired child's evaluation, found by the kept hash
    assert judgement.hint.index("It was kept") < judgement.hint.index("What it got wrong")


def test_feeding_adds_judged_turns_once(tmp_path: Path) -> None:
    run = search(tmp_path, [WRONG["blank_is_space"], WRONG["inverted"], WRONG["hard_coded"], KEPT], max_calls=4)
    queue = TurnQueue(tmp_path / "queue.db")
    policy = FlatPolicy()
    assert feed(run, queue, policy) == 4
    stats = queue.stats()
    assert (stats["turns"], stats["judged"], stats["positive"], stats["negative"]) == (4, 4, 1, 3)
    assert feed(run, queue, policy) == 0  # the second time adds nothing
    assert queue.stats() == stats
    batch = queue.take_batch(8)
    assert len(batch) == 4
    for sample in batch:  # tokenized with the policy's template, one recomputed log-prob per reply token
        turn = sample.turn
        assert turn.prompt_token_ids[-len(b"<assistant>"):] == list(b"<assistant>")
        assert turn.response_token_ids == list(turn.response_text.encode())
        assert turn.response_logprobs == [-1.0] * len(turn.response_token_ids)


def test_a_search_whose_proposer_records_no_samples_gives_no_turns(tmp_path: Path) -> None:
    run = RunStore(tmp_path / "runs").create_run("evolve", {}, name="empty")
    assert verdict_turns(run) == []
    assert feed(run, TurnQueue(tmp_path / "q.db")) == 0


class Promote:
    """A gate that promotes every update: the gate is not what this test measures."""

    def score(self, scorer):
        return 0.0

    def evaluate(self, scorer, baseline):
        return {"promote": True, "reason": "every update promoted (test)"}


@pytest.mark.real_model
def test_smollm2_trains_on_a_searchs_verdicts_and_publishes_a_version(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    from ratchet.models.registry import is_verified
    from ratchet.online.trainer import Trainer, TrainerConfig
    from ratchet.online.trainer_loop import run_trainer_loop
    from ratchet.online.versions import open_versions

    if not is_verified("smollm2-135m", rehash=False):
        pytest.skip("smollm2-135m is not pulled (ratchet models pull smollm2-135m)")
    run = search(tmp_path, [WRONG["blank_is_space"], WRONG["inverted"], WRONG["hard_coded"], KEPT], max_calls=4)
    # Combine: Binary RL from the relative rewards, and the hint-told base distilled along each reply.
    config = TrainerConfig(model="smollm2-135m", convert_gguf=False, kl_samples=0, num_threads=1, signal="combine",
                           distill_target="served", batch_size=4, min_batch=4, max_wait_s=0, poll_interval_s=0.05,
                           max_seq_len=4096)
    trainer = Trainer.from_config(config)
    queue = TurnQueue(tmp_path / "queue.db")
    assert feed(run, queue, trainer) == 4
    before = {k: v.clone() for k, v in trainer.lora_state().items()}
    records: list[dict] = []
    stop = threading.Event()

    def published(record: dict) -> None:
        records.append(record)
        stop.set()

    run_trainer_loop(config, queue.path, tmp_path / "versions", stop, published, trainer=trainer, hook=Promote())
    [record] = records
    assert record["promoted"] and record["version"] == 1 and record["samples"] == 4
    assert open_versions(tmp_path / "versions").current_number() == 1
    assert queue.stats()["trained"] == 4
    assert record["hinted"] == 4 and record["distill_kl"] > 0  # every sample's hint reached the teacher
    # recomputed at the trainer's own weights, the importance weight is 1 (no off-policy correction)
    assert record["is_weight_mean"] == pytest.approx(1.0, abs=1e-3)
    after = trainer.lora_state()
    assert any(not after[k].equal(before[k]) for k in before)  # the update moved the LoRA


def test_a_sample_autofixed_unscreened_is_judged_by_the_fixed_codes_games_and_its_hint_says_so(tmp_path: Path) -> None:
    # A refiner that cannot screen (the whole-harness fallback) gets the autofix alone: the record
    # keeps the model's code hash, no screen, and the fixed code's hash as the one kept.
    run = search(tmp_path, [WRONG["hard_coded"]], max_calls=1, samples=1)
    [record] = run.read_jsonl(SAMPLES_FILE)
    [sample] = record["samples"]
    sample.update(code="0" * 16, repair={"before": None, "after": None, "changes": ["autofix: `import random` added"],
                                         "screened": 0, "code": record["kept"]})
    (run.dir / SAMPLES_FILE).write_text(json.dumps(record) + "\n")
    [(_, judgement)] = verdict_turns(run)
    assert judgement.hint.startswith("A small change was made to your code first (autofix: `import random` added). ")
    assert "It was rejected" in judgement.hint  # the fixed code's own evaluation, found by the kept hash
