"""Context skills (MCE): a skill folder whose code chooses, filters and formats context.

A skill is the runtime's folder (:mod:`ratchet.runtime.skills`): ``SKILL.md`` with front matter
``name``/``description`` and a body of instructions, optionally ``skill.py`` tools. A *context*
skill adds ``select.py`` defining

    def select(playbook: str, task: str, budget_tokens: int) -> str

which receives the playbook's Markdown text (the file, as :class:`~ratchet.context.playbook.Playbook`
renders it) and the task, and returns the text to put into the prompt (empty: nothing). Its
arguments and result are plain strings so that the same file runs inside a sandboxed workflow,
which cannot import ratchet, and here. The body of ``SKILL.md`` says what the selection is for.

The files are surfaces like any other: a manifest that lists ``skills/*/SKILL.md`` and
``skills/*/select.py`` as editable lets the engine's proposers write or edit a skill, and the gate
keeps it only when the candidate using it does better on held-in tasks. The code is loaded on
demand, the first time a skill is asked to select, never when the library is listed.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from ratchet.context.playbook import Playbook, PlaybookError
from ratchet.runtime.skills import Skill, SkillLibrary
from ratchet.runtime.workspace import load_module

SELECT_FILE = "select.py"


class ContextSkills:
    """The skills under ``root`` (the runtime's :class:`SkillLibrary`), of which those with a
    ``select.py`` can select context."""

    def __init__(self, root: str | Path) -> None:
        self.library = SkillLibrary(Path(root))
        self._modules: dict[str, ModuleType] = {}

    def names(self) -> list[str]:
        """The skills that can select context (those with a ``select.py``)."""
        return [name for name, skill in self.library.skills.items() if (skill.folder / SELECT_FILE).is_file()]

    def listing(self) -> str:
        """Names and descriptions, as the runtime lists skills in a prompt."""
        return self.library.listing()

    def skill(self, name: str) -> Skill:
        if name not in self.library.skills:
            raise PlaybookError(f"no skill {name!r} under {self.library.root}",
                                hint=f"skills there: {', '.join(self.library.skills) or 'none'}")
        return self.library.get(name)

    def _select_module(self, name: str) -> ModuleType:
        if name not in self._modules:
            skill = self.skill(name)
            code = skill.folder / SELECT_FILE
            if not code.is_file():
                raise PlaybookError(f"skill {name!r} has no {SELECT_FILE}",
                                    hint=f"add {code} defining select(playbook, task, budget_tokens) -> str")
            module = load_module(code)
            if not callable(getattr(module, "select", None)):
                raise PlaybookError(f"{code} defines no select function",
                                    hint="define select(playbook: str, task: str, budget_tokens: int) -> str")
            self._modules[name] = module
        return self._modules[name]

    def select(self, name: str, playbook: Playbook | str, task: str, budget_tokens: int) -> str:
        """The context skill ``name`` chooses from ``playbook`` for ``task`` (loaded on first use)."""
        text = playbook.render() if isinstance(playbook, Playbook) else playbook
        out = self._select_module(name).select(text, task, budget_tokens)
        if not isinstance(out, str):
            raise PlaybookError(f"skill {name!r}: select returned {type(out).__name__}, not text",
                                hint="return the prompt text as a str ('' for nothing)")
        return out
