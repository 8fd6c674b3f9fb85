"""Skills: folders holding a ``SKILL.md`` (front matter ``name``/``description``, then the body)
and optionally a ``skill.py`` whose ``TOOLS`` become tools. Only names and descriptions enter
the prompt; the body and the code load when the agent asks (``load_skill``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ratchet.runtime.errors import ToolError


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path

    def body(self) -> str:
        return _split(self.folder / "SKILL.md")[1]


def _split(path: Path) -> tuple[dict, str]:
    text = path.read_text()
    if text.startswith("---"):
        _, front, body = text.split("---", 2)
        return yaml.safe_load(front) or {}, body.strip()
    return {}, text.strip()


class SkillLibrary:
    """The skills under one directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.skills: dict[str, Skill] = {}
        for md in sorted(self.root.glob("*/SKILL.md")) if self.root.is_dir() else []:
            front, _ = _split(md)
            name = str(front.get("name") or md.parent.name)
            self.skills[name] = Skill(name, str(front.get("description") or ""), md.parent)

    def listing(self) -> str:
        if not self.skills:
            return ""
        rows = "\n".join(f"- {s.name}: {s.description}" for s in self.skills.values())
        return f"Skills (call load_skill with a name to read one):\n{rows}\n"

    def get(self, name: str) -> Skill:
        if name not in self.skills:
            raise ToolError(f"no skill {name!r}; skills: {', '.join(self.skills) or 'none'}")
        return self.skills[name]
