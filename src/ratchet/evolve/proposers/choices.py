"""Declared alternatives, tried one at a time: a search over a harness's settings with no model.

ADAS and AFlow search over a space someone wrote down (building blocks, operators); a workspace's
YAML surfaces are such a space when the run lists, per setting, the values worth trying (an opening
that shows the tests' output, another middleware list, a sampling temperature), or whole files (another
system prompt, with the settings it needs). Each proposal sets one key of one file to one value the parent does not have and that no archived candidate has with
the parent's other files, so a step never pays for a twin. The key's block is replaced in the text,
so the file's comments (which document the surface to the model proposers) stay.
"""

from __future__ import annotations

import random
import re
from typing import Any

import yaml

from ratchet.contracts import Candidate, Claim, Proposal, Skip
from ratchet.evolve.proposers.base import BaseProposer
from ratchet.evolve.proposers.config import ChoicesOptions

_ABSENT = object()


def set_key(text: str, key: str, value: Any) -> str:
    """``text`` (a YAML mapping) with top-level ``key`` set to ``value``: the key's lines (its line
    and the indented or ``-`` lines under it) replaced, everything else kept; appended when absent."""
    rendered = yaml.safe_dump({key: value}, default_flow_style=False, sort_keys=False, width=110)
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(rf"{re.escape(key)}\s*:", line)), None)
    if start is None:
        return (text if not text or text.endswith("\n") else text + "\n") + rendered
    end = start + 1
    while end < len(lines):
        if lines[end][:1] in (" ", "\t", "-"):
            end += 1
            continue
        if not lines[end].strip():  # a blank line inside the block, if what follows is still the block
            after = next((line for line in lines[end:] if line.strip()), "")
            if after[:1] in (" ", "\t", "-"):
                end += 1
                continue
        break
    return "".join(lines[:start]) + rendered + "".join(lines[end:])


def _value(text: str, key: str) -> Any:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return _ABSENT
    return data.get(key, _ABSENT) if isinstance(data, dict) else _ABSENT


def _short(value: Any) -> str:
    if value is _ABSENT:
        return "(unset)"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()
    return text if len(text) <= 120 else text[:117] + "..."


def applied(files: dict[str, str], file: str, key: str | None, value: Any) -> str | None:
    """The new text of ``file`` with ``key`` set to ``value`` (the whole text when ``key`` is
    None); None when the file is missing or the edit would not read back as that value."""
    if file not in files:
        return None
    if key is None:
        return str(value)
    text = set_key(files[file], key, value)
    return text if _value(text, key) == value else None  # the block was not where the edit assumed


class ChoicesProposer(BaseProposer):
    """Sets one declared setting of the parent to one of its declared values."""

    name = "choices"
    deterministic = True
    """Its proposals are a function of the parent and the archive: once every value is tried from a
    parent (or is an archived twin), asking again gives none."""

    def __init__(self, options: ChoicesOptions, ctx: Any = None) -> None:
        self.options = options
        self.ctx = ctx

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        known = [c.files for c in archive.candidates()] if archive is not None else []
        options = []
        for choice in self.options.choices:
            if choice.file not in parent.files:
                continue
            current = parent.files[choice.file] if choice.key is None else _value(parent.files[choice.file], choice.key)
            options += [(choice, value, current) for value in choice.values if value != current]
        rng = rng if isinstance(rng, random.Random) else random.Random(int(rng.random() * 2**31))
        rng.shuffle(options)
        for choice, value, current in options:
            files = dict(parent.files)
            edits = [(choice.file, choice.key, value), *((s.file, s.key, s.value) for s in choice.also)]
            for file, key, new in edits:
                text = applied(files, file, key, new)
                if text is None:
                    break
                files[file] = text
            else:
                if any(files == other for other in known):
                    continue
                changed = {path: text for path, text in files.items() if parent.files.get(path) != text}
                what = choice.key if choice.key is not None else "(the whole file)"
                shown = (f"{_short(current)} -> {_short(value)}" if choice.key is not None
                         else f"{_first_line(current)} -> {_first_line(value)}")
                target = f"{choice.file}: {what}: {shown}" + "".join(
                    f"; {s.file}: {s.key or '(the whole file)'}" for s in choice.also)
                return Proposal(files=changed, claim=Claim(target=target, root_cause="a declared alternative "
                                "(no model)", predicted_flips=()), proposer=self.name, parents=(parent.id,),
                                meta={"surfaces": sorted(changed), "key": choice.key})
        missing = sorted({c.file for c in self.options.choices} - set(parent.files))
        return self.skip(parent, "every declared value was tried from this parent or is its own"
                         + (f" (not in the parent: {', '.join(missing)})" if missing else ""))


def _first_line(text: str) -> str:
    line = next((ln for ln in str(text).splitlines() if ln.strip()), "")
    return repr(line[:60] + ("..." if len(line) > 60 else ""))
