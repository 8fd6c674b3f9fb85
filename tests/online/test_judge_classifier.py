"""The default judge: classifier verdicts (negation, sarcasm, tools), confidence, fitting, its wiring into serve.

No encoder is needed: the shipped cues-only fit and a small deterministic stand-in encoder cover the
plumbing; ``test_judge_encoder.py`` runs the real all-MiniLM-L6-v2 (marked real_model).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from ratchet.contracts import RatchetError
from ratchet.online.config import OnlineConfig
from ratchet.online.judge import ClassifierJudge, FeedbackClassifier, build_judge
from ratchet.online.judge.classifier import (
    CLASSES,
    CUE_SCALE,
    CUES_PARAMS_PATH,
    DEV_SETS,
    PARAMS_PATH,
    UNTOUCHED_SETS,
    Abstention,
    cross_validated_proba,
    features,
    fit,
    near_duplicate_groups,
    verdict,
)
from ratchet.online.judge.cues import NAMES as CUE_NAMES
from ratchet.online.judge.cues import cue_vector
from ratchet.online.records import Turn
from ratchet.online.sessions import SESSION_ENDED

TURN = Turn("t1", "s", False, "main", [{"role": "user", "content": "reverse a list"}], "Use reversed().", [], [], [], 0)


class HashEncoder:
    """A stand-in sentence encoder: unit vectors of hashed character trigrams (deterministic, instant)."""

    name = "hash-encoder"

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            padded = f"  {text.lower()}  "
            for i in range(len(padded) - 2):
                out[row, zlib.crc32(padded[i:i + 3].encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.fixture(scope="module")
def cues_judge():
    return ClassifierJudge(FeedbackClassifier.load(CUES_PARAMS_PATH), hints=True)


@pytest.mark.parametrize("text", [
    "Not helpful.", "Meh. Not helpful.", "This isn't great, nobody reads five paragraphs.",
    "Oh great, another essay.", "Thanks for nothing.", "Wow, very reassuring. Not.",
    "Too long. Just one short sentence, please.", "No, that's wrong.", "Kürzer bitte, nur ein Satz.",
])
def test_negation_and_sarcasm_are_corrections(cues_judge, text):
    assert cues_judge.vote(text) == -1


@pytest.mark.parametrize("text", [
    # sarcasm after a complaint, praise trailing off, praise with a condition, thanks + a change anyway
    "now my list is None... great", "Brilliant... it crashes.", "Perfect, if I wanted a novel.",
    "Thanks, but make it less stiff.",
    # non-English corrections beyond the first five languages
    "Troppo lungo, per favore una frase.", "Слишком длинно, покороче.", "長すぎます。短くしてください。",
    # thanks, then a change, in languages whose "but" has no word boundary or comes late
    "Danke für die schnelle und ausführliche Antwort, aber bitte nur zwei Sätze.", "ありがとう、でももっと短くしてください。",
    "감사해요, 근데 너무 길어요. 줄여 주세요.", "谢谢，不过太长了，能短一点吗？",
    # irony markers
    "Great, now it doesn't even run. 🙃", "Love it when my question gets ignored.",
])
def test_sarcasm_and_other_languages_are_never_read_as_praise(cues_judge, text):
    assert cues_judge.vote(text) != 1


@pytest.mark.parametrize("text", ["Thanks, that was helpful!", "Not bad at all!", "No complaints, works perfectly.",
                                  "Perfect, thank you.", "merci beaucoup !", "👍", "Спасибо, работает!",
                                  "Grazie, perfetto!", "谢谢,太好了", "Ottimo lavoro, finalmente ho capito!",
                                  "Harika olmuş, eline sağlık!", "No more crashes since that change, thank you!"])
def test_praise_including_negated_negatives_is_praise(cues_judge, text):
    assert cues_judge.vote(text) == 1


def test_moving_on_is_neutral_and_tools_follow_the_error_rules(cues_judge):
    assert cues_judge.vote("ok, next question: how do I merge two dicts?") == 0
    assert cues_judge.vote("tool: Build succeeded. 0 warnings, 0 errors.") == 1
    assert cues_judge.vote("tool: Traceback (most recent call last):\nValueError: boom") == -1
    assert cues_judge.vote("tool: total 24\n-rw-r--r-- 1 user user 512 main.py") == 1
    assert cues_judge.vote("tool: HTTP/1.1 500 Internal Server Error") == -1


def test_judgement_carries_the_instruction_as_hint(cues_judge):
    j = cues_judge.judge(TURN, "Too long. Could you keep it to one sentence?")
    assert j.reward == -1 and j.votes == [-1] and j.judge == "classifier:cues"
    assert j.hint == "Keep it to one sentence."
    assert cues_judge.judge(TURN, "Thanks!").hint is None
    assert ClassifierJudge(FeedbackClassifier.load(CUES_PARAMS_PATH), hints=False).judge(TURN, "Not helpful.").hint is None


def test_malformed_next_states(cues_judge):
    assert cues_judge.judge(TURN, "").reward == 0
    assert cues_judge.judge(TURN, "   \n").reward == 0
    assert cues_judge.judge(TURN, SESSION_ENDED).reward == 0
    with pytest.raises(TypeError, match="must be text"):
        cues_judge.judge(TURN, None)  # type: ignore[arg-type]


def test_an_unsure_verdict_is_left_out_not_signed():
    probs = np.array([0.55, 0.40, 0.05])
    assert verdict(probs, 0.6) == 0  # a correction below the bar: excluded
    assert verdict(probs, 0.5) == -1
    assert verdict(np.array([0.1, 0.2, 0.7]), 0.99) == 0  # neutral needs no bar
    assert verdict(np.array([0.05, 0.9, 0.05]), 0.6) == 1


def test_abstention_withholds_praise_that_carries_a_sarcasm_cue():
    sure_praise = np.array([[0.02, 0.95, 0.03]])
    plain, sarcastic = cue_vector("Great, thank you."), cue_vector("Brilliant... it crashes.")
    policy = Abstention(0.6)
    assert policy.verdicts(sure_praise, plain[None]) == [1]
    assert policy.verdicts(sure_praise, sarcastic[None]) == [0]  # left out, not taught as praise
    assert Abstention(0.6, veto_cues=()).verdicts(sure_praise, sarcastic[None]) == [1]
    # a correction is never vetoed into praise or 0 by a cue: the veto only withholds +1
    assert policy.verdicts(np.array([[0.9, 0.05, 0.05]]), sarcastic[None]) == [-1]
    with pytest.raises(ValueError, match="unknown veto cue"):
        Abstention(0.6, veto_cues=("sarcasmm",))


def test_cues_tell_praise_from_its_look_alikes():
    def on(text: str) -> set[str]:
        return {name for name, hit in zip(CUE_NAMES, cue_vector(text)) if hit}

    # "impressive" is sarcasm after an error, praise on its own
    assert "sarcasm" in on("Wow, an IndexError on the first run. Impressive.")
    assert "sarcasm" not in on("Did not expect it in one line. Impressive.")
    # a negated "it works" is a complaint, not praise
    assert "it_works" not in on("Non funziona.") and "complaint" in on("Non funziona.")
    assert "it_works" in on("Funziona!")
    # the goal met, unless negated
    assert "goal_met" in on("That's exactly the tone I was going for.")
    assert "goal_met" not in on("That's not what I was going for.")
    # thanks then a change, across a long clause and in CJK
    assert "praise_then_change" in on("Danke für die ausführliche Antwort, aber ein Satz reicht.")
    assert "praise_then_change" in on("감사합니다. 그런데 주석도 달아 주세요.")
    assert "next_task" in on("次に、テストを書いてください。")


def test_quoted_words_are_not_read_as_praise():
    quoted = cue_vector("Sign it 'Best, Maria'.")
    assert quoted[CUE_NAMES.index("quoted")] == 1 and quoted[CUE_NAMES.index("praise_word")] == 0
    assert cue_vector("Best answer so far")[CUE_NAMES.index("praise_word")] == 1


def test_near_duplicates_share_a_cross_validation_fold():
    texts = ["Too long!", "too long", "Thanks!", "Shorter please.", "What about sets?"]
    embeddings = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0.995, 0.0998], [1, 1, 1]], dtype=float)
    groups = near_duplicate_groups(texts, embeddings)
    assert groups[0] == groups[1]  # same words up to case and punctuation
    assert groups[1] == groups[3]  # cosine >= 0.9 to "too long", so transitively with "Too long!"
    assert len(set(groups.tolist())) == 3
    # rows of one group are held out together: every fold's test rows share no group with its train rows
    labels = ["correction", "correction", "praise", "correction", "neutral"] * 4
    x = np.tile(np.eye(5), (4, 1))
    praise = CLASSES.index("praise")
    grouped = cross_validated_proba(x, labels, folds=5, groups=np.tile(np.arange(5), 4), encoder=None, cue_scale=1.0)
    # The only praise rows are four copies of one message: held out together, praise was never seen.
    assert grouped.shape == (20, 3) and grouped[2].argmax() != praise
    # Dealt row by row, its copies leak into training and the held-out copy is "recognised".
    leaky = cross_validated_proba(x, labels, folds=5, encoder=None, cue_scale=1.0)
    assert leaky[2].argmax() == praise


def test_fit_learns_separable_classes_and_cross_validation_holds_rows_out():
    rng = np.random.default_rng(0)
    centers = np.eye(3) * 3
    labels = [CLASSES[i % 3] for i in range(60)]
    x = np.stack([centers[i % 3] + rng.normal(0, 0.3, 3) for i in range(60)])
    model = fit(x, labels, encoder=None, cue_scale=1.0)
    assert (model.proba(x).argmax(1) == [i % 3 for i in range(60)]).all()
    # Held-out rows far from every training row get uncertain probabilities: CV did not see them.
    proba = cross_validated_proba(x, labels, folds=5, encoder=None, cue_scale=1.0)
    assert proba.shape == (60, 3) and (proba.argmax(1) == [i % 3 for i in range(60)]).mean() > 0.9
    with pytest.raises(ValueError, match="features given"):
        model.proba(np.zeros((1, 4)))


def test_classifier_over_a_stand_in_encoder_round_trips(tmp_path):
    encoder = HashEncoder()
    texts = ["thanks, perfect", "great, works", "too long, shorter please", "wrong, redo it", "what about sets?",
             "and for tuples?"]
    labels = ["praise", "praise", "correction", "correction", "neutral", "neutral"]
    model = fit(features(encoder, texts, 2.0), labels, encoder=encoder.name, cue_scale=2.0)
    model.save(tmp_path / "params.json")
    loaded = FeedbackClassifier.load(tmp_path / "params.json")
    assert loaded.encoder == "hash-encoder" and loaded.weights.shape == (64 + len(loaded.cues), 3)
    judge = ClassifierJudge(loaded, encoder=encoder, min_confidence=0.0)
    assert judge.name == "classifier"
    assert [judge.vote(t) for t in texts] == [1, 1, -1, -1, 0, 0]


def test_missing_encoder_falls_back_to_the_cues_fit_and_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("RATCHET_CACHE_DIR", str(tmp_path))  # nothing pulled here
    judge = ClassifierJudge.default()
    assert judge.name == "classifier" and judge.classifier.encoder == "all-minilm-l6-v2"
    with caplog.at_level("WARNING"):
        j = judge.judge(TURN, "Not helpful.")
    assert j.reward == -1 and j.judge == "classifier:cues"
    assert "ratchet models pull all-minilm-l6-v2" in caplog.text
    # Without a fallback the missing encoder is an error naming the fix.
    strict = ClassifierJudge(FeedbackClassifier.load(PARAMS_PATH))
    with pytest.raises(RatchetError, match="all-minilm-l6-v2"):
        strict.judge(TURN, "Not helpful.")


def test_bad_parameter_files_name_the_fix(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(RatchetError, match="cannot load the feedback classifier") as err:
        FeedbackClassifier.load(tmp_path / "bad.json")
    assert "fit_feedback_classifier.py" in err.value.hint
    params = FeedbackClassifier.load(CUES_PARAMS_PATH).to_dict()
    params["cues"] = params["cues"][:-1]
    (tmp_path / "other.json").write_text(__import__("json").dumps(params))
    with pytest.raises(RatchetError, match="other cues"):
        FeedbackClassifier.load(tmp_path / "other.json")


def test_shipped_parameters_record_what_fitted_them():
    for path, encoder, width in ((PARAMS_PATH, "all-minilm-l6-v2", 384), (CUES_PARAMS_PATH, None, 0)):
        model = FeedbackClassifier.load(path)
        assert model.encoder == encoder and model.meta["data"] == list(DEV_SETS) and model.meta["rows"] >= 900
        assert not set(UNTOUCHED_SETS) & set(model.meta["data_sha256"])  # the set it is measured on once
        assert model.weights.shape == (width + len(model.cues), 3) and model.cue_scale == CUE_SCALE


def test_the_classifier_judge_of_serve(tmp_path, monkeypatch):
    from ratchet.config import load_config
    from ratchet.online.loops import make_judge

    # The default, auto, is this judge only without the 1.5B (tests/online/test_judge_auto.py).
    config = OnlineConfig(judge={"kind": "classifier"})
    assert config.judge.min_confidence == 0.6
    judge = make_judge(config).inner
    assert isinstance(judge, ClassifierJudge) and judge.hints and judge.min_confidence == 0.6
    assert not make_judge(OnlineConfig(learn="binary", judge={"kind": "classifier"})).inner.hints
    (tmp_path / "serve.yaml").write_text("judge:\n  kind: rule\n")
    assert load_config(OnlineConfig, tmp_path / "serve.yaml", []).judge.kind == "rule"
    assert load_config(OnlineConfig, None, ["judge.min_confidence=0.8"]).judge.min_confidence == 0.8
    with pytest.raises(Exception, match="min_confidence"):
        load_config(OnlineConfig, None, ["judge.min_confidence=1.5"])
    with pytest.raises(ValueError, match="unknown judge kind"):
        build_judge("oracle")


def test_serve_flag_and_start_check(tmp_path, monkeypatch):
    from ratchet.online import launch

    seen = {}
    monkeypatch.setattr(launch, "run_server", lambda config: seen.setdefault("config", config))
    from typer.testing import CliRunner

    from ratchet.cli import app

    CliRunner().invoke(app, ["serve", "--judge", "rule"])
    assert seen.pop("config").judge.kind == "rule"
    CliRunner().invoke(app, ["serve"])
    assert seen.pop("config").judge.kind == "auto"
    CliRunner().invoke(app, ["serve", "--judge", "classifier"])
    assert seen.pop("config").judge.kind == "classifier"
    CliRunner().invoke(app, ["serve", "--judge", "local:qwen2.5-coder-1.5b"])
    config = seen.pop("config")
    assert config.judge.kind == "model" and config.judge.model == "local:qwen2.5-coder-1.5b"
    # At start, a missing encoder is said with the fix (the judge then uses its cues alone).
    monkeypatch.setenv("RATCHET_CACHE_DIR", str(tmp_path))
    printed = []
    monkeypatch.setattr(launch.console, "print", lambda text, *a, **k: printed.append(str(text)))
    assert launch._check_judge(OnlineConfig()).kind == "classifier"  # auto, in a cache without the 1.5B
    assert printed and "ratchet models pull all-minilm-l6-v2" in printed[0]


def test_abstention_sweep_trades_recall_for_sign_errors():
    from ratchet.online.judge.comparison import sweep_abstention
    from ratchet.online.judge.scoring import load_feedback

    rows = load_feedback(Path(__file__).resolve().parents[1] / "data" / "feedback" / "dev.jsonl")
    sweep = sweep_abstention(None, rows, (0.4, 0.9), cue_scales=(3.0,), seeds=(0,))
    low, high = sweep
    assert [s["min_confidence"] for s in sweep] == [0.4, 0.9] and low["cue_scale"] == 3.0
    assert high["correction_recall"] < low["correction_recall"] and high["sign_errors"] <= low["sign_errors"]
    assert 0 < low["correction_recall"] <= 1 and low["sign_error_rate"] == round(low["sign_errors"] / len(rows), 4)


def cue(name: str, text: str) -> bool:
    return bool(cue_vector(text)[CUE_NAMES.index(name)])


def test_praise_then_a_next_request_is_its_own_cue_and_a_but_or_a_jab_is_not_it():
    for text in ("Worked like a charm. Could you also make it recurse?", "perfect. now one for UK postcodes?",
                 "¡Genial, funciona! ¿Y si quiero el orden inverso?", "好用，谢谢！那怎么杀掉这个进程？"):
        assert cue("praise_then_next", text), text
    for text in ("Thanks, but could you make it shorter?", "What's the best way to learn Vim?",
                 "Not very helpful. What should I change?", "Great, now it doesn't even compile?"):
        assert not cue("praise_then_next", text), text


def test_negated_negatives_and_thanks_of_more_languages_are_cues():
    for text in ("Honestly, I can't fault any of it.", "Gar nicht übel.", "Pas bête du tout !", "Nada mal, hein!",
                 "Couldn't have worded it better myself."):
        assert cue("negated_negative", text), text
    for text in ("Чудово, дякую!", "Skvělé, díky moc!", "Tuyệt vời, cảm ơn bạn!", "बहुत अच्छा, धन्यवाद!", "شكرًا لك"):
        assert cue("thanks", text), text
    assert not cue("negated_negative", "There was nothing wrong with the old version, why change it?")


def test_the_cues_only_fit_learns_from_cue_bearing_messages_and_still_judges_the_rest():
    from ratchet.online.judge.classifier import cue_bearing

    texts = ["Thanks, perfect!", "Too long, shorten it.", "went from 40s to 2s", "ok. next question?"]
    cues = np.stack([cue_vector(t) for t in texts])
    assert cue_bearing(cues).tolist() == [True, True, False, True]
    x = features(None, texts, CUE_SCALE, cues)
    labels = ["praise", "correction", "praise", "neutral"]
    proba = cross_validated_proba(x, labels, folds=2, fit_on=cue_bearing(cues), encoder=None, cue_scale=CUE_SCALE)
    assert proba.shape == (4, 3) and np.allclose(proba.sum(axis=1), 1)  # every row predicted, fitted or not
    shipped = FeedbackClassifier.load(CUES_PARAMS_PATH).meta
    assert shipped["rows_without_a_cue_left_out"] > 0
