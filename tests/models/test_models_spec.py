from __future__ import annotations

import pytest

from ratchet.config import ConfigError
from ratchet.contracts import Model, RatchetError
from ratchet.models import (CATALOG, DEFAULT_MODEL, LlamaModel, OpenAIModel, ReplayModel, ScriptedModel,
                            load_model)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    monkeypatch.setenv("RATCHET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("RATCHET_API_KEY", raising=False)


def test_default_model_is_in_catalog():
    assert DEFAULT_MODEL == "qwen2.5-coder-0.5b"
    assert set(CATALOG) == {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m", "all-minilm-l6-v2"}


def test_http_spec_splits_base_url_and_model():
    model = load_model("http://127.0.0.1:8000/v1#my-model")
    assert isinstance(model, OpenAIModel) and isinstance(model, Model)
    assert model.config.base_url == "http://127.0.0.1:8000/v1"
    assert model.config.model == "my-model"
    assert model.config.api_key_env == "RATCHET_API_KEY"
    assert model.name == "http://127.0.0.1:8000/v1#my-model"


def test_https_spec_takes_key_from_ratchet_api_key(monkeypatch):
    monkeypatch.setenv("RATCHET_API_KEY", "sk-test")
    model = load_model("https://example.org/v1/#m", timeout_s=5)
    assert model.config.base_url == "https://example.org/v1"
    assert model._api_key == "sk-test" and model.config.timeout_s == 5


def test_openai_spec_honours_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.0.0.1:9/v1")
    model = load_model("openai:gpt-4.1-mini")
    assert model.config.model == "gpt-4.1-mini" and model.config.base_url == "http://10.0.0.1:9/v1"
    assert model.name == "openai:gpt-4.1-mini"


def test_openai_spec_without_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(RatchetError) as err:
        load_model("openai:gpt-4.1-mini")
    assert "OPENAI_API_KEY" in str(err.value)


def test_scripted_spec_echoes():
    model = load_model("scripted:")
    assert isinstance(model, ScriptedModel)
    assert model.complete([{"role": "user", "content": "ping"}]).text == "ping"


def test_local_gguf_path(tmp_path):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    model = load_model(f"local:{gguf}", n_ctx=1024)
    assert isinstance(model, LlamaModel)
    assert model.config.model_path == str(gguf) and model.config.n_ctx == 1024


def test_local_spec_sets_the_context_window_after_a_question_mark(tmp_path):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    model = load_model(f"local:{gguf}?n_ctx=8192", n_threads=1)
    assert model.config.model_path == str(gguf) and model.config.n_ctx == 8192 and model.config.n_threads == 1
    assert model.name == f"local:{gguf}?n_ctx=8192"
    assert load_model(f"local:{gguf}").config.n_ctx == 4096


@pytest.mark.parametrize("query, why", [("n_ctx=lots", "whole number"), ("n_ctx=8", "from 256"), ("n_ctx", "whole number"),
                                        ("n_batch=8", "unknown setting 'n_batch'")])
def test_bad_spec_settings_name_the_setting(tmp_path, query, why):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(RatchetError, match=why) as err:
        load_model(f"local:{gguf}?{query}")
    assert "?n_ctx=8192" in err.value.hint


def test_local_catalog_model_absent_says_how_to_pull():
    with pytest.raises(RatchetError) as err:
        load_model("local:smollm2-135m")
    assert err.value.hint == "ratchet models pull smollm2-135m"


def test_replay_spec(tmp_path):
    cache = tmp_path / "c.jsonl"
    recorder = ReplayModel(ScriptedModel(["a"], name="m1"), cache, mode="record")
    recorder.complete([{"role": "user", "content": "q"}])
    model = load_model(f"replay:{cache}")
    assert isinstance(model, ReplayModel) and model.name == "m1"
    assert model.complete([{"role": "user", "content": "q"}]).text == "a"


@pytest.mark.parametrize("spec", [
    "", "qwen", "local:", "local:no-such-model", "openai:", "http://#m", "http://127.0.0.1:8000/v1",
    "ftp://x#m", "scripted:extra", "replay:", "gguf:/tmp/x.gguf",
])
def test_bad_specs_name_the_spec_and_list_forms(spec):
    with pytest.raises(RatchetError) as err:
        load_model(spec)
    text = str(err.value)
    assert repr(spec) in text
    assert "local:NAME" in text and "http://HOST:PORT/v1#MODEL" in text


def test_missing_gguf_file(tmp_path):
    with pytest.raises(RatchetError, match="not found"):
        load_model(f"local:{tmp_path}/absent.gguf")


def test_bad_override_is_a_config_error():
    with pytest.raises(ConfigError):
        load_model("http://127.0.0.1:1/v1#m", no_such_setting=1)
