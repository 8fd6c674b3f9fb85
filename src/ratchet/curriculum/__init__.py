"""A curriculum across game families (``ratchet autoharness learn``): harness searches on training
games with the current weight version, their verdicts trained on by the online trainer, each new
version promoted only if it does better on held-out games of other families.

Its own package, not a module of ``autoharness/`` (held to a line budget as a configuration of the
engine): the curriculum is where the harness loop and the weight loop meet, and uses both
(``autoharness`` for the searches, ``online`` for the queue, the trainer and the versions).

* :mod:`~ratchet.curriculum.config`: :class:`CurriculumConfig`
* :mod:`~ratchet.curriculum.games`: suite specs to games, the family split
* :mod:`~ratchet.curriculum.searches`: one search and what is read from it
* :mod:`~ratchet.curriculum.failures`: a search's failed samples by type (:class:`FailureType`)
* :mod:`~ratchet.curriculum.policy`: per failure type, harness edit or weight update (:class:`FeedbackPolicy`)
* :mod:`~ratchet.curriculum.training`: feeding and one update (:class:`Training`, :class:`LoopTraining`)
* :mod:`~ratchet.curriculum.gate`: the games gate
* :mod:`~ratchet.curriculum.loop`: the rounds, resumable (:class:`Curriculum`)
* :mod:`~ratchet.curriculum.report`: ``learn.json`` / ``learn.md``
"""

from ratchet.curriculum.config import CurriculumConfig
from ratchet.curriculum.loop import RUN_KIND, Curriculum
from ratchet.curriculum.searches import SearchModels, VersionedModels
from ratchet.curriculum.training import LoopTraining, Training

__all__ = ["RUN_KIND", "Curriculum", "CurriculumConfig", "LoopTraining", "SearchModels", "Training", "VersionedModels"]
