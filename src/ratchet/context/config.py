"""Settings of context learning (YAML under ``context:``, or ``--set key=value``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ratchet.config import Settings


class ContextConfig(Settings):
    budget_tokens: int | None = Field(400, ge=0)
    """Most tokens of playbook items that enter one prompt (generator and curator alike). None:
    no budget, the whole playbook enters every prompt (ACE's behaviour)."""
    record_weight: float = Field(0.3, ge=0.0)
    """Weight of an item's record (tanh of helpful minus harmful, over 3) beside its relevance
    (cosine with the task) when items compete for the budget."""
    dedup_threshold: float = Field(0.85, gt=0.0, le=1.0)
    """Cosine at or above which an ADD repeats an existing item and becomes a helpful TAG of it
    (ace-framework's value for all-MiniLM-L6-v2)."""
    dedup: bool = True
    """Fold near-duplicate ADDs into the item they repeat; off keeps ACE's add-only behaviour."""
    prune_margin: int | None = Field(2, ge=1)
    """An item is deleted once its harmful count exceeds its helpful count by this much. None:
    never deleted for its record."""
    max_items: int | None = Field(60, ge=1)
    """Most items a playbook keeps; past it the weakest (lowest net count, then oldest) go.
    None: no cap (pruning by record only)."""
    curator_operations: list[Literal["ADD", "UPDATE", "MERGE", "DELETE", "TAG"]] | None = None
    """The operations the curator may emit (its prompt lists only these, its grammar admits only
    these, any other is a problem returned to it). None: all. ``[ADD]`` is the official ACE code's
    add-only curation."""
    max_retries: int = Field(1, ge=0)
    """Times a curator whose reply had malformed operations is asked again, shown its problems."""
    use_grammar: bool = True
    """Constrain the curator's reply with a GBNF grammar (embedded llama.cpp honours it), so a
    small model cannot emit malformed JSON."""
    temperature: float = Field(0.0, ge=0.0)
    """Sampling temperature of reflector and curator."""
    max_tokens: int = Field(256, ge=16)
    """Most tokens a reflector or curator reply may take."""
    trace_chars: int = Field(2000, ge=100)
    """Most characters of a trajectory shown to the reflector (the end is kept: outcomes are last)."""
    encoder: str = "all-minilm-l6-v2"
    """Catalog name of the sentence encoder used for relevance and de-duplication."""
    prompts: Path | None = None
    """Directory of prompt files (generator.md, reflector.md, curator.md) overriding the defaults
    file by file: the editable surfaces."""
