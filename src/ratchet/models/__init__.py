"""Models: every way Ratchet talks to an LLM, the catalog of embedded models, and budgets.

Importing this package is cheap: ``openai`` and ``llama_cpp`` are imported by the backends on
first use, never here.
"""

from ratchet.models.budget import Accountant, AccountedModel, BudgetConfig, Price
from ratchet.models.llama_embedded import LlamaConfig, LlamaModel
from ratchet.models.openai_compat import OpenAIConfig, OpenAIModel
from ratchet.models.registry import CATALOG, DEFAULT_MODEL, model_path, pull
from ratchet.models.replay import ReplayModel
from ratchet.models.scripted import ScriptedModel
from ratchet.models.spec import ACCEPTED_FORMS, load_model

__all__ = [
    "ACCEPTED_FORMS",
    "CATALOG",
    "DEFAULT_MODEL",
    "Accountant",
    "AccountedModel",
    "BudgetConfig",
    "LlamaConfig",
    "LlamaModel",
    "OpenAIConfig",
    "OpenAIModel",
    "Price",
    "ReplayModel",
    "ScriptedModel",
    "load_model",
    "model_path",
    "pull",
]
