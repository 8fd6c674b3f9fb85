"""Shell and version-control tools: bash (in the sandbox), git_status, git_diff, git_commit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ratchet.runtime.errors import ToolError
from ratchet.runtime.tools.registry import SHOWN_WORKDIR, ToolContext

TOOLS = ("bash", "git_status", "git_diff", "git_commit")


def bash(ctx: ToolContext, command: str, timeout_s: float = 0) -> str:
    """Run a bash command in the working directory, in a sandbox (no network unless the policy
    allows it). Output is stdout and stderr together, its tail kept when long.

    Args:
        command: the command line.
        timeout_s: seconds before it is killed (0: the configured default; capped by it).
    """
    ctx.guard.check_command(command)
    limit = ctx.config.bash_timeout_s
    timeout = min(timeout_s, limit) if timeout_s and timeout_s > 0 else limit
    result = ctx.extra["shell"].run(command, timeout, ctx.config.bash_output_kb * 1024)
    head = ""
    if result["truncated"]:
        head = f"[output was {result['total_chars']} characters; showing the last {len(result['output'])}]\n"
    shown = printable(as_shown(result["output"], ctx.workdir))
    if result["timed_out"]:
        raise ToolError(f"command timed out after {timeout:g} s and was killed\n{head}{shown}")
    return f"{head}{shown}\n[exit code {result['returncode']}]"


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def printable(text: str) -> str:
    """``text`` with control bytes (NUL, escape sequences…) written as ``\\xNN``: ``read`` never shows
    a binary file, and a command that prints one (``cat blob.bin``) must not put raw NULs and
    terminal codes into the prompt either. Tabs and newlines stay."""
    if not _CONTROL.search(text):
        return text
    return "[the output holds control bytes, shown as \\xNN]\n" + _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def as_shown(text: str, workdir: Path) -> str:
    """``text`` with the working directory's real path written as the model knows it: relative
    paths below it, ``.`` for itself (``pwd``, a traceback's file names). The real path is unique
    per run; output naming it would differ between two runs of one task."""
    real = str(Path(workdir).resolve())
    return text.replace(real + "/", "").replace(real, SHOWN_WORKDIR)


def run_git(ctx: ToolContext, *args: str) -> str:
    """``git ARGS`` in the working directory; a failure is a ToolError with git's message."""
    # The sandbox hands the tree to its own uid; git would then refuse the repository as unsafe.
    cmd = ["git", "-c", "safe.directory=*", "-c", "user.name=ratchet-agent", "-c", "user.email=agent@ratchet.local",
           *args]
    try:
        proc = subprocess.run(cmd, cwd=ctx.guard.workdir, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError(f"git {' '.join(args)} failed: {exc}") from exc
    if proc.returncode != 0:
        raise ToolError(f"git {' '.join(args)} failed: {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


def _in_repository(ctx: ToolContext, tool: str) -> None:
    """Refuse ``tool`` outside a git work tree: there ``git diff`` prints its usage text (which
    then reached the model as the tool's error) and the others fail with a fatal message."""
    try:
        run_git(ctx, "rev-parse", "--is-inside-work-tree")
    except ToolError:
        raise ToolError(f"{tool}: the working directory is not a git repository") from None


def git_status(ctx: ToolContext) -> str:
    """Show changed, staged and untracked files (``git status --short``)."""
    _in_repository(ctx, "git_status")
    return run_git(ctx, "status", "--short", "--branch") or "clean"


def git_diff(ctx: ToolContext, path: str = "", staged: bool = False) -> str:
    """Show the diff of the working tree (or of staged changes).

    Args:
        path: limit to this path.
        staged: show what is staged instead.
    """
    _in_repository(ctx, "git_diff")
    args = ["diff"] + (["--cached"] if staged else [])
    if path:
        ctx.guard.check_read(path)
        args += ["--", path]
    out = run_git(ctx, *args)
    return out[:ctx.config.bash_output_kb * 1024] or "no changes"


def git_commit(ctx: ToolContext, message: str, paths: list[str] | None = None) -> str:
    """Stage ``paths`` (default: every change) and commit them.

    Args:
        message: the commit message.
        paths: files to commit; all changes when empty.
    """
    if not message.strip():
        raise ToolError("the commit message is empty")
    for path in paths or []:
        ctx.guard.check_write(path)
    _in_repository(ctx, "git_commit")
    run_git(ctx, "add", "--", *(paths or ["."]))
    run_git(ctx, "commit", "-q", "-m", message)
    return run_git(ctx, "log", "-1", "--oneline").strip()
