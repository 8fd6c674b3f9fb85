"""Memory tools: search, read back and add to the agent's file memory."""

from __future__ import annotations

from ratchet.runtime.errors import ToolError
from ratchet.runtime.tools.registry import ToolContext

TOOLS = ("memory_search", "memory_read", "memory_note")


def memory_search(ctx: ToolContext, query: str) -> str:
    """Search memory files (logs, failures, summaries, past trajectories, compacted context) for
    lines containing every word of the query; with an empty query, list the files.

    Args:
        query: words to look for.
    """
    if not query.strip():
        return "\n".join(ctx.memory.entries()) or "memory is empty"
    return "\n".join(ctx.memory.search(query)) or f"nothing in memory matches {query!r}"


def memory_read(ctx: ToolContext, path: str) -> str:
    """Read one memory file, e.g. ``dropped/compaction-1.jsonl``.

    Args:
        path: path inside memory, as memory_search or a compaction note gives it.
    """
    return ctx.memory.read(path)


def memory_note(ctx: ToolContext, text: str, name: str = "note") -> str:
    """Save a note to memory for later steps or later runs (a note of the same name gets it added
    at its end).

    Args:
        text: what to remember.
        name: a short file name.
    """
    if not text.strip():
        raise ToolError("the note is empty; give the text to remember")
    # Added to, never replaced: a second note under the default name overwrote the first.
    earlier = ctx.memory.read_note(name)
    if earlier:
        return "added to " + ctx.memory.write("notes", name, earlier.rstrip("\n") + "\n\n" + text)
    return "saved to " + ctx.memory.write("notes", name, text)
