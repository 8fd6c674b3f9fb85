"""Ratchet: agents that get better by being used.

Four parts share one spine: AutoHarness (a model writes the code harness around itself for a
game), the improvement engine (``ratchet evolve``: any harness workspace changed only on honest
evidence), the agent runtime (a coding agent's loop, tools and sub-agents, itself a workspace the
engine evolves), and learning from use (an OpenAI-compatible server whose model trains on its
own conversations).

As a library, one call each in :mod:`ratchet.api`: ``api.evolve(...)``,
``api.synthesize_harness(...)``, ``api.serve(...)``. (They are not attributes of this package:
``ratchet.evolve`` is the engine's package.)
"""

__version__ = "0.1.0"
