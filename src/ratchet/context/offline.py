"""Offline learning as one library call: trajectories of a stored run into a playbook.

The learning itself is a run of kind ``context`` in the same store, holding every playbook version
(:class:`~ratchet.context.history.PlaybookHistory`). Passing that run's id again resumes it: the
trajectories already learned from are skipped, so a killed learn (or a bench) picks up where it
stopped.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ratchet.context.config import ContextConfig
from ratchet.context.learner import ContextLearner, LearnStats
from ratchet.context.similarity import Embedder, SentenceEmbedder
from ratchet.context.sources import trajectories
from ratchet.contracts import Model
from ratchet.store import Run, RunStore


def default_embedder(config: ContextConfig) -> Embedder | None:
    """The sentence encoder named in the config when it is pulled; None otherwise (selection then
    goes by record alone and ADDs are not de-duplicated: the caller says so)."""
    from ratchet.models.registry import is_verified

    return SentenceEmbedder(config.encoder) if is_verified(config.encoder, rehash=False) else None


def learn_from_run(store: RunStore, source: str, playbook: str | Path, *, model: Model,
                   curator_model: Model | None = None, config: ContextConfig | None = None,
                   embedder: Embedder | None = None, resume: str | None = None, split: str | None = None,
                   limit: int | None = None) -> tuple[Run, LearnStats]:
    """Learn ``playbook`` from the trajectories of run ``source`` (id or unique prefix).

    ``resume`` names an earlier ``context`` run to continue; otherwise a new one is made.
    ``limit`` learns from at most that many trajectories (the first ones, in stored order)."""
    config = config or ContextConfig()
    found = trajectories(store.open_run(source), split=split)
    if limit is not None:
        found = found[:limit]
    settings = {"source": source, "playbook": str(playbook), "split": split, "context": config.model_dump(mode="json")}
    run = store.open_run(resume) if resume else store.create_run("context", settings)
    if resume:
        run.set_status("running")  # this process runs it now
    learner = ContextLearner(playbook, reflector_model=model, curator_model=curator_model, config=config,
                             embedder=embedder, run=run)
    with run.marks_failure():
        stats = learner.learn(found)
        run.set_status("done", {"trajectories": len(found), "items": len(learner.playbook),
                                **{k: v for k, v in asdict(stats).items() if k != "sizes"}})
    return run, stats
