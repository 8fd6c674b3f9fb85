"""A SmolLM2-135M LoRA converted for llama.cpp, shared by the tests that need a real adapter
(``smollm_lora`` in ``tests/conftest.py``): the trainer's fresh LoRA (B = 0, no change) given a
random B strong enough to change what the model computes, saved as a peft adapter and converted."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL = "smollm2-135m"


@dataclass(frozen=True)
class Lora:
    """The trainer holding the LoRA, the base GGUF, the saved peft adapter and its GGUF conversion."""

    trainer: Any
    base: Path
    adapter: Path
    gguf: Path


def make_lora(out: Path, scale: float, *, seed: int = 0) -> Lora:
    """The LoRA with every ``lora_B`` drawn from N(0, ``scale``²) (seeded), saved under ``out``."""
    import torch

    from ratchet.models.registry import cached_path
    from ratchet.online.lora_gguf import convert_adapter
    from ratchet.online.trainer import Trainer, TrainerConfig

    base = cached_path(MODEL)
    trainer = Trainer.from_config(TrainerConfig(model=str(base), lora_r=8, lora_alpha=16, num_threads=1, seed=1))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in trainer.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * scale)
    adapter = trainer.save_adapter(out / "adapter")
    return Lora(trainer, base, adapter, convert_adapter(adapter, base, out / "adapter.gguf"))
