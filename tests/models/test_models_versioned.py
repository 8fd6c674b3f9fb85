"""``local:NAME@vN``: a weight version of the served model as a model spec.

The store is built by :meth:`VersionStore.publish` with dummy adapters; LlamaModel loads its
weights on first call, so these tests check what it would load (its config) and its name.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ratchet.contracts import RatchetError
from ratchet.models import CATALOG, LlamaModel, load_model, registry
from ratchet.models.journal import request_key
from ratchet.online.versions import VersionStore

MODEL = "smollm2-135m"


def publish(store: VersionStore, tmp_path, marker: str, *, gguf: bool = True, promote: bool = True,
            base_sha256: str | None = None):
    adapter = tmp_path / f"adapter-{marker}"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 4, "marker": marker}))
    lora = None
    if gguf:
        lora = tmp_path / f"{marker}.gguf"
        lora.write_bytes(b"GGUF" + marker.encode())
    metrics = {"loss": 0.1}
    if base_sha256 is not None:
        metrics["base_model"] = {"file": "base.gguf", "sha256": base_sha256}
    return store.publish(adapter, metrics, promote=promote, lora_gguf=lora)


@pytest.fixture
def base(tmp_path, monkeypatch):
    """A stand-in for the pulled catalog model (the real one is not needed to build a LlamaModel)."""
    gguf = tmp_path / "base.gguf"
    gguf.write_bytes(b"GGUF base")
    monkeypatch.setattr(registry, "model_path", lambda name: gguf)
    monkeypatch.delenv("RATCHET_VERSIONS", raising=False)
    return gguf


@pytest.fixture
def store(tmp_path):
    """v1 and v2 promoted (current = 2), v3 published but refused (latest = 3), v4 not converted."""
    s = VersionStore(tmp_path / "run" / "online" / "versions")
    for marker in ("one", "two"):
        publish(s, tmp_path, marker, base_sha256=CATALOG[MODEL].sha256)
    publish(s, tmp_path, "three", promote=False)
    return s


def test_a_version_loads_its_adapter_on_the_base(base, store) -> None:
    model = load_model(f"local:{MODEL}@v1", versions=store.root, n_ctx=512)
    assert isinstance(model, LlamaModel)
    assert model.config.model_path == str(base) and model.config.n_ctx == 512
    assert model.config.lora_path == str(store.get(1).lora_gguf)
    assert model.name.startswith(f"local:{MODEL}@v1+") and len(model.name.rpartition("+")[2]) == 12


def test_current_latest_and_the_base(base, store) -> None:
    current = load_model(f"local:{MODEL}@current", versions=store.root)
    assert current.config.lora_path == str(store.get(2).lora_gguf)
    assert current.name.startswith(f"local:{MODEL}@v2+")  # the name says what @current was
    latest = load_model(f"local:{MODEL}@latest", versions=store.root)
    assert latest.config.lora_path == str(store.get(3).lora_gguf)  # published, though refused
    v0 = load_model(f"local:{MODEL}@v0", versions=store.root)
    assert v0.config.lora_path is None and v0.name == f"local:{MODEL}@v0"
    store.rollback(0)
    assert load_model(f"local:{MODEL}@current", versions=store.root).config.lora_path is None


def test_the_store_from_the_environment_or_the_serve_run(base, store, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RATCHET_VERSIONS", str(store.root))
    assert load_model(f"local:{MODEL}@v2").config.lora_path == str(store.get(2).lora_gguf)
    # The serve run's own directory names its versions too; versions= wins over the environment.
    monkeypatch.setenv("RATCHET_VERSIONS", str(tmp_path / "elsewhere"))
    model = load_model(f"local:{MODEL}@v2", versions=tmp_path / "run")
    assert model.config.lora_path == str(store.get(2).lora_gguf)


def test_the_name_pins_the_adapter(base, store, tmp_path) -> None:
    name = load_model(f"local:{MODEL}@v2", versions=store.root).name
    again = load_model(name, versions=store.root)
    assert again.name == name and again.config.lora_path == str(store.get(2).lora_gguf)
    # Another store's v2 holds other weights: the pinned name refuses them.
    other = VersionStore(tmp_path / "other")
    publish(other, tmp_path, "uno")
    publish(other, tmp_path, "dos")
    with pytest.raises(RatchetError, match="is adapter") as err:
        load_model(name, versions=other.root)
    assert "RATCHET_VERSIONS" in str(err.value)


def test_replies_of_one_version_are_never_keys_of_another(base, store, tmp_path) -> None:
    """The reply journal keys requests by the model's name: every adapter a different key,
    including v2 of two stores (same number, other weights) and the base."""
    other = VersionStore(tmp_path / "other")
    publish(other, tmp_path, "uno")
    publish(other, tmp_path, "dos")
    names = [load_model(f"local:{MODEL}@{v}", versions=store.root).name for v in ("v0", "v1", "v2", "v3")]
    names.append(load_model(f"local:{MODEL}@v2", versions=other.root).name)
    messages = [{"role": "user", "content": "hi"}]
    keys = {request_key(n, messages, {"temperature": 0.0}) for n in names}
    assert len(set(names)) == 5 and len(keys) == 5
    # ...and the same version loaded twice is the same key (replies ARE replayed for it).
    assert load_model(f"local:{MODEL}@current", versions=store.root).name == names[2]


@pytest.mark.parametrize(("spec", "versions", "expected"), [
    (f"local:{MODEL}@v1", None, "no version store is given"),
    (f"local:{MODEL}@v9", "store", "v9 .* is not in"),
    (f"local:{MODEL}@v4", "store", "has no adapter.gguf: it was not converted"),
    (f"local:{MODEL}@v2x", "store", "bad weight version 'v2x'"),
    (f"local:{MODEL}@", "store", "bad weight version ''"),
    ("openai:gpt-4o@v3", None, "for local: models only"),
    ("http://127.0.0.1:8000/v1#m@latest", None, "for local: models only"),
    (f"local:{MODEL}@v1", "missing", "is not a directory"),
    (f"local:{MODEL}@current", "online", "is not a version store"),
])
def test_errors_name_the_spec_and_the_fix(base, store, tmp_path, spec, versions, expected) -> None:
    publish(store, tmp_path, "four", gguf=False)
    where = {"store": store.root, "missing": tmp_path / "missing", "online": tmp_path / "run" / "online",
             None: None}[versions]
    (tmp_path / "run" / "online" / "queue.db").write_bytes(b"")  # beside the versions, as in a serve run
    with pytest.raises(RatchetError, match=expected) as err:
        load_model(spec, versions=where)
    assert err.value.hint, "every error says how to fix it"
    text = str(err.value)
    if "v9" in spec:
        assert "versions present: v0, v1, v2, v3, v4" in text
    if "@v4" in spec:
        assert "v0 (the base), v1, v2, v3" in text and "convert_gguf" in text
    if versions is None and spec.startswith("local:"):
        assert "RATCHET_VERSIONS=" in text and "versions=" in text


def test_a_version_of_another_base_is_refused(base, store) -> None:
    # v1 and v2 record the SmolLM2 base; the Qwen spec must not put them on its weights.
    with pytest.raises(RatchetError, match="trained on base.gguf .* not on qwen2.5-coder-0.5b") as err:
        load_model("local:qwen2.5-coder-0.5b@v1", versions=store.root)
    assert f"local:{MODEL}@v1" in err.value.hint
    # v3 was published before versions recorded their base: taken on trust.
    assert load_model("local:qwen2.5-coder-0.5b@v3", versions=store.root).name.startswith("local:qwen2.5-coder-0.5b@v3+")


def test_a_gguf_path_base_is_checked_by_its_hash(base, tmp_path) -> None:
    s = VersionStore(tmp_path / "paths")
    publish(s, tmp_path, "x", base_sha256=registry.sha256_file(base))
    model = load_model(f"local:{base}@v1", versions=s.root)
    assert model.config.model_path == str(base) and model.config.lora_path == str(s.get(1).lora_gguf)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF other")
    with pytest.raises(RatchetError, match="not on"):
        load_model(f"local:{other}@v1", versions=s.root)


def test_a_spec_without_a_version_is_unchanged(base, tmp_path) -> None:
    # A GGUF path that itself holds '@' is a path, not a version.
    odd = tmp_path / "model@v2.gguf"
    odd.write_bytes(b"GGUF")
    model = load_model(f"local:{odd}")
    assert model.config.model_path == str(odd) and model.config.lora_path is None


def test_a_replay_cache_of_a_version_names_it(tmp_path) -> None:
    from ratchet.models import ReplayModel, ScriptedModel

    name = f"local:{MODEL}@v3+1a2b3c4d5e6f"
    cache = tmp_path / "c.jsonl"
    ReplayModel(ScriptedModel(["a"], name=name), cache, mode="record").complete([{"role": "user", "content": "q"}])
    model = load_model(f"replay:{cache}#{name}")
    assert model.name == name and model.complete([{"role": "user", "content": "q"}]).text == "a"


def test_importing_models_does_not_import_the_serving_side() -> None:
    code = "import sys, ratchet.models; print(any(m.startswith('ratchet.online') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.real_model
def test_smollm2_at_v1_answers_with_the_versions_adapter(tmp_path, monkeypatch, smollm_lora) -> None:
    """A LoRA converted for llama.cpp and published as v1: ``local:smollm2-135m@v1`` replies as the
    base with that adapter does, and not as the base alone (the adapter really is applied)."""
    monkeypatch.delenv("RATCHET_VERSIONS", raising=False)
    # A random B of scale 0.2 changes a greedy reply (tests/smollm_lora.py).
    made = smollm_lora(0.2)
    gguf, adapter, lora = made.base, made.adapter, made.gguf
    store = VersionStore(tmp_path / "versions")
    store.publish(adapter, {"base_model": {"file": gguf.name, "sha256": CATALOG[MODEL].sha256}}, promote=True,
                  lora_gguf=lora)

    settings = {"n_ctx": 256, "n_threads": 1}
    messages = [{"role": "user", "content": "Name three colours."}]
    v1 = load_model(f"local:{MODEL}@v1", versions=store.root, **settings)
    by_hand = LlamaModel(str(gguf), lora_path=str(lora), **settings)
    base = load_model(f"local:{MODEL}", **settings)
    replies = [m.complete(messages, temperature=0.0, max_tokens=24).text for m in (v1, by_hand, base)]
    assert replies[0] == replies[1], replies
    assert replies[0] != replies[2], replies
    assert v1.complete(messages, temperature=0.0, max_tokens=24).model.startswith(f"local:{MODEL}@v1+")
