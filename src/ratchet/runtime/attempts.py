"""What a restart strategy's new attempt is told of the ended one (settings' ``restart``).

Each strategy is an object built from its config (:func:`build_restart`): ``fresh`` tells it
nothing, the run's first messages again; ``reflect`` (Reflexion) adds, below the first prompt,
the change the ended attempt left in the files and what the check printed. The agent runs the
check, keeps the ended attempt and puts the files back; the strategy only says how the next
attempt begins.
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


class FreshAttempt:
    """``fresh``: the new attempt begins from the run's first messages, told nothing of the ended one."""

    told = ""
    """What the new attempt is shown of the ended one, as the run's log says it ("" for nothing)."""

    def __init__(self, config: FreshAttemptConfig) -> None:
        self.config = config

    def next_messages(self, start: list[Message], before: Path, after: Path,
                      skip: Callable[[str, list[str]], set[str]], output: str) -> list[Message]:
        """The first messages of the attempt after one that ended with the files ``after`` (those
        it found: ``before``; ``skip`` as in :func:`tree_diff`) and made the check print ``output``.
        Called before the files are put back."""
        return [dict(m) for m in start]  # type: ignore[misc]


class ReflectAttempt(FreshAttempt):
    """``reflect``: the run's first messages, with the ended attempt's diff and the check's output
    below the first prompt."""

    told = ", with the ended attempt's diff and check output"
    config: ReflectAttemptConfig

    def next_messages(self, start: list[Message], before: Path, after: Path,
                      skip: Callable[[str, list[str]], set[str]], output: str) -> list[Message]:
        messages = super().next_messages(start, before, after, skip, output)
        diff, cfg = tree_diff(before, after, skip), self.config
        shown = diff if len(diff) <= cfg.max_diff_chars else diff[:cfg.max_diff_chars] + "\n[diff cut]"
        tail = output if len(output) <= cfg.max_output_chars else "[...]" + output[-cfg.max_output_chars:]
        note = cfg.note.format(check=cfg.check, diff=shown.rstrip("\n") or "(it changed no file)",
                               output=tail.strip() or "(nothing)")
        last = max(i for i, m in enumerate(messages) if m["role"] == "user")
        messages[last]["content"] = f"{messages[last]['content']}\n\n{note}"
        return messages


def build_restart(config: FreshAttemptConfig) -> FreshAttempt:
    """The settings' ``restart`` strategy as the object that makes each later attempt's start."""
    kinds: dict[str, type[FreshAttempt]] = {"fresh": FreshAttempt, "reflect": ReflectAttempt}
    return kinds[config.kind](config)
