"""Convert a peft LoRA adapter into a GGUF LoRA adapter that llama.cpp loads next to the base GGUF.

What llama.cpp expects (src/llama-adapter.cpp and convert_lora_to_gguf.py of llama.cpp b-0.3.36):

* metadata ``general.type = "adapter"``, ``general.architecture`` equal to the base model's,
  ``adapter.type = "lora"``, ``adapter.lora.alpha`` (float32); the runtime scale is alpha / rank;
* for each adapted weight ``blk.N.<name>.weight`` of the base model, two tensors
  ``blk.N.<name>.weight.lora_a`` with numpy shape ``(rank, in_features)`` (peft's ``lora_A``) and
  ``blk.N.<name>.weight.lora_b`` with numpy shape ``(out_features, rank)`` (peft's ``lora_B``);
  GGUF stores dimensions reversed, so ggml sees ``a.ne = (in, rank)`` and ``b.ne = (rank, out)``;
* Llama-family GGUFs store ``attn_q`` / ``attn_k`` with their rows permuted for llama.cpp's RoPE
  layout (transformers un-permutes them when it loads the GGUF). The LoRA delta ``B·A`` must be
  permuted the same way, which means permuting the rows of ``B``. Qwen2 has no such permutation.

The base GGUF is only read for its architecture and head counts (memory-mapped, no weights loaded).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ratchet.contracts import RatchetError

#: peft module name (transformers naming) -> llama.cpp tensor name inside ``blk.N``.
MODULE_TO_GGUF = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}

#: Architectures whose conversion permutes q/k rows (see the module docstring).
_PERMUTED_QK = {"llama"}
_SUPPORTED = {"llama", "qwen2"}

_LORA_KEY = re.compile(r"layers\.(\d+)\.((?:self_attn|mlp)\.\w+)\.lora_([AB])\.weight$")


def base_model_info(base_gguf: str | Path) -> dict[str, int | str]:
    """Architecture and attention head counts of a GGUF model, read from its metadata."""
    from gguf import GGUFReader

    reader = GGUFReader(str(base_gguf))

    def value(key: str):
        f = reader.fields.get(key)
        if f is None:
            return None
        return f.contents()

    arch = value("general.architecture")
    if not isinstance(arch, str):
        raise RatchetError(f"{base_gguf} has no general.architecture; is it a GGUF model?")
    return {
        "arch": arch,
        "n_head": int(value(f"{arch}.attention.head_count") or 0),
        "n_head_kv": int(value(f"{arch}.attention.head_count_kv") or value(f"{arch}.attention.head_count") or 0),
    }


def permute_rows(weight: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row permutation: within each head, interleaved halves become contiguous."""
    rows = weight.shape[0]
    return (
        weight.reshape(n_head, 2, rows // n_head // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def convert_adapter(adapter_dir: str | Path, base_gguf: str | Path, out_path: str | Path) -> Path:
    """Write ``adapter_dir`` (a saved peft LoRA) as a GGUF LoRA for ``base_gguf``; return ``out_path``.

    Only the seven projections of each decoder block are supported (what the trainer adapts);
    anything else in the adapter is an error rather than silently dropped.
    """
    from gguf import GGUFWriter
    from safetensors.numpy import load_file

    adapter_dir, out_path = Path(adapter_dir), Path(out_path)
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    if config.get("use_rslora") or config.get("use_dora"):
        raise RatchetError("rsLoRA / DoRA adapters cannot be converted: llama.cpp scales by alpha / rank")
    info = base_model_info(base_gguf)
    arch = str(info["arch"])
    if arch not in _SUPPORTED:
        raise RatchetError(
            f"LoRA conversion supports {sorted(_SUPPORTED)} models, not {arch!r}",
            hint="train on qwen2.5-coder-* or smollm2-135m",
        )
    tensors = load_file(str(adapter_dir / "adapter_model.safetensors"))
    pairs: dict[str, dict[str, np.ndarray]] = {}
    for key, value in tensors.items():
        match = _LORA_KEY.search(key)
        if not match or match.group(2) not in MODULE_TO_GGUF:
            raise RatchetError(f"cannot convert adapter tensor {key!r}: not a LoRA on a supported projection")
        block, module, which = int(match.group(1)), match.group(2), match.group(3)
        name = f"blk.{block}.{MODULE_TO_GGUF[module]}.weight"
        pairs.setdefault(name, {})[which] = value.astype(np.float32)

    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    writer = GGUFWriter(str(tmp), arch)
    writer.add_type("adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(config["lora_alpha"]))
    for name in sorted(pairs, key=_natural):
        a, b = pairs[name].get("A"), pairs[name].get("B")
        if a is None or b is None:
            raise RatchetError(f"adapter tensor pair for {name} is missing lora_A or lora_B")
        if arch in _PERMUTED_QK and (".attn_q." in name or ".attn_k." in name):
            heads = int(info["n_head"] if ".attn_q." in name else info["n_head_kv"])
            b = permute_rows(b, heads)
        writer.add_tensor(name + ".lora_a", np.ascontiguousarray(a))
        writer.add_tensor(name + ".lora_b", np.ascontiguousarray(b))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out_path)
    return out_path


def _natural(name: str) -> tuple[int, str]:
    block = re.search(r"blk\.(\d+)\.", name)
    return (int(block.group(1)) if block else -1, name)
