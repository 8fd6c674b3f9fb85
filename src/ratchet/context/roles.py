"""ACE's three roles over any :class:`ratchet.contracts.Model`, each a small object.

- :class:`Generator` answers a task with the playbook items chosen for it in its system prompt.
- :class:`Reflector` reads one attempt and returns item tags (helpful / harmful) and a lesson.
- :class:`Curator` turns a lesson into playbook operations; malformed ones go back to it with
  what is wrong, and every problem is counted.

Their prompts are files (``prompts/*.md`` in this package, overridable from a directory): the
surfaces an engine may edit. Placeholders are ``{name}`` and are filled by plain replacement, so
braces in a playbook or a trace are safe.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ratchet.context.operations import (
    TAGS,
    Operation,
    Problem,
    Tag,
    _json_object,
    apply_operations,
    op_record,
    operations_grammar,
    parse_operations,
    reflection_grammar,
)
from ratchet.context.playbook import Item, Playbook, PlaybookError, clean_text
from ratchet.contracts import Message, Model
from ratchet.models.request import estimate_tokens

ROLES = ("generator", "reflector", "curator")

#: How the curator's prompt shows each operation (its ``{operations}``): the ones it may emit.
OPERATION_LINES = {
    "ADD": '{"op": "ADD", "section": <one word naming the topic>, "text": <the lesson, as a general rule>}',
    "UPDATE": '{"op": "UPDATE", "id": <item id>, "text": <a better wording>}',
    "MERGE": '{"op": "MERGE", "ids": [<item id>, <item id>], "text": <one lesson covering both>}',
    "DELETE": '{"op": "DELETE", "id": <item id>}',
    "TAG": '{"op": "TAG", "id": <item id>, "tag": "helpful" or "harmful"}',
}
#: The operations a curator's prompt lists when any may be used (TAG is the reflector's to give).
DEFAULT_LISTED = ("ADD", "UPDATE", "MERGE", "DELETE")


@dataclass(frozen=True)
class Prompts:
    generator: str
    reflector: str
    curator: str

    @classmethod
    def load(cls, directory: str | Path | None = None, prompt_set: str = "tasks") -> Prompts:
        """The package's prompts of ``prompt_set`` (``tasks``: ``prompts/``; another set:
        ``prompts/<set>/``, each role it lacks taken from ``prompts/``), each replaced by
        ``directory/<role>.md`` where that exists."""
        texts = {}
        packaged = resources.files("ratchet.context").joinpath("prompts")
        for role in ROLES:
            override = Path(directory) / f"{role}.md" if directory is not None else None
            if directory is not None and not Path(directory).is_dir():
                raise PlaybookError(f"prompt directory {directory} does not exist",
                                    hint="point context.prompts at a folder holding generator.md / reflector.md / curator.md")
            if override is not None and override.is_file():
                texts[role] = override.read_text(encoding="utf-8")
            elif prompt_set != "tasks" and packaged.joinpath(prompt_set, f"{role}.md").is_file():
                texts[role] = packaged.joinpath(prompt_set, f"{role}.md").read_text(encoding="utf-8")
            else:
                texts[role] = packaged.joinpath(f"{role}.md").read_text(encoding="utf-8")
        return cls(**texts)


def fill(template: str, **values: str) -> str:
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


def render_items(items: list[Item]) -> str:
    if not items:
        return "(empty)"
    return "\n".join(f"[{i.id}] ({i.section}) {i.text}" for i in items)


def playbook_tokens(playbook: Playbook) -> int:
    """What a prompt holding the whole playbook pays for it (its items as prompts show them):
    the playbook's size in tokens."""
    return estimate_tokens(render_items(list(playbook.items.values()))) if len(playbook) else 0


class Generator:
    """Answers ``task`` with ``items`` in the system prompt."""

    def __init__(self, model: Model, prompts: Prompts, *, max_tokens: int = 512) -> None:
        self.model, self.prompts, self.max_tokens = model, prompts, max_tokens

    def messages(self, task: str, items: list[Item]) -> list[Message]:
        return [{"role": "system", "content": fill(self.prompts.generator, playbook=render_items(items))},
                {"role": "user", "content": task}]

    def answer(self, task: str, items: list[Item], *, temperature: float = 0.0, seed: int | None = None) -> str:
        return self.model.complete(self.messages(task, items), temperature=temperature,
                                   max_tokens=self.max_tokens, seed=seed).text


@dataclass
class Reflection:
    tags: list[Tag] = field(default_factory=list)
    lesson: str = ""
    problems: list[Problem] = field(default_factory=list)


class Reflector:
    def __init__(self, model: Model, prompts: Prompts, *, temperature: float = 0.0, max_tokens: int = 256,
                 use_grammar: bool = True) -> None:
        self.model, self.prompts = model, prompts
        self.temperature, self.max_tokens, self.use_grammar = temperature, max_tokens, use_grammar

    def reflect(self, task: str, trajectory: str, outcome: str, items: list[Item]) -> Reflection:
        prompt = fill(self.prompts.reflector, task=task, playbook=render_items(items),
                      trajectory=trajectory, outcome=outcome)
        text = self.model.complete([{"role": "user", "content": prompt}], temperature=self.temperature,
                                   max_tokens=self.max_tokens,
                                   grammar=reflection_grammar([i.id for i in items]) if self.use_grammar else None).text
        out = parse_reflection(text, {i.id for i in items})
        # A small model copies the prompt's wording back as its "lesson"; that teaches nothing.
        if len(out.lesson) >= 12 and out.lesson.lower() in self.prompts.reflector.lower():
            out.problems.append(Problem(None, "the lesson repeats the prompt's own words", out.lesson))
            out.lesson = ""
        return out


def parse_reflection(text: str, shown: set[str]) -> Reflection:
    """Tags and lesson from a reflector's reply; a tag of an item it was not shown, or a bad
    entry, is a problem (counted), never applied."""
    out = Reflection()
    try:
        data = _json_object(text)
    except json.JSONDecodeError as exc:
        out.problems.append(Problem(None, f"reflection is not valid JSON ({exc.msg})", text[:200]))
        return out
    if not isinstance(data, dict):
        out.problems.append(Problem(None, "reflection must be a JSON object", text[:200]))
        return out
    lesson = data.get("lesson", "")
    if isinstance(lesson, str):
        out.lesson = clean_text(lesson)
    else:
        out.problems.append(Problem(None, "'lesson' must be a string", json.dumps(lesson)[:200]))
    tags = data.get("tags", [])
    if not isinstance(tags, list):
        out.problems.append(Problem(None, "'tags' must be a list", json.dumps(tags)[:200]))
        return out
    for index, entry in enumerate(tags):
        if not isinstance(entry, dict) or entry.get("tag") not in TAGS or entry.get("id") not in shown:
            out.problems.append(Problem(index, "a tag needs the id of a shown item and tag helpful or harmful",
                                        json.dumps(entry)[:200]))
            continue
        out.tags.append(Tag(entry["id"], entry["tag"]))
    return out


@dataclass
class Curation:
    """The operations a curator settled on and every problem along the way (all attempts)."""

    ops: list[Operation] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    attempts: int = 0


class Curator:
    """Asks the model for operations; checks them against the playbook (parse, then a dry run
    that finds ids that do not exist); on problems asks again with them, ``max_retries`` times.
    The operations kept are the valid ones of every attempt, in order. ``operations`` limits what
    it may emit (None: any): its prompt lists only those, its grammar admits only those, and any
    other it sends is a problem returned to it."""

    def __init__(self, model: Model, prompts: Prompts, *, temperature: float = 0.0, max_tokens: int = 256,
                 max_retries: int = 1, use_grammar: bool = True, operations: Sequence[str] | None = None) -> None:
        self.model, self.prompts = model, prompts
        self.temperature, self.max_tokens = temperature, max_tokens
        self.max_retries, self.use_grammar = max_retries, use_grammar
        self.operations = tuple(operations) if operations is not None else None
        listed = DEFAULT_LISTED if self.operations is None else self.operations
        self.listing = "\n".join(OPERATION_LINES[name] for name in listed)

    def _allowed(self, ops: list[Operation]) -> tuple[list[Operation], list[Problem]]:
        if self.operations is None:
            return ops, []
        kept, problems = [], []
        for index, op in enumerate(ops):
            if op.op in self.operations:
                kept.append(op)
            else:
                problems.append(Problem(index, f"only {', '.join(self.operations)} may be used here",
                                        json.dumps(op_record(op), sort_keys=True)))
        return kept, problems

    def curate(self, playbook: Playbook, items: list[Item], lesson: str, outcome: str) -> Curation:
        result = Curation()
        feedback = ""
        for _ in range(self.max_retries + 1):
            prompt = fill(self.prompts.curator, playbook=render_items(items), lesson=lesson or "(none)",
                          outcome=outcome, feedback=feedback, operations=self.listing)
            grammar = operations_grammar(list(playbook.items), allowed=self.operations) if self.use_grammar else None
            text = self.model.complete([{"role": "user", "content": prompt}], temperature=self.temperature,
                                       max_tokens=self.max_tokens, grammar=grammar).text
            result.attempts += 1
            ops, problems = parse_operations(text)
            ops, refused = self._allowed(ops)
            problems += refused
            kept = len(result.ops)
            dry = apply_operations(playbook, result.ops + ops)
            # Dry-run problems are indexed over the kept + new list; shift them to this reply's.
            # (The kept operations passed the same dry run before, so only new ones can fail.)
            problems += [Problem(None if p.index is None else p.index - kept, p.message, p.raw)
                         for p in dry.problems]
            bad = {p.index for p in dry.problems}
            result.ops += [op for k, op in enumerate(ops) if k + kept not in bad]
            result.problems += problems
            if not problems:
                break
            feedback = ("Your previous reply had these problems; send only corrected operations:\n"
                        + "\n".join(p.feedback() for p in problems))
        return result
