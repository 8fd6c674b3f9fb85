"""Ratchet: agents that get better by being used.

Two levels of self-improvement share one spine: the harness around a fixed model improves
(AutoHarness and its relatives), and the model's own weights improve from everyday use
(an OpenAI-compatible server that learns from its conversations).
"""

__version__ = "0.1.0"
