"""The served model's weights in torch: its GGUF found, dequantized to fp32 once, cached, loaded.

The policy trained is the SAME model llama.cpp serves: transformers dequantizes the served GGUF to
fp32, and the result is cached as safetensors keyed by the GGUF's SHA-256, so only the first load
pays the 25–80 s.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ratchet.contracts import RatchetError

log = logging.getLogger("ratchet.online.trainer")


def resolve_gguf(model: str) -> Path:
    """A catalog name or a GGUF path -> the GGUF file (verified when it comes from the catalog)."""
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise RatchetError(f"GGUF file not found: {path}")
        return path
    from ratchet.models.registry import model_path

    return model_path(model)


def gguf_sha256(path: Path) -> str:
    """The file's SHA-256, read from the catalog's stamp when it is fresh (spares hashing 0.5–1 GB)."""
    stamp = path.with_name(path.name + ".verified")
    stat = path.stat()
    try:
        data = json.loads(stamp.read_text())
        if (data["size"], data["mtime_ns"]) == (stat.st_size, stat.st_mtime_ns):
            return str(data["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    from ratchet.models.registry import sha256_file

    return sha256_file(path)


def weights_cache_root(config_dir: Path | None = None) -> Path:
    if config_dir is not None:
        return Path(config_dir)
    root = os.environ.get("RATCHET_CACHE_DIR")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("ratchet")
    return Path(root) / "torch"


def load_policy(gguf: Path, cache_dir: Path | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """(model, tokenizer, info) for ``gguf`` in fp32; the first call caches a safetensors copy.

    ``info`` says whether the cache was hit and how long the load took.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    key = gguf_sha256(gguf)[:16]
    cached = weights_cache_root(cache_dir) / f"{gguf.stem}-{key}"
    hit = (cached / "config.json").is_file()
    if hit:
        model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(cached)
    else:
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The weights are plain fp32 once dequantized; transformers still marks the model as a
        # (non-serializable) GGUF-quantized one, and the marker would also reach peft's configs.
        model.hf_quantizer = None
        for attr in ("quantization_config", "_pre_quantization_dtype"):
            if hasattr(model.config, attr):
                delattr(model.config, attr)
        model.is_quantized = False
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cached.parent, prefix=f".{cached.name}."))
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            os.rename(tmp, cached)
        except OSError:
            # Another process cached it first (rename onto a non-empty dir fails): keep theirs.
            log.info("weights cache %s already written by another process", cached)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    model.eval()
    info = {"cache_hit": hit, "load_s": round(time.perf_counter() - started, 2), "cache_dir": str(cached)}
    return model, tokenizer, info


__all__ = ["gguf_sha256", "load_policy", "resolve_gguf", "weights_cache_root"]
