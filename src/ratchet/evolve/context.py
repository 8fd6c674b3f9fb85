"""What every engine component is built with: one object instead of a keyword per component."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ratchet.contracts import Model
from ratchet.evolve.manifest import Manifest


@dataclass
class EngineContext:
    """Handed to each component's constructor as ``Component(options, ctx)``.

    ``model`` is the accounted model proposers call (every call counts against the run's one
    budget); ``workspace`` is the original workspace directory, read-only to everything but the
    engine; ``run`` is the run store's :class:`ratchet.store.run.Run` (typed loosely to keep this
    module free of the store). ``resumes_at`` is the step the run starts (or resumes) at: what a
    component that counts the run's history (the gate's tests so far) counts up to, so that a
    step rerun after a kill does not count its own first attempt.
    """

    manifest: Manifest
    workspace: Path
    model: Model | None = None
    run: Any = None
    seed: int = 0
    resumes_at: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
