"""OpenEvolve's diff mutation: SEARCH/REPLACE blocks on one surface, falling back to a whole-file
rewrite when a block does not apply (small models often copy the SEARCH text inexactly).

The fallback costs one more model call, shown the reason the blocks failed and the first reply;
a reply with no blocks but a whole file in a fence is taken as a rewrite at once.
"""

from __future__ import annotations

from typing import Any

from ratchet.contracts import Candidate, Proposal
from ratchet.evolve.proposers.base import clip
from ratchet.evolve.proposers.config import DiffOptions
from ratchet.evolve.proposers.parsing import apply_blocks, extract_file, parse_blocks
from ratchet.evolve.proposers.reflective import SurfaceProposer


class DiffProposer(SurfaceProposer):
    """SEARCH/REPLACE edits of one surface, with a whole-file fallback."""

    name = "diff"
    default_template = "diff.md"
    options: DiffOptions
    Options = DiffOptions

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | None:
        asked = self.first_reply(parent, archive, rng)
        if asked is None:
            return None
        surface, values, reply = asked.surface, asked.values, asked.reply
        old = parent.files[surface]
        blocks = parse_blocks(reply)
        meta: dict[str, Any] = {"template": asked.template, "prompt": asked.prompt, "reply": reply,
                                "blocks": len(blocks)}
        if blocks:
            text, error = apply_blocks(old, blocks)
            meta["applied"] = error is None
        else:
            text, error = None, "the reply holds no SEARCH/REPLACE block"
            whole = extract_file(reply, surface)
            if whole.text is not None:
                text, error, meta["applied"] = whole.text, None, "whole-file"
        claim_source = reply
        if text is None:
            if not self.options.fallback:
                return self.skip(parent, error or "no usable edit", reply=reply)
            meta["diff_error"] = error
            fallback, fallback_source = self.template(parent, self.options.fallback_template, "rewrite_after_diff.md")
            retry = self.render(fallback, **values, diff_error=error, previous_reply=clip(reply, 3000))
            second = self.ask(retry, rng)
            meta.update(fallback=fallback_source, fallback_reply=second)
            new = extract_file(second, surface)
            if new.text is None:
                return self.skip(parent, f"diff did not apply ({error}); fallback: {new.error}",
                                 reply=reply, fallback_reply=second)
            text, claim_source = new.text, second + "\n" + reply
        if text == old:
            return self.skip(parent, f"the edit leaves {surface} unchanged", reply=reply)
        claim, stated = self.claim(claim_source, values["known_ids"])
        return self.proposal({surface: text}, claim, (parent.id,), claim_stated=stated, **meta)
