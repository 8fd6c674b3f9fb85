"""``judge.kind=auto``, the default: the stacked judge when its label model is in the model cache and
hashes to its pinned SHA-256, else the classifier — never a download — and the choice said at start,
in ``ratchet serve status`` and on the dashboard.

The label model's two branches run on a fake model cache: one without the file, one holding a small
file whose SHA-256 the catalog entry is pointed at (so the real hash check runs), one with the file
altered. The label reader is stubbed; the 1.5B itself is read only by the ``real_model`` test."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from ratchet.config import load_config
from ratchet.contracts import RatchetError
from ratchet.models import registry
from ratchet.online import status as status_mod
from ratchet.online.config import OnlineConfig
from ratchet.online.judge import ClassifierJudge, JudgeChoice, StackedJudge, build_judge, choose_judge
from ratchet.online.judge.classifier import CLASSES
from ratchet.online.judge.labels import DEFAULT_MODEL
from ratchet.online.judge.stacked import STACKER_PATH, Stacker
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Turn

LABEL_MODEL = DEFAULT_MODEL
PULL = f"ratchet models pull {LABEL_MODEL}"

pytestmark = pytest.mark.skipif(not STACKER_PATH.exists(), reason="no shipped stacker")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty model cache in which nothing may be downloaded; ``put(data)`` files ``data`` as the
    label model, its catalog entry pinned to that data's size and SHA-256."""
    monkeypatch.setattr(registry, "cache_dir", lambda: tmp_path / "models")
    monkeypatch.setattr(registry, "pull", lambda *a, **k: pytest.fail("auto must never start a download"))
    monkeypatch.setattr(registry, "download_wheel", lambda *a, **k: pytest.fail("auto must never start a download"))
    (tmp_path / "models").mkdir()

    def put(data: bytes, *, pinned: bytes | None = None) -> None:
        pinned = data if pinned is None else pinned
        entry = dataclasses.replace(registry.CATALOG[LABEL_MODEL], size=len(pinned),
                                    sha256=hashlib.sha256(pinned).hexdigest())
        monkeypatch.setitem(registry.CATALOG, LABEL_MODEL, entry)
        registry.cached_path(LABEL_MODEL).write_bytes(data)

    return put


class StubReader:
    """The label model's reading, without the model: a correction is read as one."""

    name = LABEL_MODEL

    def __init__(self, *a, **k) -> None:
        self.read: list[str] = []

    def logprobs(self, reply: str, message: str, request: str = "") -> np.ndarray:
        self.read.append(message)
        word = "correction" if "wrong" in message.lower() else "praise"
        return np.array([-0.05 if c == word else -4.0 for c in CLASSES])


def turn(i: int = 0) -> Turn:
    return Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": "reverse a list"}],
                "Use my_list.reverse().", [1], [2], [-0.5], 0)


def test_the_default_kind_is_auto():
    assert OnlineConfig().judge.kind == "auto"
    assert load_config(OnlineConfig, None, ["judge.kind=classifier"]).judge.kind == "classifier"


def test_without_the_label_model_auto_is_the_classifier_and_says_how_to_get_the_stacked_judge(cache):
    choice = choose_judge("auto")
    assert choice == JudgeChoice("auto", "classifier", None, choice.reason, PULL)
    assert "is absent" in choice.reason and LABEL_MODEL in choice.reason
    assert PULL in choice.line() and "judge: classifier, chosen by judge.kind=auto" in choice.line()
    from ratchet.online.loops import make_judge

    judge = make_judge(OnlineConfig()).inner
    assert isinstance(judge, ClassifierJudge) and judge.min_confidence == 0.6  # the classifier's own threshold
    assert isinstance(build_judge("auto").inner, ClassifierJudge)


def test_a_label_model_that_does_not_match_its_hash_is_not_used(cache):
    cache(b"altered bytes of the same size", pinned=b"the label model's real bytes!!")
    choice = choose_judge("auto")
    assert choice.kind == "classifier" and "SHA-256" in choice.reason and choice.fix == PULL


def test_with_the_label_model_auto_is_the_stacked_judge_and_judges_with_it(cache, monkeypatch):
    from ratchet.online.judge import stacked
    from ratchet.online.loops import make_judge

    cache(b"a stand-in for the label model's bytes")
    choice = choose_judge("auto")
    assert choice == JudgeChoice("auto", "stacked", LABEL_MODEL, f"its label model {LABEL_MODEL} is pulled and verified")
    assert choice.fix is None and "judge: stacked, chosen by judge.kind=auto" in choice.line()
    monkeypatch.setattr(stacked, "LlamaLabelReader", StubReader)
    judge = make_judge(OnlineConfig(learn="binary"))
    assert isinstance(judge.inner, StackedJudge)
    assert judge.inner.abstention.min_confidence == Stacker.load().min_confidence  # its fitted threshold
    verdict = judge.judge(turn(), "No, that's wrong: it reverses in place and returns None.")
    assert verdict.reward == -1 and verdict.judge == f"stacked:{LABEL_MODEL}"  # the resolved name, not "auto"
    assert judge.inner.reader.read == ["No, that's wrong: it reverses in place and returns None."]
    # An explicit kind keeps its meaning with the label model present.
    assert isinstance(make_judge(load_config(OnlineConfig, None, ["judge.kind=classifier"])).inner, ClassifierJudge)
    assert choose_judge("rule") == JudgeChoice("rule", "rule")


def test_explicit_stacked_still_refuses_without_its_label_model_while_auto_falls_back(cache):
    from ratchet.online.launch import _check_judge

    with pytest.raises(RatchetError, match=LABEL_MODEL) as refused:
        _check_judge(load_config(OnlineConfig, None, ["judge.kind=stacked"]))
    assert refused.value.hint == PULL
    assert _check_judge(OnlineConfig()).kind == "classifier"


def test_auto_reads_judge_model_as_the_stacked_judges_label_model(cache, tmp_path):
    from ratchet.online.loops import make_judge

    with pytest.raises(ValueError, match="local:NAME"):
        make_judge(load_config(OnlineConfig, None, ["judge.model=openai:gpt-x"]))
    choice = choose_judge("auto", "smollm2-135m")  # not pulled in this cache
    assert choice.kind == "classifier" and choice.fix == "ratchet models pull smollm2-135m"
    gguf = tmp_path / "label.gguf"
    assert "is not a file" in choose_judge("auto", str(gguf)).reason
    gguf.write_bytes(b"GGUF")
    found = choose_judge("auto", str(gguf))
    assert (found.kind, found.label_model, found.fix) == ("stacked", str(gguf), None)


def test_the_server_hands_its_loops_the_chosen_kind_and_records_the_choice(cache, tmp_path, monkeypatch):
    from ratchet.cli import app
    from ratchet.online.launch import _check_judge, _judged_by

    config = OnlineConfig()
    choice = _check_judge(config)
    pinned = _judged_by(config, choice)
    assert pinned.judge.kind == "classifier" and config.judge.kind == "auto"
    assert "min_confidence" not in pinned.judge.model_fields_set  # an unset threshold stays unset
    assert _judged_by(pinned, choice) is pinned

    run = tmp_path / "runs" / "serve-auto"
    base = status_mod.online_dir(run)
    TurnQueue(base / status_mod.QUEUE_NAME).close()
    choice.save(base)
    assert JudgeChoice.load(base) == choice
    written = status_mod.write(run)
    assert written["judge"]["kind"] == "classifier" and written["judge"]["configured"] == "auto"
    assert json.loads((base / status_mod.STATUS_NAME).read_text())["judge"]["fix"] == PULL

    out = CliRunner().invoke(app, ["serve", "status", "--run", str(run)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "judge: classifier, chosen by judge.kind=auto" in out.output and PULL in out.output
    js = CliRunner().invoke(app, ["serve", "status", "--run", str(run), "--json"])
    assert json.loads(js.output)["judge"] == choice.to_dict()

    from fastapi.testclient import TestClient

    from ratchet.ui import UIConfig, create_app

    page = TestClient(create_app(UIConfig(root=tmp_path / "runs"))).get("/learning/serve-auto").text
    assert 'id="judge"' in page and "<b>classifier</b>" in page and "judge.kind=auto" in page and PULL in page

    JudgeChoice("auto", "stacked", LABEL_MODEL, "its label model is pulled and verified").save(base)
    out = CliRunner().invoke(app, ["serve", "status", "--run", str(run)], env={"COLUMNS": "200"})
    assert "judge: stacked, chosen by judge.kind=auto" in out.output and "models pull" not in out.output
    page = TestClient(create_app(UIConfig(root=tmp_path / "runs"))).get("/learning/serve-auto").text
    assert "<b>stacked</b>" in page and "models pull" not in page


def test_a_run_without_a_recorded_choice_shows_no_judge_line(tmp_path):
    run = tmp_path / "old-run"
    TurnQueue(status_mod.online_dir(run) / status_mod.QUEUE_NAME).close()
    status = status_mod.collect(run)
    assert status["judge"] is None and status_mod.judge_line(status) is None
    (status_mod.online_dir(run) / "judge.json").write_text("{not json")
    assert status_mod.collect(run)["judge"] is None


@pytest.mark.real_model
def test_auto_chooses_the_stacked_judge_and_judges_with_the_pulled_label_model():
    if not registry.is_verified(LABEL_MODEL, rehash=False):
        pytest.skip(f"{LABEL_MODEL} is not pulled ({PULL})")
    from ratchet.online.loops import make_judge

    assert choose_judge("auto").kind == "stacked"
    judge = make_judge(load_config(OnlineConfig, None, ["learn=binary"]))
    try:
        correction = judge.judge(turn(0), "No, that's wrong: reverse() returns None, I need a new list.")
        praise = judge.judge(turn(1), "Thanks, that worked perfectly!")
    finally:
        judge.inner.reader.close()
    assert correction.judge == f"stacked:{LABEL_MODEL}" and correction.reward == -1 and praise.reward == 1
