"""OpenEvolve's diff mutation: SEARCH/REPLACE blocks on one surface, falling back to a whole-file
rewrite when a block does not apply (small models often copy the SEARCH text inexactly).

A reply with no blocks but a whole file in a fence is taken as a rewrite at once. A reply with
no edit at all (a small model's claim lines alone, or an edit that changes nothing) is asked
again in the same conversation, with a reminder that shows the file and the block format
(``format_retries`` times). When the blocks still do not apply, or there are none, the fallback
costs one more model call, shown the reason and the last reply, and asks for the whole file.
Every ask is paid from the run's budget; a proposal given up keeps every ask's reason.
"""

from __future__ import annotations

from typing import Any

from ratchet.contracts import Candidate, Proposal, Skip
from ratchet.evolve.proposers.base import clip
from ratchet.evolve.proposers.config import DiffOptions
from ratchet.evolve.proposers.parsing import apply_blocks, extract_file, parse_blocks
from ratchet.evolve.proposers.reflective import SurfaceProposer, attempt, chain


class DiffProposer(SurfaceProposer):
    """SEARCH/REPLACE edits of one surface, with a format retry and a whole-file fallback."""

    name = "diff"
    default_template = "diff.md"
    retry_default = "retry_diff.md"
    options: DiffOptions
    Options = DiffOptions

    def read(self, reply: str, old: str, surface: str) -> tuple[str | None, str | None, Any, int]:
        """``(new text, why none, how it was read, blocks)``; how: True (blocks applied), False
        (blocks that do not apply), "whole-file", or None (no edit in the reply)."""
        blocks = parse_blocks(reply)
        if blocks:
            text, error = apply_blocks(old, blocks)
            how: Any = error is None
        else:
            whole = self.usable(extract_file(reply, surface), old, surface)
            if whole.text is not None:
                return whole.text, None, "whole-file", 0
            text, error, how = None, f"the reply holds no SEARCH/REPLACE block ({whole.error})", None
        if text is not None and text == old:
            text, error, how = None, f"the edit leaves {surface} unchanged", None
        return text, error, how, len(blocks)

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        asked = self.first_reply(parent, archive, rng)
        if isinstance(asked, Skip):
            return asked
        surface, values = asked.surface, asked.values
        old = parent.files[surface]
        replies = [asked.reply]
        attempts: list[dict[str, Any]] = []
        while True:
            text, error, how, blocks = self.read(replies[-1], old, surface)
            attempts.append(attempt("first reply" if len(replies) == 1 else f"format retry {len(replies) - 1}",
                                    error, replies[-1]))
            # blocks that do not apply go to the fallback at once: the model tried, and miscopied
            if text is not None or how is False or len(replies) > self.options.format_retries:
                break
            replies.append(self.retry(parent, asked, [(r, a["error"]) for r, a in zip(replies, attempts)], rng))
        meta: dict[str, Any] = {"template": asked.template, "prompt": asked.prompt, "reply": asked.reply,
                                "blocks": blocks, "applied": how, "retries": replies[1:], "attempts": attempts}
        claim_source = "\n".join(replies)
        if text is None:
            if not self.options.fallback:
                return self.skip(parent, chain(attempts), claim=self.claim_of(replies, values["known_ids"]),
                                 attempts=attempts, reply=asked.reply, retries="\n---\n".join(replies[1:]))
            meta["diff_error"] = error
            fallback, fallback_source = self.template(parent, self.options.fallback_template, "rewrite_after_diff.md")
            retry = self.render(fallback, **values, diff_error=error, previous_reply=clip(replies[-1], 3000))
            second = self.ask(retry, rng)
            meta.update(fallback=fallback_source, fallback_reply=second)
            new = self.usable(extract_file(second, surface), old, surface)
            attempts.append(attempt("whole-file fallback", new.error, second))
            if new.text is None:
                return self.skip(parent, chain(attempts), claim=self.claim_of([*replies, second], values["known_ids"]),
                                 attempts=attempts, reply=asked.reply, retries="\n---\n".join(replies[1:]),
                                 fallback_reply=second)
            text, claim_source = new.text, second + "\n" + claim_source
        claim, stated = self.claim(claim_source, values["known_ids"])
        return self.proposal({surface: text}, claim, (parent.id,), claim_stated=stated, **meta)
