"""What a restart strategy's new attempt is told of the ended one (settings' ``restart``).

``fresh`` tells it nothing: the run's first messages again. ``reflect`` (Reflexion) adds, below
the first prompt, the change the ended attempt left in the files and what the check printed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

from ratchet.contracts import Message
from ratchet.runtime.config import FreshAttemptConfig, ReflectAttemptConfig


MAX_DIFFED_BYTES = 1_000_000
"""A changed file larger than this is named with its size, not diffed."""


def _same_stat(a: Path, b: Path) -> bool:
    """The start tree is copied with its files' times, so a file nobody wrote has the original's
    size and modification time: no need to read both (a repository's vendored packages)."""
    sa, sb = a.stat(), b.stat()
    return sa.st_size == sb.st_size and sa.st_mtime_ns == sb.st_mtime_ns


def tree_diff(before: Path, after: Path, skip: Callable[[str, list[str]], set[str]] | None = None) -> str:
    """A unified diff from the tree ``before`` to the tree ``after`` (paths relative to them; a file
    that is not text is named, not shown). ``skip(directory, names)`` names entries of ``after``'s
    directories that are not part of the tree (as :func:`shutil.copytree`'s ``ignore``)."""

    def files(root: Path, skipping: bool) -> dict[str, Path]:
        found: dict[str, Path] = {}
        stack = [root]
        while stack:
            directory = stack.pop()
            names = sorted(p.name for p in directory.iterdir())
            left_out = skip(str(directory), names) if (skip is not None and skipping) else set()
            for name in names:
                path = directory / name
                if name in left_out or name == ".git":
                    continue
                if path.is_dir() and not path.is_symlink():
                    stack.append(path)
                elif path.is_file():
                    found[path.relative_to(root).as_posix()] = path
        return found

    old, new = files(before, False), files(after, True)
    chunks: list[str] = []
    for rel in sorted(old.keys() | new.keys()):
        a, b = old.get(rel), new.get(rel)
        if a is not None and b is not None and (_same_stat(a, b) or a.read_bytes() == b.read_bytes()):
            continue
        size = max(p.stat().st_size for p in (a, b) if p is not None)
        if size > MAX_DIFFED_BYTES:  # difflib on a file this size takes long and shows nothing readable
            chunks.append(f"Large file {rel} changed ({size} bytes)\n")
            continue
        try:
            a_text = a.read_text() if a is not None else ""
            b_text = b.read_text() if b is not None else ""
        except UnicodeDecodeError:
            chunks.append(f"Binary file {rel} changed\n")
            continue
        chunks += difflib.unified_diff(a_text.splitlines(True), b_text.splitlines(True),
                                       f"a/{rel}" if a is not None else "/dev/null",
                                       f"b/{rel}" if b is not None else "/dev/null")
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)


def next_messages(strategy: FreshAttemptConfig, start: list[Message], diff: str, output: str) -> list[Message]:
    """The first messages of the attempt after one that left ``diff`` and made the check print
    ``output``: the run's first messages, and for ``reflect`` the note below the first prompt."""
    messages = [dict(m) for m in start]
    if not isinstance(strategy, ReflectAttemptConfig):
        return messages  # type: ignore[return-value]
    shown = diff if len(diff) <= strategy.max_diff_chars else diff[:strategy.max_diff_chars] + "\n[diff cut]"
    tail = output if len(output) <= strategy.max_output_chars else "[...]" + output[-strategy.max_output_chars:]
    note = strategy.note.format(check=strategy.check, diff=shown.rstrip("\n") or "(it changed no file)",
                                output=tail.strip() or "(nothing)")
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    messages[last]["content"] = f"{messages[last]['content']}\n\n{note}"
    return messages  # type: ignore[return-value]
