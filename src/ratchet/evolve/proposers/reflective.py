"""GEPA's reflective mutation: rewrite ONE surface after reading the parent's failure traces.

The model sees the surface, the tasks the parent failed with their traces, and the rejected
attempts with the gate's reasons; it answers with a claim and the whole new file. A small model
often answers with the claim alone (or fences the claim instead of the file): then it is asked
again, in the same conversation, with a reminder that shows the file and the format
(``format_retries`` times at most, each one call from the run's budget), before the proposal is
given up and recorded as failed with every ask's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ratchet.contracts import Candidate, Claim, Message, Proposal, Skip
from ratchet.evolve.proposers.base import ModelProposer, pick, surfaces_of
from ratchet.evolve.proposers.config import ReflectiveOptions, SurfaceProposerOptions
from ratchet.evolve.proposers.parsing import FileReply, extract_file, parse_claim

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


def attempt(ask: str, error: str | None, reply: str) -> dict[str, Any]:
    """One ask's outcome, as a failed proposal's record keeps it."""
    return {"ask": ask, "error": error, "reply": reply[:2000]}


def chain(attempts: list[dict[str, Any]]) -> str:
    """Every ask's reason in one line: why the proposal was given up."""
    return "; ".join(f"{a['ask']}: {a['error']}" for a in attempts)


class SurfaceProposer(ModelProposer):
    """Shared by the proposers that change one surface of the parent from its failures."""

    options: SurfaceProposerOptions
    #: The packaged reminder sent after an unusable reply (``retry_template`` overrides it).
    retry_default = "retry_rewrite.md"

    def first_reply(self, parent: Candidate, archive: Any, rng: Any) -> Asked | Skip:
        """Pick a surface, show the model it with the evidence, return its reply (a skip: no surface)."""
        surface = self.choose(parent, rng)
        if surface is None:
            return self.skip(parent, f"no file of the parent matches surfaces {self.options.surfaces}")
        values = self.prompt_values(parent, archive, surface)
        template, source = self.template(parent)
        messages = self.fitted_request(template, self.results(archive, parent.id), **values)  # fills $failures
        return Asked(surface, values, source, messages[0]["content"], self.ask(messages, rng))

    def retry(self, parent: Candidate, asked: Asked, history: list[tuple[str, str]], rng: Any) -> str:
        """Ask again in the same conversation: the first prompt, then each (reply, why it could not
        be used) as the model's turn and a reminder that names the problem and shows the file and
        the answer's format. Returns the new reply."""
        template, _ = self.template(parent, self.options.retry_template, self.retry_default)
        claim = self.claim_of([reply for reply, _ in history], asked.values["known_ids"])
        change = ("Make the change the failures call for." if claim is None else f"The change you described: "
                  f"{claim.target}" + (f" (root cause: {claim.root_cause})" if claim.root_cause else ""))
        messages: list[Message] = [{"role": "user", "content": asked.prompt}]
        for reply, error in history:
            messages.append({"role": "assistant", "content": reply})
            messages += self.render(template, **asked.values, error=error, change=change)
        return self.ask(messages, rng)

    def claim_of(self, replies: list[str], known_ids: list[str]) -> Claim | None:
        """The claim any of the replies stated (the first one's wins), for a failed proposal's record."""
        return parse_claim("\n".join(replies), known_ids)

    @staticmethod
    def usable(new: FileReply, old: str, surface: str) -> FileReply:
        """``new`` unless it leaves the file as it was (then why)."""
        if new.text is not None and new.text == old:
            return FileReply(None, f"the rewrite of {surface} is identical to the parent's")
        return new

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
            "rejected": self.rejected_text(archive),
            "known_ids": [r.task_id for r in results],
        }


class ReflectiveProposer(SurfaceProposer):
    """Reflective rewrite of one surface (GEPA)."""

    name = "reflective"
    default_template = "reflective.md"
    Options = ReflectiveOptions

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        asked = self.first_reply(parent, archive, rng)
        if isinstance(asked, Skip):
            return asked
        surface = asked.surface
        replies = [asked.reply]
        attempts: list[dict[str, Any]] = []
        while True:
            new = self.usable(extract_file(replies[-1], surface), parent.files[surface], surface)
            error = new.error or "no usable file"
            attempts.append(attempt("first reply" if len(replies) == 1 else f"format retry {len(replies) - 1}",
                                    None if new.text is not None else error, replies[-1]))
            if new.text is not None or len(replies) > self.options.format_retries:
                break
            replies.append(self.retry(parent, asked, [(r, a["error"]) for r, a in zip(replies, attempts)], rng))
        if new.text is None:
            return self.skip(parent, chain(attempts), claim=self.claim_of(replies, asked.values["known_ids"]),
                             attempts=attempts, reply=asked.reply, retries="\n---\n".join(replies[1:]))
        # the claim is usually in the first reply; a retry's reply may carry only the file
        claim, stated = self.claim("\n".join(replies), asked.values["known_ids"])
        return self.proposal({surface: new.text}, claim, (parent.id,), template=asked.template, claim_stated=stated,
                             prompt=asked.prompt, reply=asked.reply, retries=replies[1:], attempts=attempts)
