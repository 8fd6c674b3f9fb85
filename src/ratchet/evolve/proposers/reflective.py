"""GEPA's reflective mutation: rewrite ONE surface after reading the parent's failure traces.

The model sees the surface, the tasks the parent failed with their traces, and the rejected
attempts with the gate's reasons; it answers with a claim and the whole new file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ratchet.contracts import Candidate, Proposal
from ratchet.evolve.proposers.base import ModelProposer, pick, surfaces_of
from ratchet.evolve.proposers.config import ReflectiveOptions
from ratchet.evolve.proposers.parsing import extract_file

_LANGUAGE = {".py": "python", ".md": "markdown", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}


def language_of(path: str) -> str:
    """The fence language for a file (blank when unknown)."""
    return _LANGUAGE.get(PurePosixPath(path).suffix, "")


@dataclass(frozen=True)
class Asked:
    """The first exchange about one surface: what was asked and what came back."""

    surface: str
    values: dict[str, Any]
    template: str
    prompt: str
    reply: str


class SurfaceProposer(ModelProposer):
    """Shared by the proposers that change one surface of the parent from its failures."""

    def first_reply(self, parent: Candidate, archive: Any, rng: Any) -> Asked | None:
        """Pick a surface, show the model it with the evidence, return its reply (None: no surface)."""
        surface = self.choose(parent, rng)
        if surface is None:
            return self.skip(parent, f"no file of the parent matches surfaces {self.options.surfaces}")
        values = self.prompt_values(parent, archive, surface)
        template, source = self.template(parent)
        messages = self.render(template, **values)
        return Asked(surface, values, source, messages[0]["content"], self.ask(messages, rng))

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
    Options = ReflectiveOptions

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | None:
        asked = self.first_reply(parent, archive, rng)
        if asked is None:
            return None
        surface, reply = asked.surface, asked.reply
        new = extract_file(reply, surface)
        if new.text is None:
            return self.skip(parent, new.error or "no file in the reply", reply=reply)
        if new.text == parent.files[surface]:
            return self.skip(parent, f"the rewrite of {surface} is identical to the parent's", reply=reply)
        claim, stated = self.claim(reply, asked.values["known_ids"])
        return self.proposal({surface: new.text}, claim, (parent.id,), template=asked.template, claim_stated=stated,
                             prompt=asked.prompt, reply=reply)
