"""The converted GGUF LoRA loads in llama.cpp and changes the served logits exactly as it changes torch's.

Uses SmolLM2-135M (a Llama-architecture GGUF, so the q/k row permutation is exercised) when it has
been pulled (``ratchet models pull smollm2-135m``); the end-to-end test covers the Qwen2 0.5B.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")

from ratchet.models.registry import is_verified  # noqa: E402
from ratchet.online.lora_gguf import base_model_info, convert_adapter  # noqa: E402

MODEL = "smollm2-135m"

pytestmark = pytest.mark.skipif(
    not is_verified(MODEL, rehash=False), reason=f"{MODEL} not pulled (ratchet models pull {MODEL})"
)


def served_logits(gguf, ids, lora=None) -> np.ndarray:
    llm = llama_cpp.Llama(model_path=str(gguf), lora_path=str(lora) if lora else None, n_ctx=128,
                          n_threads=1, n_batch=128, logits_all=True, verbose=False, seed=0)
    llm.eval(ids)
    out = np.array(llm.scores[: len(ids)], dtype=np.float64)
    llm.close()
    return out


def test_converted_adapter_loads_in_llama_cpp_and_matches_torch(tmp_path, monkeypatch, smollm_lora) -> None:
    # The served model quantizes its activations to 8 bits, so ANY change to its weights re-rolls
    # rounding everywhere: a floor of ~0.2 in |Δlogit| that does not shrink with the adapter. The
    # adapter must be strong enough to stand well above that floor for the comparison to mean much:
    # a random, non-zero B (scale 0.05) makes it change every projection (a fresh LoRA has B = 0).
    lora = smollm_lora(0.05)
    trainer, gguf, adapter, out = lora.trainer, lora.base, lora.adapter, lora.gguf
    assert base_model_info(gguf)["arch"] == "llama"

    ids = trainer.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a haiku about the sea."}], add_generation_prompt=True, tokenize=True
    )
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    batch = torch.tensor([ids])
    with torch.no_grad():
        torch_lora = trainer.model(input_ids=batch).logits[0].double().numpy()
        with trainer.model.disable_adapter():
            torch_base = trainer.model(input_ids=batch).logits[0].double().numpy()
    served_base = served_logits(gguf, ids)
    served_lora = served_logits(gguf, ids, out)

    served_delta = (served_lora - served_base)[-8:].ravel()
    torch_delta = (torch_lora - torch_base)[-8:].ravel()
    # The adapter visibly changes what llama.cpp computes...
    assert np.abs(served_delta).mean() > 0.05
    # ...and in the same way as in torch (a wrong layout, e.g. unpermuted q/k rows, decorrelates them).
    corr = float(np.corrcoef(served_delta, torch_delta)[0, 1])
    assert corr > 0.9, corr

    # Negative control: the same adapter without llama.cpp's q/k row permutation matches worse.
    import ratchet.online.lora_gguf as lora_gguf

    monkeypatch.setattr(lora_gguf, "_PERMUTED_QK", set())
    wrong = convert_adapter(adapter, gguf, tmp_path / "unpermuted.gguf")
    wrong_delta = (served_logits(gguf, ids, wrong) - served_base)[-8:].ravel()
    assert float(np.corrcoef(wrong_delta, torch_delta)[0, 1]) < corr - 0.05
