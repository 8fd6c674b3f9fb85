"""``ratchet serve feed RUN``: a finished AutoHarness run's verdicts become judged turns of a serving
run's queue, once, scored by that run's trainer; bad input is one line naming the fix.

The searches are those of ``test_verdicts.py`` (AutoHarness on the engine, a scripted model with the
0.5B's own replies); the trainer's torch policy is replaced by ``FlatPolicy`` (bytes as tokens, every
log-prob -1) through :func:`ratchet.online.verdicts.trainer_policy`, the one place the CLI loads it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_verdicts import KEPT, WRONG, FlatPolicy, search
from typer.testing import CliRunner

from ratchet.cli import EXIT_BAD_INPUT, app
from ratchet.online import status as status_mod
from ratchet.online import verdicts
from ratchet.online.config import OnlineConfig
from ratchet.online.queue import TurnQueue

runner = CliRunner()
SERVING = "serve-test"


def serving_run(root: Path, learn: str = "combine", name: str = SERVING) -> Path:
    """A serving run as ``ratchet serve`` leaves it: its config and its queue under ``online/``."""
    base = status_mod.online_dir(root / name)
    base.mkdir(parents=True)
    config = OnlineConfig(model="local:smollm2-135m", learn=learn, trainer={"max_seq_len": 4096})
    (base / "config.json").write_text(config.model_dump_json(indent=2, exclude={"api_key"}))
    TurnQueue(base / status_mod.QUEUE_NAME).close()
    return base


class Loader:
    """Stands in for :func:`verdicts.trainer_policy`: records what it was asked for, serves at v2."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, Path]] = []
        self.policy = FlatPolicy()

    def __call__(self, config, versions_dir):
        self.calls.append((config, Path(versions_dir)))
        return self.policy, 2


def feed(*args: str):
    return runner.invoke(app, ["serve", "feed", *args], env={"COLUMNS": "200"})


def test_feed_adds_a_searchs_verdicts_to_the_serving_queue_once(tmp_path: Path, monkeypatch) -> None:
    four = search(tmp_path, [WRONG["blank_is_space"], WRONG["inverted"], WRONG["hard_coded"], KEPT], max_calls=4)
    two = search(tmp_path, ["I would write a function that lists the empty cells.", KEPT], max_calls=2)
    root = tmp_path / "runs"
    base = serving_run(root)
    loader = Loader()
    monkeypatch.setattr(verdicts, "trainer_policy", loader)
    trainer_view = TurnQueue(base / status_mod.QUEUE_NAME)  # opened before, as a running trainer's is

    first = feed(four.id, "--store", str(root))  # the latest serving run, found without --run
    assert first.exit_code == 0, (first.output, first.exception)
    out = " ".join(first.output.split())
    assert f"{four.id}: 4 turns, 4 new, 0 already in the queue; 0 gave no usable code; rewards +1×1 −1×3 0×0; " \
           f"4 with a hint" in out, out
    assert "to tokenize and score 4 replies" in out  # the progress line before the model loads
    assert f"{SERVING}: fed 4 new turn(s) as v2's samples; its trainer takes them when `ratchet serve --run " \
           f"{SERVING}` starts it again" in out
    [(config, versions_dir)] = loader.calls  # the serving run's trainer: its model, signal and settings
    assert (config.model, config.signal, config.max_seq_len) == ("smollm2-135m", "combine", 4096)
    assert versions_dir == base / status_mod.VERSIONS_NAME
    stats = trainer_view.stats()
    assert (stats["turns"], stats["judged"], stats["positive"], stats["negative"]) == (4, 4, 1, 3)

    # The server now runs; the first run again by its directory, and a second run: only its turns are new.
    (base / "server.json").write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": 1}))
    second = feed(str(four.dir), two.id, "--run", SERVING, "--store", str(root))
    assert second.exit_code == 0, (second.output, second.exception)
    out = " ".join(second.output.split())
    assert f"{four.id}: 4 turns, 0 new, 4 already in the queue" in out
    assert f"{two.id}: 2 turns, 2 new, 0 already in the queue; 1 gave no usable code; rewards +1×1 −1×1 0×0" in out
    assert "to tokenize and score 2 replies" in out
    assert f"{SERVING}: fed 2 new turn(s) as v2's samples; its running trainer takes them in its next batches" in out

    third = feed(four.id, two.id, "--store", str(root))
    assert third.exit_code == 0, (third.output, third.exception)
    out = " ".join(third.output.split())
    assert "6 turns" not in out and f"{two.id}: 2 turns, 0 new, 2 already in the queue" in out
    assert f"{SERVING}: fed 0 new turn(s)" in out
    assert len(loader.calls) == 2  # nothing new: no model loaded
    assert trainer_view.stats()["turns"] == 6

    batch = trainer_view.take_batch(8)  # what the running trainer takes: tokenized, at the serving version
    assert len(batch) == 6
    for sample in batch:
        turn = sample.turn
        assert turn.policy_version == 2 and turn.session_id.startswith("verdict:")
        assert turn.response_token_ids == list(turn.response_text.encode())
        assert turn.response_logprobs == [-1.0] * len(turn.response_token_ids)
        assert turn.prompt_token_ids[-len(b"<assistant>"):] == list(b"<assistant>")
    assert loader.policy.scored == 6  # each reply scored once, in the call that added it


def test_feed_warns_when_the_trainer_would_cut_the_requests(tmp_path: Path, monkeypatch) -> None:
    run = search(tmp_path, [KEPT], max_calls=1, samples=1)
    root = tmp_path / "runs"
    base = serving_run(root)
    config = OnlineConfig.model_validate_json((base / "config.json").read_text())
    short = config.model_copy(update={"trainer": config.trainer.model_copy(update={"max_seq_len": 64})})
    (base / "config.json").write_text(short.model_dump_json())
    monkeypatch.setattr(verdicts, "trainer_policy", Loader())
    result = feed(run.id, "--store", str(root))
    assert result.exit_code == 0, (result.output, result.exception)
    out = " ".join(result.output.split())
    assert f"{run.id}: 1 turns, 1 new" in out and "rewards +1×0 −1×0 0×1; 1 with a hint" in out  # alone: reward 0
    assert "1 new turn(s) are longer than trainer.max_seq_len (64)" in out
    assert "--set trainer.max_seq_len=4096" in out


@pytest.fixture
def no_model(monkeypatch):
    """Every refusal comes before the trainer's model would load."""

    def refused(*_):
        raise AssertionError("the model was loaded for input that is refused")

    monkeypatch.setattr(verdicts, "trainer_policy", refused)


def test_feed_refuses_an_unknown_run_and_a_run_without_samples(tmp_path: Path, no_model) -> None:
    from ratchet.store import RunStore

    root = tmp_path / "runs"
    empty = RunStore(root).create_run("evolve", {"proposer": "reflective"}, name="reflective")
    serving_run(root)
    unknown = feed("nope", "--store", str(root))
    assert unknown.exit_code != 0 and "no run 'nope'" in str(unknown.exception)
    bare = feed(empty.id, "--store", str(root))
    message = str(bare.exception)
    assert bare.exit_code != 0 and f"run {empty.id} (evolve) recorded no proposer samples" in message
    assert "AutoHarness, and `ratchet evolve` with the critic_refiner proposer" in message


def test_feed_refuses_a_serving_run_that_does_not_learn_or_none_at_all(tmp_path: Path, no_model) -> None:
    run = search(tmp_path, [KEPT], max_calls=1, samples=1)
    root = tmp_path / "runs"
    none = feed(run.id, "--store", str(root))
    assert none.exit_code != 0 and "no serving run under" in str(none.exception)
    serving_run(root, learn="off", name="quiet")
    off = feed(run.id, "--run", "quiet", "--store", str(root))
    message = str(off.exception)
    assert off.exit_code != 0 and "serving run quiet does not learn (it was served with --learn off)" in message
    assert "ratchet serve --run quiet --learn combine" in message
    # The real command: exit code 2 and the one error, no traceback.
    entry = "import sys; from ratchet.cli import main; sys.argv = ['ratchet', *sys.argv[1:]]; main()"
    done = subprocess.run([sys.executable, "-c", entry, "serve", "feed", run.id, "--run", "quiet", "--store", str(root)],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: serving run quiet does not learn")


@pytest.mark.real_model
def test_feed_scores_with_the_serving_runs_trainer_at_the_version_serving_now(tmp_path: Path) -> None:
    # SmolLM2-135M in torch, as the serving run's trainer loads it: the fed log-probs are that model's
    # at the version current when fed (v0, then a published v1 whose LoRA is not zero), not the base's.
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from ratchet.models.registry import is_verified
    from ratchet.online.trainer import Trainer
    from ratchet.online.versions import VersionStore

    if not is_verified("smollm2-135m", rehash=False):
        pytest.skip("smollm2-135m is not pulled (ratchet models pull smollm2-135m)")
    first = search(tmp_path, [WRONG["hard_coded"], KEPT], max_calls=2, samples=2)
    second = search(tmp_path, [WRONG["inverted"], KEPT], max_calls=2, samples=2)
    root = tmp_path / "runs"
    base = serving_run(root)
    queue = TurnQueue(base / status_mod.QUEUE_NAME)
    result = feed(first.id, "--store", str(root))
    assert result.exit_code == 0, (result.output, result.exception)
    assert "fed 2 new turn(s) as v0's samples" in " ".join(result.output.split())

    config = OnlineConfig.model_validate_json((base / "config.json").read_text()).resolved_trainer()
    trainer = Trainer.from_config(config)
    torch.manual_seed(0)
    state = {k: torch.randn_like(v) * 0.05 if "lora_B" in k else v for k, v in trainer.lora_state().items()}
    trainer.set_lora_state(state, 1)
    VersionStore(base / status_mod.VERSIONS_NAME).publish(trainer.save_adapter(tmp_path / "adapter"), {}, promote=True)
    result = feed(second.id, "--store", str(root))
    assert result.exit_code == 0, (result.output, result.exception)
    assert "fed 2 new turn(s) as v1's samples" in " ".join(result.output.split())

    turns = {s.turn.session_id.split(":")[1] + s.turn.response_text: s.turn for s in queue.take_batch(8)}
    assert len(turns) == 4
    for run, version in ((first, 0), (second, 1)):
        fed = turns[run.id + KEPT]
        assert fed.policy_version == version and len(fed.response_logprobs) == len(fed.response_token_ids) > 100
        ids = fed.prompt_token_ids + fed.response_token_ids
        trainer.set_lora_state(state, 1) if version else trainer.reset_to_base()
        [at_version] = trainer.score([ids], [len(fed.prompt_token_ids)])
        assert fed.response_logprobs == pytest.approx([float(x) for x in at_version], abs=1e-3)
        trainer.reset_to_base() if version else trainer.set_lora_state(state, 1)
        [other] = trainer.score([ids], [len(fed.prompt_token_ids)])
        assert max(abs(a - float(b)) for a, b in zip(fed.response_logprobs, other, strict=True)) > 1e-2


def test_feed_notes_replies_written_by_another_model_than_the_trained_one() -> None:
    from types import SimpleNamespace

    from ratchet.cli.serve import _writer_note

    def run(**config):
        return SimpleNamespace(id="r1", config=config)

    assert _writer_note(run(model="local:qwen2.5-coder-1.5b@v2"), "qwen2.5-coder-0.5b") == (
        "r1: its replies were written by qwen2.5-coder-1.5b; qwen2.5-coder-0.5b is trained on them as if it had "
        "written them")
    assert _writer_note(run(model="local:qwen2.5-coder-0.5b@v3"), "qwen2.5-coder-0.5b") is None  # a version of it
    # an engine run's proposer model wrote the samples, not its task model
    assert _writer_note(run(model="local:qwen2.5-coder-0.5b", proposer_model="local:qwen2.5-coder-1.5b"),
                        "qwen2.5-coder-0.5b") is not None
    assert _writer_note(run(model="scripted:"), "qwen2.5-coder-0.5b") is None  # not a local model: nothing to compare


def test_a_feed_interrupted_before_the_judgements_judges_its_turns_on_the_next_call(tmp_path: Path, monkeypatch) -> None:
    four = search(tmp_path, [WRONG["blank_is_space"], WRONG["inverted"], WRONG["hard_coded"], KEPT], max_calls=4)
    root = tmp_path / "runs"
    base = serving_run(root)
    loader = Loader()
    monkeypatch.setattr(verdicts, "trainer_policy", loader)
    queue = TurnQueue(base / status_mod.QUEUE_NAME)
    pairs = verdicts.tokenized(verdicts.verdict_turns(four), loader.policy)
    queue.add_turns([t for t, _ in pairs])  # the turns written, then the process killed: no judgement
    assert (queue.stats()["turns"], queue.stats()["judged"]) == (4, 0)

    again = feed(four.id, "--store", str(root))
    assert again.exit_code == 0, (again.output, again.exception)
    out = " ".join(again.output.split())
    assert "4 turn(s) an interrupted feed stored without their judgement are judged now" in out
    assert f"{four.id}: 4 turns, 0 new, 4 already in the queue" in out
    assert not loader.calls  # their token ids were stored with them: nothing scored again
    stats = queue.stats()
    assert (stats["turns"], stats["judged"], stats["positive"], stats["negative"]) == (4, 4, 1, 3)
    assert len(queue.take_batch(8)) == 4  # trainable now
