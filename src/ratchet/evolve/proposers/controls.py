"""Control proposers for the A/A benchmark: changes that cannot make a harness better.

``noop`` proposes the parent unchanged (an identical copy: the gate must reject it); ``cosmetic``
appends an inert line (a comment, a blank line) to one file, so the candidate's id and any
prompt-dependent sampling change while its behaviour does not.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from ratchet.contracts import Candidate, Claim, Proposal, Skip
from ratchet.evolve.context import EngineContext
from ratchet.evolve.proposers.base import BaseProposer, pick, surfaces_of
from ratchet.evolve.proposers.config import ControlOptions

#: The claim of a control: it predicts no task flips.
CONTROL_CLAIM = Claim(target="none (control proposal)", root_cause="", predicted_flips=())
_COMMENT = {".py": "# {}", ".yaml": "# {}", ".yml": "# {}", ".sh": "# {}", ".md": "<!-- {} -->"}


class NoopProposer(BaseProposer):
    """Proposes no change at all."""

    name = "noop"

    def __init__(self, options: ControlOptions, ctx: EngineContext) -> None:
        self.options = options
        self.ctx = ctx

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        return Proposal(files={}, claim=CONTROL_CLAIM, proposer=self.name, parents=(parent.id,),
                        meta={"surfaces": [], "control": "noop"})


class CosmeticProposer(BaseProposer):
    """Appends an inert line to one file (a comment where the format has one, else a newline)."""

    name = "cosmetic"

    def __init__(self, options: ControlOptions, ctx: EngineContext) -> None:
        self.options = options
        self.ctx = ctx

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        surfaces = surfaces_of(parent, self.options.surfaces)
        if not surfaces:
            return self.skip(parent, f"no file of the parent matches surfaces {self.options.surfaces}")
        path = pick(rng, surfaces)
        style = _COMMENT.get(PurePosixPath(path).suffix)
        mark = f"cosmetic {int(rng.random() * 1e9)}"
        text = parent.files[path]
        text = (text if text.endswith("\n") or not text else text + "\n") + (style.format(mark) + "\n" if style else "\n")
        return Proposal(files={path: text}, claim=CONTROL_CLAIM, proposer=self.name, parents=(parent.id,),
                        meta={"surfaces": [path], "control": "cosmetic"})
