"""The stacked judge: the classifier weighed with a model's label reading (no big model here, one marked test)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ratchet.contracts import RatchetError
from ratchet.online.judge import build_judge
from ratchet.online.judge.classifier import CLASSES, ClassifierJudge, FeedbackClassifier
from ratchet.online.judge.cues import NAMES as CUE_NAMES
from ratchet.online.judge.labels import CachedLabelReader, cache_key, messages, prompt_digest
from ratchet.online.judge.stacked import STACKER_PATH, StackedJudge, Stacker, fit_stacker, stack_features
from ratchet.online.records import Turn


class FakeReader:
    """Label log-probabilities by a keyword: what a model that reads meaning would give."""

    name = "fake-reader"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def logprobs(self, reply: str, message: str, request: str = "") -> np.ndarray:
        self.calls.append((reply, message, request))
        if "grazie" in message.lower():
            return np.log(np.array([0.05, 0.9, 0.05]))
        if "falsch" in message.lower():
            return np.log(np.array([0.9, 0.05, 0.05]))
        return np.log(np.array([0.1, 0.1, 0.8]))


def blind_classifier() -> ClassifierJudge:
    """A cues-only classifier that always says 'neutral, unsure': the reader must decide."""
    weights = np.zeros((len(CUE_NAMES), len(CLASSES)))
    return ClassifierJudge(FeedbackClassifier(weights, np.array([0.0, 0.0, 0.1]), encoder=None, cue_scale=1.0))


def trained_stacker() -> Stacker:
    """A stacker fitted where the classifier is blind and the reader is right."""
    rng = np.random.default_rng(0)
    labels, pcs, pls = [], [], []
    reader = FakeReader()
    for word, label in (("grazie", "praise"), ("falsch", "correction"), ("next", "neutral")):
        for _ in range(30):
            labels.append(label)
            pcs.append(np.full(3, 1 / 3) + rng.normal(0, 0.01, 3))
            pls.append(reader.logprobs("", word) + rng.normal(0, 0.05, 3))
    pc = np.abs(np.array(pcs))
    pc /= pc.sum(axis=1, keepdims=True)
    return fit_stacker(pc, np.array(pls), labels, model="fake-reader", min_confidence=0.6)


def turn(reply: str = "An answer.") -> Turn:
    return Turn("t1", "s1", False, "main", [{"role": "user", "content": "q"}], reply, [], [], [], 0)


def test_the_reader_decides_where_the_classifier_is_blind():
    reader = FakeReader()
    judge = StackedJudge(blind_classifier(), reader, trained_stacker())
    assert judge.judge(turn(), "Grazie mille, perfetto").reward == 1
    corrected = judge.judge(turn(), "Das ist falsch. Bitte kürzer.")
    assert corrected.reward == -1 and corrected.hint  # a correction carries its instruction
    assert judge.judge(turn(), "What about sets?").reward == 0
    assert reader.calls[0] == ("An answer.", "Grazie mille, perfetto", "q")  # the reply and the request are read too


def test_tool_outputs_and_ended_sessions_never_reach_the_reader():
    reader = FakeReader()
    judge = StackedJudge(blind_classifier(), reader, trained_stacker())
    assert judge.judge(turn(), "tool: Traceback (most recent call last):\nValueError: bad").reward == -1
    assert judge.judge(turn(), "").reward == 0
    assert reader.calls == []


def test_praise_with_a_sarcasm_cue_is_withheld_whatever_the_reader_says():
    judge = StackedJudge(blind_classifier(), FakeReader(), trained_stacker())
    # the reader says praise ("grazie"), the message carries an irony marker the veto knows
    assert judge.judge(turn(), "Oh great, grazie, now it doesn't even compile 🙃").reward <= 0


def test_a_stacker_round_trips_and_refuses_another_prompt(tmp_path):
    stacker = trained_stacker()
    path = tmp_path / "s.json"
    stacker.save(path)
    again = Stacker.load(path)
    pc, pl = np.array([[0.2, 0.5, 0.3]]), np.log(np.array([[0.1, 0.8, 0.1]]))
    assert np.allclose(again.proba(pc, pl), stacker.proba(pc, pl), atol=1e-5)
    data = json.loads(path.read_text())
    data["prompt"] = "0" * 16
    path.write_text(json.dumps(data))
    with pytest.raises(RatchetError, match="another label prompt"):
        StackedJudge(blind_classifier(), FakeReader(), Stacker.load(path))
    path.write_text("{}")
    with pytest.raises(RatchetError, match="refit"):
        Stacker.load(path)


def test_praise_and_correction_each_need_their_own_confidence(tmp_path):
    from ratchet.online.judge.classifier import Abstention

    stacker = trained_stacker()
    stacker.min_confidence, stacker.praise_confidence = 0.8, 0.6
    stacker.save(tmp_path / "s.json")
    abstention = Stacker.load(tmp_path / "s.json").abstention()
    assert (abstention.min_confidence, abstention.praise_confidence) == (0.8, 0.6)
    no_cues = np.zeros((3, len(CUE_NAMES)))
    proba = np.array([[0.25, 0.65, 0.10], [0.75, 0.15, 0.10], [0.85, 0.10, 0.05]])
    assert abstention.verdicts(proba, no_cues) == [1, 0, -1]  # praise at 0.65 heard, a correction at 0.75 not
    assert Abstention(0.8).verdicts(proba, no_cues) == [0, 0, -1]  # without it, one threshold for both


def test_the_fit_is_deterministic():
    a, b = trained_stacker(), trained_stacker()
    assert np.array_equal(a.weights, b.weights) and a.prompt == prompt_digest()


def test_stack_features_renormalize_the_readers_log_probabilities():
    z = stack_features(np.array([[0.5, 0.25, 0.25]]), np.array([[-10.0, -11.0, -12.0]]))
    assert np.allclose(np.exp(z[0, 3:]).sum(), 1.0, atol=1e-6) and np.allclose(np.exp(z[0, :3]).sum(), 1.0, atol=1e-6)


def test_the_cache_reads_each_message_once_and_survives_a_restart(tmp_path):
    reader = FakeReader()
    cached = CachedLabelReader(reader, tmp_path / "c.jsonl")
    first = cached.logprobs("reply", "grazie")
    assert np.allclose(cached.logprobs("reply", "grazie"), first, atol=1e-4) and len(reader.calls) == 1
    other = FakeReader()
    again = CachedLabelReader(other, tmp_path / "c.jsonl")
    assert np.allclose(again.logprobs("reply", "grazie"), first, atol=1e-4) and other.calls == []
    assert again.seconds([("reply", "grazie", "")]) and cache_key("m", "r", "x") != cache_key("m", "r", "y")
    # the request is part of what was read: another request is another reading
    assert cache_key("m", "r", "x", "sum a list") != cache_key("m", "r", "x", "sort a list")
    again.logprobs("reply", "grazie", "translate this")
    assert other.calls == [("reply", "grazie", "translate this")]


def test_the_judge_reads_the_turns_last_request_beside_the_reply():
    from ratchet.online.judge.classifier import ClassifierJudge
    from ratchet.online.records import Turn

    reader = FakeReader()
    judge = StackedJudge(ClassifierJudge.default(), reader, trained_stacker())
    chat = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "what is 2+2?"}]}]
    judge.judge(Turn("t1", "s1", False, "main", chat, "4", [], [], [], 0), "grazie")
    assert reader.calls == [("4", "grazie", "what is 2+2?")]


def test_the_prompt_shows_the_request_the_replys_start_and_the_message_after_its_examples():
    from ratchet.online.judge.labels import EXAMPLES

    chat = messages("x" * 1000, "Too long.", "q" * 500)
    assert chat[0]["role"] == "system" and "praise, correction or neutral" in chat[0]["content"]
    shown = chat[-1]["content"]
    assert chat[-1]["role"] == "user" and len(chat) == 2 + 2 * len(EXAMPLES)
    assert "x" * 300 in shown and "x" * 301 not in shown and "Too long." in shown
    assert "q" * 200 in shown and "q" * 201 not in shown
    # the worked examples are earlier turns answered with a label word, so the model's next word is one
    assert {m["content"] for m in chat[2:-1:2]} <= {"praise", "correction", "neutral"}
    assert messages("r", "m", "a")[:-1] == messages("s", "n", "b")[:-1]  # a shared prefix: its cache is reused


@pytest.mark.skipif(not STACKER_PATH.exists(), reason="no shipped stacker")
def test_build_judge_makes_the_shipped_stacked_judge_without_loading_a_model(monkeypatch, tmp_path):
    from ratchet.models import registry

    monkeypatch.setattr(registry, "model_path", lambda name: tmp_path / f"{name}.gguf")  # pulled or not
    judge = build_judge("stacked", learn="combine")
    assert isinstance(judge.inner, StackedJudge) and judge.inner.reader._policy is None  # loaded on first turn
    assert judge.inner.abstention.min_confidence == Stacker.load().min_confidence
    assert build_judge("stacked", learn="combine", min_confidence=0.9).inner.abstention.min_confidence == 0.9
    with pytest.raises(RatchetError, match="fitted with"):
        build_judge("stacked", learn="combine", label_model="smollm2-135m")


def test_serve_config_refuses_a_non_local_label_model():
    from ratchet.config import load_config
    from ratchet.online.config import OnlineConfig
    from ratchet.online.loops import make_judge

    config = load_config(OnlineConfig, None, ["judge.kind=stacked", "judge.model=openai:gpt-x"])
    with pytest.raises(ValueError, match="local:NAME"):
        make_judge(config)


@pytest.mark.real_model
def test_the_embedded_model_reads_praise_and_correction_apart():
    from ratchet.online.judge.labels import LlamaLabelReader

    reader = LlamaLabelReader("qwen2.5-coder-0.5b")
    try:
        reply = "You can reverse a list with my_list[::-1]."
        praise = reader.logprobs(reply, "Thanks, that worked perfectly!")
        correction = reader.logprobs(reply, "No, that's wrong: it crashes with a TypeError.")
    finally:
        reader.close()
    assert praise.shape == (3,) and np.all(praise <= 0) and np.all(np.isfinite(correction))
    c, p = CLASSES.index("correction"), CLASSES.index("praise")
    # however biased the small model is overall, the two messages move its reading apart
    assert praise[p] - praise[c] > correction[p] - correction[c]


def test_every_development_message_has_a_cached_reading_and_the_shipped_weighing_is_fitted_on_them():
    import hashlib
    from pathlib import Path

    from ratchet.online.judge.classifier import DEV_SETS, UNTOUCHED_SETS
    from ratchet.online.judge.scoring import load_feedback

    class NoModel:
        name = "qwen2.5-coder-1.5b"

        def logprobs(self, reply, message, request=""):
            raise AssertionError(f"not cached: {message!r}")

    root = Path(__file__).resolve().parents[1] / "data"
    cached = CachedLabelReader(NoModel(), root / "feedback_labels" / "qwen2.5-coder-1.5b.jsonl")
    rows = [r for name in DEV_SETS for r in load_feedback(root / "feedback" / name) if r.source == "user"]
    readings = np.array([cached.logprobs(r.reply, r.next_state, r.request) for r in rows])
    assert readings.shape == (len(rows), 3) and np.all(readings <= 0)
    shipped = Stacker.load()
    assert shipped.meta["weighing"] == "fitted" and shipped.model == "qwen2.5-coder-1.5b"
    assert shipped.meta["rows"] == len(rows) and shipped.meta["data"] == list(DEV_SETS)
    for name in DEV_SETS:  # fitted on these sets as they are now, none of the sets measured once
        digest = hashlib.sha256((root / "feedback" / name).read_bytes()).hexdigest()
        assert shipped.meta["data_sha256"][name] == digest, f"{name} changed since the stacker was fitted"
    assert not set(UNTOUCHED_SETS) & set(shipped.meta["data_sha256"])


def test_a_missing_label_model_is_named_with_its_pull_command_when_the_judge_is_built(monkeypatch, tmp_path):
    from ratchet.models import registry

    monkeypatch.setattr(registry, "cache_dir", lambda: tmp_path)  # an empty model cache
    with pytest.raises(RatchetError) as raised:
        StackedJudge.default()
    assert "ratchet models pull qwen2.5-coder-1.5b" in str(raised.value) + str(getattr(raised.value, "hint", ""))


def test_serve_refuses_to_start_a_stacked_judge_whose_label_model_is_missing(monkeypatch, tmp_path):
    from ratchet.config import load_config
    from ratchet.models import registry
    from ratchet.online.config import OnlineConfig
    from ratchet.online.launch import _check_judge

    monkeypatch.setattr(registry, "cache_dir", lambda: tmp_path)  # an empty model cache
    with pytest.raises(RatchetError, match="qwen2.5-coder-1.5b"):
        _check_judge(load_config(OnlineConfig, None, ["judge.kind=stacked"]))
    _check_judge(load_config(OnlineConfig, None, ["judge.kind=rule"]))  # other judges start as before
