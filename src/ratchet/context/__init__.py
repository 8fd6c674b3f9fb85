"""Evolving context: ACE playbooks learned from use.

A playbook (:mod:`.playbook`) is itemized lessons with stable ids and counters; a curator's
operations (:mod:`.operations`) change it one item at a time, applied by deterministic code;
near-duplicates are folded by meaning (:mod:`.similarity`); a token budget picks what enters a
prompt (only items relevant enough, scoped by the task each came from) and pruning keeps the
playbook bounded (:mod:`.budget`); which tags move counters is a strategy (:mod:`.tagging`);
every version is kept in the run store (:mod:`.history`); :class:`ContextLearner` learns online (``observe``) and offline
(``learn`` over :func:`.sources.trajectories`). The engine evolves a playbook through
:class:`.proposer.CuratorProposer`, and context skills (:mod:`.skills`: ``SKILL.md`` plus a
``select.py``) choose what of it enters a prompt. See docs/context.md.
"""

from ratchet.context.budget import Selection, prune, select
from ratchet.context.config import ContextConfig
from ratchet.context.history import PlaybookHistory
from ratchet.context.learner import ContextLearner, LearnStats, Trajectory
from ratchet.context.operations import (
    OPERATIONS_GRAMMAR,
    Add,
    Applied,
    Delete,
    Merge,
    Operation,
    Problem,
    Tag,
    Update,
    apply_operations,
    operations_grammar,
    parse_operations,
    reflection_grammar,
)
from ratchet.context.playbook import Item, Playbook, PlaybookError
from ratchet.context.roles import Curator, Generator, Prompts, Reflector
from ratchet.context.similarity import Deduplicator, Embedder, SentenceEmbedder

__all__ = [
    "OPERATIONS_GRAMMAR", "Add", "Applied", "ContextConfig", "ContextLearner", "Curator", "Deduplicator", "Delete",
    "Embedder", "Generator", "Item", "LearnStats", "Merge", "Operation", "Playbook", "PlaybookError",
    "PlaybookHistory", "Problem", "Prompts", "Reflector", "Selection", "SentenceEmbedder", "Tag", "Trajectory",
    "Update", "apply_operations", "operations_grammar", "parse_operations", "prune", "reflection_grammar", "select",
]
