"""The runtime's own middleware: small strategy objects on the four hook points of the loop.

A middleware has the workspace ``hooks.py``'s four methods (``before_model``, ``after_model``,
``before_tool``, ``after_tool``), each returning what it was given, possibly changed; raising
``ToolError`` in ``before_tool`` refuses the call (the model reads the error), raising a
``Terminating`` error ends the run. ``AgentConfig.middleware`` lists the ones an agent uses;
:class:`HookChain` wraps them inside the workspace's hooks.
"""

from __future__ import annotations

import difflib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Protocol

from ratchet.runtime.config import MiddlewareConfig, RepeatGuardConfig, SubmitOnPassConfig, UnknownToolHintConfig
from ratchet.runtime.errors import Refused, RepeatedFailure, Submitted, ToolError
from ratchet.runtime.fingerprint import TreeFingerprint
from ratchet.runtime.protocols import ToolCall


class Middleware(Protocol):
    """What the loop calls around every model call and every tool call."""

    def before_model(self, agent: Any, messages: list[Any]) -> list[Any]: ...

    def after_model(self, agent: Any, message: Any) -> Any: ...

    def before_tool(self, agent: Any, call: ToolCall) -> ToolCall: ...

    def after_tool(self, agent: Any, call: ToolCall, result: str) -> str: ...


class Passthrough:
    """A middleware that changes nothing; subclasses override the hooks they need."""

    def before_model(self, agent: Any, messages: list[Any]) -> list[Any]:
        return messages

    def after_model(self, agent: Any, message: Any) -> Any:
        return message

    def before_tool(self, agent: Any, call: ToolCall) -> ToolCall:
        return call

    def after_tool(self, agent: Any, call: ToolCall, result: str) -> str:
        return result


class HookChain:
    """Layers of middleware, outermost first: ``before_*`` hooks run in order, ``after_*`` in
    reverse, each getting what the previous one returned."""

    def __init__(self, layers: Sequence[Middleware]) -> None:
        self.layers = list(layers)

    def before_model(self, agent: Any, messages: list[Any]) -> list[Any]:
        for layer in self.layers:
            messages = layer.before_model(agent, messages)
        return messages

    def after_model(self, agent: Any, message: Any) -> Any:
        for layer in reversed(self.layers):
            message = layer.after_model(agent, message)
        return message

    def before_tool(self, agent: Any, call: ToolCall) -> ToolCall:
        for layer in self.layers:
            call = layer.before_tool(agent, call)
        return call

    def after_tool(self, agent: Any, call: ToolCall, result: str) -> str:
        for layer in reversed(self.layers):
            result = layer.after_tool(agent, call, result)
        return result


_EXIT = re.compile(r"\[exit code (-?\d+)\]\s*$")
_COMPOUND = re.compile(r"[;&|>`]|\$\(")


def command_matches(call: ToolCall, tool: str, patterns: Sequence[str]) -> bool:
    """``call`` runs ``tool`` with a single command (no shell operator) matching one of ``patterns``."""
    command = call.arguments.get("command") if call.name == tool and isinstance(call.arguments, dict) else None
    if not isinstance(command, str) or _COMPOUND.search(command):
        return False
    return any(fnmatch(command.strip(), p) for p in patterns)


def failed(result: str) -> bool:
    """A tool error (``error: ...``) or a command that exited non-zero."""
    match = _EXIT.search(result)
    return result.startswith("error:") or bool(match and match.group(1) != "0")


@dataclass
class _Seen:
    step: int
    first_line: str
    failed: bool = True
    refused: int = 0
    tree: str = ""
    """The working tree's fingerprint right after the call ran (:class:`TreeFingerprint`)."""
    changed: bool = False
    """The call succeeded and changed the files: run again on what it left, it would act on its
    own result (an edit whose new text holds its old text applies once more)."""


class RepeatGuard(Passthrough):
    """Refuse a call identical to one made while the working tree was as it is now: it would fail
    the same way, or print the same text (a `read`, a `bash ls`, a test run), so the model is
    told how it went before and to do something different; stop the run once one call has been
    refused ``stop_after`` times. One rule for every tool: whether the files changed is observed
    (a fingerprint of the working tree after each call), never guessed from the tool's name or
    the command's text. A call that changed the files is no exception: sent again while the
    files are as it left them, it would act on its own result (old ``x * 60``, new ``x * 60 * 60``
    applied at every step), not on the state the model wrote it for. ``resets_on`` tools (they
    change the tools, memory or sub-agents, not the files) forget what was seen; ``volatile``
    ones (their results change with time) are never refused. What it has seen is part of the
    agent's saved state (:meth:`state`, :meth:`restore`), so a resumed run keeps it."""

    def __init__(self, config: RepeatGuardConfig) -> None:
        self.config = config
        self.seen: dict[str, _Seen] = {}
        self._refused: str | None = None  # the key refused by before_tool, whose after_tool is no new result
        self._before: tuple[str, str] | None = None  # (key, the tree before it ran) of the call running now
        # Asked before and after every call: it re-reads only the files whose stat changed. Its
        # cache is not in state(): a resumed run reads every file once, then is cheap again.
        self.fingerprint = TreeFingerprint(config.ignore)

    @staticmethod
    def key(call: ToolCall) -> str:
        return f"{call.name} {json.dumps(call.arguments, sort_keys=True, default=str)}"

    def _tree(self, agent: Any) -> str:
        return self.fingerprint(agent.workdir)

    def _volatile(self, call: ToolCall) -> bool:
        return any(fnmatch(call.name, p) for p in self.config.volatile)

    def before_tool(self, agent: Any, call: ToolCall) -> ToolCall:
        key = self.key(call)
        if self._volatile(call):
            return call
        tree = self._tree(agent)
        self._before = (key, tree)
        seen = self.seen.get(key)
        if seen is None:
            return call
        if seen.tree != tree:  # the files changed since: it may go differently now
            del self.seen[key]
            return call
        seen.refused += 1
        shown = f"`{call.name}` with the same arguments"
        how = "failed the same way each time" if seen.failed else "gave the same result each time"
        if seen.refused >= self.config.stop_after:
            raise RepeatedFailure(f"stopped: {shown} was called {seen.refused + 1} times and {how} ({seen.first_line})")
        left = self.config.stop_after - seen.refused
        self._refused = key
        if seen.failed:
            what = f"already failed at step {seen.step} and was not run again: {seen.first_line}"
        elif seen.changed:
            what = (f"already ran at step {seen.step} and changed the files ({seen.first_line}); they are as it left "
                    "them, so it was not run again: it would act a second time on its own result. Read the "
                    "files to see them now")
        else:
            what = (f"already ran at step {seen.step} and nothing changed since, so it was not run again; "
                    f"its result is above ({seen.first_line})")
        raise Refused(f"{shown} {what}\nDo something different: change the arguments, or use another tool "
                      f"(the run stops if this call is repeated {left} more time(s)).", failed_before=seen.failed)

    def after_tool(self, agent: Any, call: ToolCall, result: str) -> str:
        key = self.key(call)
        if self._refused == key:  # the refusal above is not a new result
            self._refused = None
            return result
        if self._volatile(call):
            return result
        if not failed(result) and any(fnmatch(call.name, p) for p in self.config.resets_on):
            self.seen.clear()
            return result
        before = self._before[1] if self._before is not None and self._before[0] == key else None
        self._before = None
        tree = self._tree(agent)
        # Remembered whether or not it changed the files: what counts is the tree it left, the one a
        # repeat would run on (a failed call fails again there; an edit would edit its own result).
        changed = not failed(result) and tree != before
        if failed(result) or _EXIT.search(result):
            gist = _gist(result)
        else:
            first = next((line.strip() for line in result.splitlines() if line.strip()), "")
            gist = first[:160] if changed else f"it began: {first[:160]}"
        self.seen[key] = _Seen(agent.steps, gist, failed=failed(result), tree=tree, changed=changed)
        return result

    def state(self) -> dict[str, Any]:
        return {key: asdict(seen) for key, seen in self.seen.items()}

    def restore(self, state: dict[str, Any]) -> None:
        self.seen = {key: _Seen(**value) for key, value in (state or {}).items()}


def _gist(result: str) -> str:
    """One line saying how a call failed: the error, or the exit code and the output's last line."""
    text = result.strip()
    exit_code = _EXIT.search(text)
    if exit_code and not text.startswith("error:"):
        output = [line for line in text[:exit_code.start()].splitlines() if line.strip()]
        return f"exit code {exit_code.group(1)}" + (f", output ending: {output[-1].strip()[:200]}" if output else "")
    first = text.splitlines()[0] if text else ""
    return first.removeprefix("error: ")[:300]


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class UnknownToolHint(Passthrough):
    """A call to a tool that does not exist is answered with the tools there are and the right way:
    the function of that name in the code (run it with ``bash``), or the closest tool name."""

    def __init__(self, config: UnknownToolHintConfig) -> None:
        self.config = config

    def before_tool(self, agent: Any, call: ToolCall) -> ToolCall:
        if call.name in agent.toolbox.tools:
            return call
        offered = [t.name for t in agent.offered_tools()]
        run = self.config.run_tool
        parts = [f"there is no tool named `{call.name}`."]
        ident = bool(_IDENT.fullmatch(call.name))
        skill = self.skill_with(agent, call.name) if ident else None
        where = self.find_definition(agent, call.name) if ident and skill is None else None
        if skill is not None:
            parts.append(f"The skill `{skill}` brings it: call `load_skill` with name {skill!r} first.")
        elif where is not None:
            path, line = where
            module = path.with_suffix("").as_posix().replace("/", ".")
            given = call.arguments if isinstance(call.arguments, dict) else {}
            args = ", ".join(f"{k}={v!r}" for k, v in given.items())
            parts.append(f"`{call.name}` is defined in your code ({path.as_posix()}, line {line}); it is not a tool. "
                         f"Read it with `read`; to run code use `{run}`, e.g. command: "
                         f"python -c \"from {module} import {call.name}; print({call.name}({args}))\"")
        else:
            close = difflib.get_close_matches(call.name, offered, n=1, cutoff=0.6)
            if close:
                parts.append(f"Did you mean `{close[0]}`?")
            parts.append(f"To run a command or code use `{run}`.")
        parts.append(f"Tools: {', '.join(offered)}.")
        raise ToolError(" ".join(parts))

    @staticmethod
    def skill_with(agent: Any, name: str) -> str | None:
        """The skill whose ``skill.py`` defines tool ``name``, not loaded yet."""
        pattern = re.compile(rf"^def\s+{re.escape(name)}\s*\(", re.M)
        for skill in agent.skills.skills.values():
            code = skill.folder / "skill.py"
            if code.is_file() and pattern.search(code.read_text(errors="replace")):
                return skill.name
        return None

    def find_definition(self, agent: Any, name: str) -> tuple[Path, int] | None:
        """(path relative to the working directory, line) of ``def NAME``/``class NAME`` in a readable ``*.py``."""
        pattern = re.compile(rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b")
        workdir: Path = agent.workdir
        sources = (p for p in workdir.rglob("*.py") if ".git" not in p.relative_to(workdir).parts)
        for path in itertools.islice(sources, self.config.max_files):
            if not agent.guard.may_read(path):
                continue
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for number, text in enumerate(lines, 1):
                if pattern.match(text):
                    return path.relative_to(workdir), number
        return None


class SubmitOnPass(Passthrough):
    """After a change to the files, a test command that exits 0 and prints a passing summary ends
    the run as ``submitted`` (or, with ``then: tell``, the model is told). It judges nothing: it
    reads the result of a command the model chose to run, the way mini-swe-agent's environment
    ends a run on what a command printed, and the suite's grader still runs the tests itself.
    The step of the last change is part of the agent's saved state, so a resumed run keeps it."""

    def __init__(self, config: SubmitOnPassConfig) -> None:
        self.config = config
        self.passed = re.compile(config.passed_output, re.M)
        self.changed_at: int | None = None

    def after_tool(self, agent: Any, call: ToolCall, result: str) -> str:
        if failed(result):
            return result
        if not command_matches(call, self.config.command_tool, self.config.test_commands):
            if any(fnmatch(call.name, p) for p in self.config.changes_on):
                self.changed_at = agent.steps
            return result
        exit_code = _EXIT.search(result)  # not failed: when there is one, it is 0
        summary = self.passed.search(result[:exit_code.start()]) if exit_code else None
        if self.changed_at is None or summary is None:
            return result
        if self.config.then == "tell":
            return f"{result}\n{self.config.tell_text}"
        raise Submitted(f"the tests pass after the change at step {self.changed_at}: "
                        f"`{call.arguments['command'].strip()}` exited 0 ({summary.group(0)})")

    def state(self) -> dict[str, Any]:
        return {"changed_at": self.changed_at}

    def restore(self, state: dict[str, Any]) -> None:
        self.changed_at = (state or {}).get("changed_at")


def build_middleware(configs: Sequence[MiddlewareConfig]) -> list[Middleware]:
    """The configured middleware, in order."""
    kinds = {"repeat_guard": RepeatGuard, "unknown_tool_hint": UnknownToolHint, "submit_on_pass": SubmitOnPass}
    return [kinds[c.kind](c) for c in configs]
