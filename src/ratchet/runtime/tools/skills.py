"""The tool that loads a skill on demand."""

from __future__ import annotations

from ratchet.runtime.tools.registry import ToolContext, tools_of_module
from ratchet.runtime.workspace import load_module

TOOLS = ("load_skill",)


def load_skill(ctx: ToolContext, name: str) -> str:
    """Read a skill's instructions; its code's tools (if any) become callable from now on.

    Args:
        name: the skill's name, as listed in the system prompt.
    """
    skill = ctx.extra["skills"].get(name)
    added = []
    code = skill.folder / "skill.py"
    if code.is_file():
        for tool in tools_of_module(load_module(code)):
            ctx.agent.toolbox.add(tool, pin=True)
            added.append(tool.name)
    tail = f"\n\n[tools added: {', '.join(added)}]" if added else ""
    return skill.body() + tail
