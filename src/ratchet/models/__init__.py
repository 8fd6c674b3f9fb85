"""Models: every way Ratchet talks to an LLM, the catalog of embedded models, and budgets."""

from ratchet.models.registry import CATALOG, DEFAULT_MODEL, model_path, pull

__all__ = ["CATALOG", "DEFAULT_MODEL", "model_path", "pull"]
