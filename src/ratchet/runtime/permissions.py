"""The permission policy, enforced: every check either passes or logs a denial and raises.

Denials are appended to ``denials.jsonl`` in the run directory with the rule that refused them,
and reach the model as a tool error (:class:`PermissionDenied`).
"""

from __future__ import annotations

import os
import time
from fnmatch import fnmatch
from pathlib import Path
from urllib.parse import urlparse

from ratchet.runtime.config import PermissionPolicy
from ratchet.runtime.errors import PermissionDenied
from ratchet.store import append_jsonl


class Guard:
    """Checks tool calls, paths, commands, network and sub-agent counts against a policy."""

    def __init__(self, policy: PermissionPolicy, workdir: Path, log_path: Path, *, also_readable: tuple[Path, ...] = ()):
        self.policy = policy
        self.workdir = Path(workdir).resolve()
        self.log_path = log_path
        self.also_readable = tuple(Path(p).resolve() for p in also_readable)
        self.tool_name = ""

    def deny(self, rule: str, detail: str) -> PermissionDenied:
        """Log a denial and return the exception to raise."""
        append_jsonl(self.log_path, {"at": time.time(), "tool": self.tool_name, "rule": rule, "detail": detail})
        return PermissionDenied(detail, rule=rule)

    # -- tools -------------------------------------------------------------------------------

    def _deny_or_allow(self, kind: str, text: str, what: str) -> None:
        """Refuse ``text`` if a ``denied_KIND`` pattern matches it or no ``allowed_KIND`` one does."""
        for pat in getattr(self.policy, f"denied_{kind}"):
            if fnmatch(text, pat):
                raise self.deny(f"denied_{kind}[{pat!r}]", f"{what} is refused")
        if not any(fnmatch(text, p) for p in getattr(self.policy, f"allowed_{kind}")):
            raise self.deny(f"allowed_{kind}", f"{what} matches no allowed pattern")

    def check_tool(self, name: str) -> None:
        self.tool_name = name
        self._deny_or_allow("tools", name, f"tool {name!r}")

    # -- paths -------------------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the working directory, or absolute) made absolute, links followed."""
        p = Path(os.path.expanduser(path))
        return (p if p.is_absolute() else self.workdir / p).resolve()

    def _rel(self, p: Path) -> str | None:
        try:
            return p.relative_to(self.workdir).as_posix() or "."
        except ValueError:
            return None

    def _matches(self, p: Path, patterns: list[str]) -> str | None:
        """The first pattern matching ``p`` or a directory above it (so ``.git`` covers ``.git/x``)."""
        rel = self._rel(p)
        for pat in patterns:
            if os.path.isabs(pat):
                names = [str(p)] + [str(q) for q in p.parents]
            elif rel is not None:
                names = [rel] + [q.as_posix() for q in Path(rel).parents if q.as_posix() != "."]
                if rel == ".":  # the working directory itself is always listable
                    return pat
            else:
                continue
            if any(fnmatch(name, pat) for name in names):
                return pat
        return None

    def _check_path(self, path: str, rule: str) -> Path:
        """``path`` resolved, if the ``rule`` patterns (``readable`` or ``writable``) allow it."""
        p = self.resolve(path)
        patterns = getattr(self.policy, rule)
        if self._rel(p) is None and not any(os.path.isabs(x) for x in patterns):
            raise self.deny(rule, f"{path!r} is outside the working directory")
        if self._matches(p, patterns) is None:
            raise self.deny(rule, f"{path!r} matches no {rule} pattern")
        return p

    def may_read(self, path: Path) -> bool:
        """Whether ``check_read`` would pass, without logging: for filtering search results (a
        link inside the tree that points out of it is silently left out)."""
        p = Path(path).resolve()
        if any(p == r or r in p.parents for r in self.also_readable):
            return True
        patterns = self.policy.readable
        inside = self._rel(p) is not None or any(os.path.isabs(x) for x in patterns)
        return inside and self._matches(p, patterns) is not None

    def unreadable(self) -> list[Path]:
        """The topmost paths of the working tree that the ``readable`` patterns do not allow: what
        the sandbox hides from commands. A directory that is not readable itself but holds readable
        files stays, with its unreadable entries hidden; links are left alone (what they point
        to is hidden or absent in the sandbox already)."""
        if "*" in self.policy.readable:
            return []
        hidden: list[Path] = []

        def visit(directory: Path) -> bool:  # True when something under it is readable
            found, masked = False, []
            for entry in sorted(directory.iterdir()):
                if entry.is_symlink():
                    continue
                if self.may_read(entry):
                    found = True
                elif entry.is_dir() and visit(entry):
                    found = True
                else:
                    masked.append(entry)
            if found or directory == self.workdir:
                hidden.extend(masked)
            return found

        visit(self.workdir)
        return sorted(hidden)

    def check_read(self, path: str) -> Path:
        p = self.resolve(path)
        if any(p == r or r in p.parents for r in self.also_readable):
            return p
        return self._check_path(path, "readable")

    def check_write(self, path: str) -> Path:
        hit = self._matches(self.resolve(path), self.policy.protected)
        if hit is not None:
            raise self.deny(f"protected[{hit!r}]", f"{path!r} is protected")
        return self._check_path(path, "writable")

    # -- commands, network, sub-agents -------------------------------------------------------

    def check_command(self, command: str) -> None:
        text = command.strip()
        self._deny_or_allow("commands", text, f"command {text[:200]!r}")

    def check_network(self, url: str) -> None:
        if not self.policy.network:
            raise self.deny("network", f"network is off; cannot reach {urlparse(url).netloc or url!r}")

    def check_subagent(self, running: int, depth: int) -> None:
        if depth >= self.policy.max_subagent_depth:
            raise self.deny("max_subagent_depth", f"an agent at depth {depth} may not spawn sub-agents "
                            f"(limit {self.policy.max_subagent_depth})")
        if running >= self.policy.max_subagents:
            raise self.deny("max_subagents", f"{running} sub-agents are running already "
                            f"(limit {self.policy.max_subagents}); wait for or close one")
