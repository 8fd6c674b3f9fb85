"""GEPA's reflective mutation: rewrite ONE surface after reading the parent's failure traces.

The model sees the surface, the tasks the parent failed with their traces, and the rejected
attempts with the gate's reasons; it answers with a claim and the whole new file.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from ratchet.contracts import Candidate, Proposal
from ratchet.evolve.context import EngineContext
from ratchet.evolve.proposers.base import ModelProposer, pick, surfaces_of
from ratchet.evolve.proposers.config import ReflectiveOptions
from ratchet.evolve.proposers.parsing import extract_file

_LANGUAGE = {".py": "python", ".md": "markdown", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}


def language_of(path: str) -> str:
    """The fence language for a file (blank when unknown)."""
    return _LANGUAGE.get(PurePosixPath(path).suffix, "")


class SurfaceProposer(ModelProposer):
    """Shared by the proposers that change one surface of the parent from its failures."""

    def choose(self, parent: Candidate, rng: Any) -> str | None:
        surfaces = surfaces_of(parent, self.options.surfaces)
        return pick(rng, surfaces) if surfaces else None

    def prompt_values(self, parent: Candidate, archive: Any, surface: str) -> dict[str, Any]:
        results = self.results(archive, parent.id)
        return {
            "surface_path": surface,
            "surface": parent.files[surface],
            "language": language_of(surface),
            "other_files": ", ".join(p for p in sorted(parent.files) if p != surface) or "(none)",
            "failures": self.failures_text(results),
            "rejected": self.rejected_text(archive),
            "known_ids": [r.task_id for r in results],
        }


class ReflectiveProposer(SurfaceProposer):
    """Reflective rewrite of one surface (GEPA)."""

    name = "reflective"
    default_template = "reflective.md"

    def __init__(self, options: ReflectiveOptions, ctx: EngineContext) -> None:
        super().__init__(options, ctx)

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | None:
        surface = self.choose(parent, rng)
        if surface is None:
            return self.skip(parent, f"no file of the parent matches surfaces {self.options.surfaces}")
        values = self.prompt_values(parent, archive, surface)
        template, source = self.template(parent)
        messages = self.render(template, **values)
        reply = self.ask(messages, rng)
        new = extract_file(reply, surface)
        if new.text is None:
            return self.skip(parent, new.error or "no file in the reply", reply=reply)
        if new.text == parent.files[surface]:
            return self.skip(parent, f"the rewrite of {surface} is identical to the parent's", reply=reply)
        claim, stated = self.claim(reply, values["known_ids"])
        return self.proposal({surface: new.text}, claim, (parent.id,), template=source, claim_stated=stated,
                             prompt=messages[0]["content"], reply=reply)
