"""Settings of context learning (YAML under ``context:``, or ``--set key=value``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ratchet.config import Settings


class ContextConfig(Settings):
    budget_tokens: int | None = Field(400, ge=0)
    """Most tokens of playbook items that enter one prompt (generator and curator alike). None:
    no budget, the whole playbook enters every prompt (ACE's behaviour)."""
    min_relevance: float | None = Field(0.4, ge=-1.0, le=1.0)
    """Least relevance to the task (:func:`ratchet.context.budget.relevance`: the mean of the
    task's cosine with the item's text and with the task the item was learned from) for an item to
    enter a prompt, whatever budget is left. None (or -1): every item may enter (ACE). It applies
    where relevance is measured, with an encoder (``encoder``): the learners, ``ratchet serve``
    (``context.relevance: encoder``, its default) and the curator proposer with ``embed: true``; a
    sandboxed workflow measures by shared words instead, against its own minimum
    (:data:`ratchet.context.lexical.MIN_RELEVANCE`).

    0.4 from all-MiniLM-L6-v2 on HumanEval/0-39, the train problems of the first trial
    (``bench/context_relevance.py``, ``bench/results/context_relevance.md``): the two of its three
    items whose text is on record ("Always convert the input string to lowercase", "Always replace
    spaces with an empty string before processing", from HumanEval/16 and /1) score 0.64 and 0.63
    on their own problems and a median of 0.19 and 0.17 on the other 39; at 0.4 they enter 3 and 2
    of those 39 (string problems: flip_case, strlen, how_many_times; parse_nested_parens,
    string_sequence) where the budget alone let all three into all 40. Two different train
    problems have a median cosine of 0.31, so the origin alone would not scope. An item with no
    origin (a playbook from before) is judged by its text alone, which reaches 0.4 on neither
    item's own problem (0.29, 0.25): such items seldom enter."""
    record_weight: float = Field(0.3, ge=0.0)
    """Weight of an item's record (tanh of helpful minus harmful, over 3) beside its relevance
    (cosine with the task) when items compete for the budget."""
    dedup_threshold: float = Field(0.85, gt=0.0, le=1.0)
    """Cosine at or above which an ADD repeats an existing item and becomes a helpful TAG of it
    (ace-framework's value for all-MiniLM-L6-v2)."""
    dedup: bool = True
    """Fold near-duplicate ADDs into the item they repeat; off keeps ACE's add-only behaviour."""
    prune_margin: int | None = Field(2, ge=1)
    """An item is deleted once its harmful count exceeds its helpful count by this much. None:
    never deleted for its record."""
    max_items: int | None = Field(60, ge=1)
    """Most items a playbook keeps; past it the weakest (lowest net count, then oldest) go.
    None: no cap (pruning by record only)."""
    curator_operations: list[Literal["ADD", "UPDATE", "MERGE", "DELETE", "TAG"]] | None = None
    """The operations the curator may emit (its prompt lists only these, its grammar admits only
    these, any other is a problem returned to it). None: all. ``[ADD]`` is the official ACE code's
    add-only curation."""
    tags: Literal["reflector", "evidence", "outcome"] = "evidence"
    """Which helpful/harmful tags move an item's counters (:mod:`ratchet.context.tagging`). Every
    strategy counts a tag only for an item that was in the attempt's prompt. ``reflector``: the
    reflector's (and curator's) tags as given. ``evidence``: those, less a ``helpful`` on a failed
    attempt and a ``harmful`` on a passed one (the 1.5B tagged helpful after failures). ``outcome``:
    no model's tags; each shown item is tagged by the grader's verdict (helpful on success, harmful
    on failure, none on a partial score). Every tag dropped is recorded with why."""
    max_retries: int = Field(1, ge=0)
    """Times a curator whose reply had malformed operations is asked again, shown its problems."""
    use_grammar: bool = True
    """Constrain the curator's reply with a GBNF grammar (embedded llama.cpp honours it), so a
    small model cannot emit malformed JSON."""
    temperature: float = Field(0.0, ge=0.0)
    """Sampling temperature of reflector and curator."""
    max_tokens: int = Field(256, ge=16)
    """Most tokens a reflector or curator reply may take."""
    trace_chars: int = Field(2000, ge=100)
    """Most characters of a trajectory shown to the reflector (the end is kept: outcomes are last)."""
    encoder: str = "all-minilm-l6-v2"
    """Catalog name of the sentence encoder used for relevance and de-duplication."""
    prompt_set: Literal["tasks", "conversation"] = "tasks"
    """The packaged prompts the files in ``prompts`` override. ``tasks``: an attempt at a task
    with a grader (HumanEval, a game), its lesson a general rule for tasks of the kind.
    ``conversation``: a served turn and the user's next message, its lesson an instruction about
    how this user wants to be answered, their specifics (a name, a language) kept word for word:
    the task prompts ask for a general rule, and a general rule drops exactly what a user said
    (the 1.5B learned "Always use your name when greeting someone" from "call me Noor")."""
    prompts: Path | None = None
    """Directory of prompt files (generator.md, reflector.md, curator.md) overriding the packaged
    ones of ``prompt_set`` file by file: the editable surfaces."""

    @classmethod
    def stored(cls, data: dict[str, Any]) -> ContextConfig:
        """A config a run stored, read as it was meant when stored: a key that it lacks because
        the run predates the key takes the value that reproduces the behaviour of then
        (:data:`BEFORE`), not today's default; so a resumed run measures what it began to."""
        return cls.model_validate({**BEFORE, **data})


#: The values of later keys that reproduce a config stored before them: every item could enter a
#: prompt (no least relevance) and the reflector's tags of shown items counted as given.
BEFORE: dict[str, Any] = {"min_relevance": None, "tags": "reflector"}
