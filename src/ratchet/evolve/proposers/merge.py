"""GEPA's merge: combine the surfaces of two accepted candidates that won different tasks.

The second parent is drawn from the archive's pool: the candidates that solve the most tasks the
parent fails (ties at random). Per surface (``ancestor`` mode, no model call): a surface only one
of them changed since their nearest common ancestor comes from that one; a surface both changed
comes from the one that won more tasks. ``llm`` mode asks the model to merge one surface both
changed instead. The claim predicts the tasks the second parent wins and the parent loses.
"""

from __future__ import annotations

from typing import Any

from ratchet.contracts import Candidate, Claim, Proposal, Skip
from ratchet.evolve.archive import per_task_means
from ratchet.evolve.proposers.base import ModelProposer, pick
from ratchet.evolve.proposers.config import MergeOptions
from ratchet.evolve.proposers.parsing import extract_file, parse_claim
from ratchet.evolve.proposers.reflective import language_of


def wins(a: dict[str, float], b: dict[str, float]) -> list[str]:
    """Tasks both were scored on where ``a`` did better than ``b``."""
    return sorted(t for t in a.keys() & b.keys() if a[t] > b[t])


def common_ancestor(first: Candidate, second: Candidate, known: dict[str, Candidate]) -> Candidate | None:
    """The nearest candidate on ``first``'s lineage that is also on ``second``'s."""
    def lineage(c: Candidate | None) -> list[Candidate]:
        chain: list[Candidate] = []
        while c is not None and c.id not in {x.id for x in chain}:
            chain.append(c)
            c = known.get(c.parent_id) if c.parent_id else None
        return chain

    theirs = {c.id for c in lineage(second)}
    return next((c for c in lineage(first) if c.id in theirs), None)


class MergeProposer(ModelProposer):
    """Merge of two parents' surfaces (GEPA merge)."""

    name = "merge"
    default_template = "merge.md"
    options: MergeOptions
    Options = MergeOptions

    def second_parent(self, parent: Candidate, archive: Any, rng: Any) -> tuple[Candidate, dict, dict] | None:
        mine = per_task_means(self.results(archive, parent.id))
        pool = [c for c in archive.candidates(self.options.pool) if c.id != parent.id and c.files != parent.files]
        if not pool:
            return None
        scored = [(c, per_task_means(self.results(archive, c.id))) for c in pool]
        best = max(len(wins(theirs, mine)) for _, theirs in scored)
        other, theirs = pick(rng, [(c, t) for c, t in scored if len(wins(t, mine)) == best])
        return other, mine, theirs

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        found = self.second_parent(parent, archive, rng)
        if found is None:
            return self.skip(parent, f"no other {self.options.pool!r} candidate with different files to merge with")
        other, mine, theirs = found
        known = {c.id: c for c in archive.candidates()}
        known.setdefault(parent.id, parent)
        known.setdefault(other.id, other)
        ancestor = common_ancestor(parent, other, known)
        base = ancestor.files if ancestor is not None else {}
        a_wins, b_wins = wins(mine, theirs), wins(theirs, mine)
        files: dict[str, str] = {}
        both: list[str] = []
        for path in sorted(parent.files.keys() | other.files.keys()):
            a, b = parent.files.get(path), other.files.get(path)
            if a == b or b is None:
                continue
            if a is None or a == base.get(path):
                files[path] = b
            elif b != base.get(path):
                both.append(path)
                if len(b_wins) > len(a_wins):
                    files[path] = b
        claim = Claim(target=f"combine the tasks {other.id} solves with the parent's",
                      root_cause="each line of descent changed different surfaces or won different tasks",
                      predicted_flips=tuple(b_wins))
        meta: dict[str, Any] = {"second_parent": other.id, "ancestor": ancestor.id if ancestor else None,
                                "both_changed": both, "mode": self.options.mode}
        if self.options.mode == "llm" and both:
            path = pick(rng, both)
            template, source = self.template(parent)
            messages = self.render(template, surface_path=path, language=language_of(path),
                                   a_text=parent.files[path], b_text=other.files[path],
                                   a_wins=", ".join(a_wins) or "(none)", b_wins=", ".join(b_wins) or "(none)")
            reply = self.ask(messages, rng)
            new = extract_file(reply, path)
            if new.text is None:
                return self.skip(parent, f"merge of {path}: {new.error}", reply=reply)
            files[path] = new.text
            claim = parse_claim(reply, sorted(mine.keys() | theirs.keys())) or claim
            meta.update(template=source, merged=path, prompt=messages[0]["content"], reply=reply)
        files = {p: t for p, t in files.items() if parent.files.get(p) != t}
        if not files:
            return self.skip(parent, f"merging with {other.id} gives back the parent's files")
        return self.proposal(files, claim, (parent.id, other.id), **meta)
