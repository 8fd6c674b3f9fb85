import sys
from pathlib import Path

import pytest

# Modules the test folders share (killed_runs.py) are imported by name, from here.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def smollm_lora(tmp_path):
    """``make(scale)`` → a SmolLM2-135M LoRA with a random B of that scale, saved and converted for
    llama.cpp (``tests/smollm_lora.py``); skipped when the model or the training extra is missing."""
    for module in ("torch", "peft", "gguf", "llama_cpp"):
        pytest.importorskip(module)
    from smollm_lora import MODEL, make_lora

    from ratchet.models.registry import is_verified

    if not is_verified(MODEL, rehash=False):
        pytest.skip(f"{MODEL} not pulled (ratchet models pull {MODEL})")
    return lambda scale: make_lora(tmp_path, scale)


@pytest.fixture(scope="session")
def pulled_gguf():
    """``path(name)`` → the cached GGUF of a catalog model, or a skip that names its pull command."""
    from ratchet.models.registry import cached_path

    def path(name: str) -> Path:
        found = cached_path(name)
        if not found.is_file():
            pytest.skip(f"{name} is not pulled (ratchet models pull {name})")
        return found

    return path
