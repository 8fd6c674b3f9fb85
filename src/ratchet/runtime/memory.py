"""File-system memory and the context policy.

Memory is a directory of plain files the agent can search and read back: ``logs/``, ``failures/``,
``summaries/``, ``trajectories/``, ``outputs/`` (long tool results) and ``dropped/`` (what
compaction took out of the prompt). A context policy decides what of the conversation enters the
prompt; whatever it drops is written to ``dropped/`` first and replaced by a pointer to that file.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


from ratchet.contracts import ContextWindow, Message
from ratchet.models.request import context_window, estimate_tokens
from ratchet.runtime.config import ContextConfig
from ratchet.runtime.errors import ToolError
from ratchet.store.files import write_bytes_atomic

KINDS = ("logs", "failures", "summaries", "trajectories", "outputs", "dropped", "notes")


class FileMemory:
    """Plain files under ``root``; every path handed out is relative to it and readable back."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def write(self, kind: str, name: str, text: str) -> str:
        """Write ``text`` to ``kind/name``; returns the path relative to the memory root."""
        if kind not in KINDS:
            raise ToolError(f"unknown memory kind {kind!r}; use one of {', '.join(KINDS)}")
        safe = self._safe(name)
        path = self.root / kind / safe
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, text.encode())
        return f"{kind}/{safe}"

    def read_note(self, name: str) -> str:
        """The note saved under ``name`` (as ``write`` names it), or "" when there is none."""
        path = self.root / "notes" / self._safe(name)
        return path.read_text(errors="replace") if path.is_file() else ""

    @staticmethod
    def _safe(name: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "entry"

    def path(self, rel: str) -> Path:
        p = (self.root / rel).resolve()
        if self.root.resolve() not in p.parents:
            raise ToolError(f"{rel!r} is not inside memory; paths look like dropped/compaction-1.jsonl")
        return p

    def read(self, rel: str, max_chars: int = 20000) -> str:
        p = self.path(rel)
        if not p.is_file():
            raise ToolError(f"no memory file {rel!r}; memory_search lists what exists")
        text = p.read_text(errors="replace")
        return text if len(text) <= max_chars else text[:max_chars] + f"\n[... {len(text) - max_chars} more characters]"

    def entries(self, kind: str | None = None) -> list[str]:
        base = self.root / kind if kind else self.root
        return sorted(p.relative_to(self.root).as_posix() for p in base.rglob("*") if p.is_file()) if base.exists() else []

    def search(self, query: str, max_hits: int = 50) -> list[str]:
        """``path:line: text`` for each line containing every word of ``query`` (case-insensitive)."""
        words = [w.lower() for w in query.split()]
        hits: list[str] = []
        for rel in self.entries():
            for n, line in enumerate((self.root / rel).read_text(errors="replace").splitlines(), 1):
                low = line.lower()
                if all(w in low for w in words):
                    hits.append(f"{rel}:{n}: {line[:240]}")
                    if len(hits) >= max_hits:
                        return hits
        return hits


def message_tokens(messages: list[Message]) -> int:
    return sum(estimate_tokens(str(m.get("content") or "")) + 4 for m in messages)


class KeepAll:
    """Every message enters the prompt; nothing is ever dropped."""

    name = "keep_all"

    def __init__(self, config: ContextConfig, memory: FileMemory, window: ContextWindow | None = None,
                 reply_tokens: int = 0) -> None:
        self.config, self.memory = config, memory
        # A model that knows its window (an embedded model's n_ctx) counts with its own tokenizer,
        # and the prompt must leave room for the reply: 6000 estimated tokens do not fit in 4096.
        self.limit = config.max_prompt_tokens if window is None else min(
            config.max_prompt_tokens, window.context_tokens - reply_tokens - 16)
        self.count: Callable[[list[Message]], int] = message_tokens if window is None else window.count_tokens

    def compact(self, messages: list[Message]) -> list[Message]:
        return messages


class CompactOldest(KeepAll):
    """Past ``max_prompt_tokens``, the oldest turns (after the system prompt and the task) move to
    ``dropped/compaction-N.jsonl`` and one message in their place says what and where. The last
    ``keep_last`` messages stay, unless they alone pass the limit (a large opening and two long
    results can, in a 4096-token window): then older ones of them go too, down to the last."""

    name = "compact_oldest"

    def compact(self, messages: list[Message]) -> list[Message]:
        head = messages[:2]
        if self.count(messages) <= self.limit or len(messages) <= len(head) + 1:
            return messages
        # The kept tail never starts on a tool result whose call would be dropped (native protocol).
        starts = [i for i in range(max(len(head), len(messages) - self.config.keep_last), len(messages))
                  if messages[i].get("role") != "tool"]
        if not starts:
            return messages
        number = len(self.memory.entries("dropped")) + 1
        rel = f"dropped/compaction-{number}.jsonl"
        stamp = time.strftime("%H:%M:%S")

        def note(cut: int) -> Message:  # sized as sent: its list of the dropped calls' tools can be long
            dropped = messages[len(head):cut]
            calls = [c for m in dropped for c in _tool_names(m)]
            return {"role": "user", "content": (
                f"[context compacted at {stamp}: {len(dropped)} earlier messages ({message_tokens(dropped)} tokens) "
                f"were moved to memory file {rel}; read them back with memory_read(path={rel!r}). Tools used in "
                f"them: {', '.join(calls) or 'none'}]")}

        cut = next((i for i in starts if self.count(head + [note(i)] + messages[i:]) <= self.limit), starts[-1])
        if cut <= len(head):
            return messages
        self.memory.write("dropped", rel.removeprefix("dropped/"),
                          "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages[len(head):cut]))
        return head + [note(cut)] + messages[cut:]


def _tool_names(message: Message) -> list[str]:
    names = [c.get("function", {}).get("name", "?") for c in message.get("tool_calls", []) or []]  # type: ignore[union-attr]
    names += re.findall(r'"name"\s*:\s*"([\w.-]+)"', str(message.get("content") or "")) if message.get("role") == "assistant" else []
    return names


POLICIES: dict[str, type[KeepAll]] = {"keep_all": KeepAll, "compact_oldest": CompactOldest}


def context_policy(config: ContextConfig, memory: FileMemory, model: Any = None, reply_tokens: int = 0) -> KeepAll:
    """The configured policy; for a ``model`` that knows its context window, fitted to it."""
    return POLICIES[config.strategy](config, memory, context_window(model), reply_tokens)


def bound_output(text: str, config: ContextConfig, memory: FileMemory, name: str) -> str:
    """A tool result short enough for the prompt: past the limit, the whole text goes to
    ``outputs/`` and the prompt gets its head plus the path."""
    limit = config.max_tool_output_chars
    if len(text) <= limit:
        return text
    rel = memory.write("outputs", f"{name}-{time.time_ns()}.txt", text)
    return (text[: limit - 200] + f"\n[... {len(text) - limit + 200} more characters; the whole output is in "
            f"memory file {rel}: memory_read(path={rel!r})]")


def recall(memory: FileMemory, limit: int = 8) -> str:
    """A short listing of earlier summaries and failures, for the first prompt."""
    rows = (memory.entries("summaries") + memory.entries("failures"))[-limit:]
    return "" if not rows else "Memory from earlier runs (memory_read to open):\n" + "\n".join(f"- {r}" for r in rows)


