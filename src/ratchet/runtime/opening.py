"""What the runtime gathers into the first user message before the model's first call.

An opening is a small strategy (``ContextConfig.opening`` lists them): it looks at the task and
the working directory and returns a section of text, or nothing. Everything goes through the
permission guard like a tool call would: an opening never shows a file the agent may not read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ratchet.runtime.config import FileTreeConfig, OpeningConfig, TaskFilesConfig, TestOutputConfig
from ratchet.runtime.errors import ToolError
from ratchet.runtime.tools import files, shell


class Opening(Protocol):
    """One section of the first user message."""

    def section(self, agent: Any, task: str) -> str: ...


def _readable_files(agent: Any) -> list[Path]:
    """The working directory's files the agent may read, relative, in walk order."""
    root: Path = agent.workdir
    return [p.relative_to(root) for p in files.walk(root) if agent.guard.may_read(p)]


class FileTree:
    """The repository's files, one path a line."""

    def __init__(self, config: FileTreeConfig) -> None:
        self.config = config

    def section(self, agent: Any, task: str) -> str:
        paths = [p.as_posix() for p in _readable_files(agent)]
        if not paths:
            return ""
        shown = paths[:self.config.max_entries]
        more = f"\n... {len(paths) - len(shown)} more" if len(paths) > len(shown) else ""
        return "Files in the repository:\n" + "\n".join(shown) + more


_PATH = re.compile(r"[\w./-]+\.[A-Za-z]\w*")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?\s*\(")


class TaskFiles:
    """The files the task points at: paths it names, files defining what it calls by name
    (``fizzbuzz(15)``, ``Stack.pop()``), then the tests importing those modules."""

    def __init__(self, config: TaskFilesConfig) -> None:
        self.config = config

    def pick(self, agent: Any, task: str) -> list[Path]:
        readable = _readable_files(agent)
        by_text = {p.as_posix(): p for p in readable}
        chosen: list[Path] = [by_text[m] for m in _PATH.findall(task) if m in by_text]
        names = {n for pair in _CALLED.findall(task) for n in pair if n}
        if names:
            pattern = re.compile(rf"^\s*(?:async\s+def|def|class)\s+(?:{'|'.join(map(re.escape, sorted(names)))})\b", re.M)
            chosen += [p for p in readable if p.suffix == ".py" and not is_test(p)
                       and pattern.search(_text(agent.workdir / p))]
        chosen = list(dict.fromkeys(chosen))
        if self.config.include_tests and chosen:
            modules = {".".join(p.with_suffix("").parts) for p in chosen if p.suffix == ".py"}
            modules |= {m.rsplit(".", 1)[-1] for m in modules}
            imports = re.compile(rf"^\s*(?:from|import)\s+(?:{'|'.join(map(re.escape, sorted(modules)))})\b", re.M)
            chosen += [p for p in readable if is_test(p) and p not in chosen and imports.search(_text(agent.workdir / p))]
        return chosen

    def section(self, agent: Any, task: str) -> str:
        parts, left, skipped = [], self.config.max_chars, []
        for rel in self.pick(agent, task):
            try:
                text = files.read(agent.ctx, rel.as_posix())
            except ToolError:
                continue
            if len(text) > left:
                skipped.append(rel.as_posix())
                continue
            left -= len(text)
            parts.append(f"==> {rel.as_posix()} <==\n{text}")
        if skipped:
            parts.append("Not shown (too long; use read): " + ", ".join(skipped))
        if not parts:
            return ""
        return ("The files this task is about, as `read` shows them (line numbers are not part of the file):\n\n"
                + "\n\n".join(parts) + f"\n\n{self.config.closing}").rstrip()


_QUOTED = re.compile(r"`([^`\n]+)`")


class TestOutput:
    """The tests' output before any change: run once, as the agent's ``bash`` would run it (the
    permission policy decides, in the sandbox), its tail shown with the exit code."""

    def __init__(self, config: TestOutputConfig) -> None:
        self.config = config

    def command(self, task: str) -> str:
        if self.config.command:
            return self.config.command
        quoted = _QUOTED.findall(task)
        return quoted[-1].strip() if quoted else ""

    def section(self, agent: Any, task: str) -> str:
        command = self.command(task)
        if not command:
            return ""
        try:
            output = shell.bash(agent.ctx, command, self.config.timeout_s)
        except ToolError as exc:  # denied or timed out: the model is told, as a tool error would
            output = f"error: {exc}"
        if len(output) > self.config.max_chars:
            output = f"[... the first {len(output) - self.config.max_chars} characters left out]\n" \
                     + output[-self.config.max_chars:]
        return f"The tests' output before any change (`{command}`):\n{output}"


def is_test(path: Path) -> bool:
    return path.name.startswith("test_") or path.name.endswith("_test.py") or "tests" in path.parts


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def build_openings(configs: Sequence[OpeningConfig]) -> list[Opening]:
    """The configured openings, in order."""
    kinds = {"file_tree": FileTree, "task_files": TaskFiles, "test_output": TestOutput}
    return [kinds[c.kind](c) for c in configs]


def opening_text(openings: Sequence[Opening], agent: Any, task: str) -> str:
    """The sections the openings give for ``task``, blank-line separated."""
    return "\n\n".join(s for s in (o.section(agent, task) for o in openings) if s)
