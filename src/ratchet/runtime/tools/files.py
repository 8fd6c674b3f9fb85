"""File-system tools: glob, grep, ls, read, read_many, write, edit, multi_edit, apply_patch.

Every path goes through the policy guard first; results are bounded so one call cannot flood the
prompt (the context policy saves anything longer to memory).
"""

from __future__ import annotations

import codecs
import difflib
import os
import re
import tempfile
import textwrap
from pathlib import Path

from ratchet.runtime.errors import ToolError
from ratchet.runtime.tools.registry import ToolContext
from ratchet.runtime.tools.shell import run_git
from ratchet.store.files import write_bytes_atomic

TOOLS = ("glob", "grep", "ls", "read", "read_many", "write", "edit", "multi_edit", "apply_patch")

_SKIP_DIRS = {".git", "__pycache__", ".venv", "node_modules", ".pytest_cache"}
_MAX_LISTING = 500


def _is_binary(head: bytes) -> bool:
    return b"\0" in head


def walk(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        out.extend(Path(dirpath) / n for n in sorted(names))
    return out


def _show(ctx: ToolContext, p: Path) -> str:
    try:
        return p.relative_to(ctx.guard.workdir).as_posix()
    except ValueError:
        return str(p)


def glob(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    """Find files whose path matches a glob pattern (``**`` crosses directories).

    Args:
        pattern: e.g. ``**/*.py`` or ``src/*.txt``.
        path: directory to search from.
    """
    root = ctx.guard.check_read(path)
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolError(f"glob pattern {pattern!r} must stay inside {path!r} (no '..', not absolute)")
    hits = sorted(p for p in root.glob(pattern)
                  if p.is_file() and not _SKIP_DIRS & set(p.parts) and ctx.guard.may_read(p))
    lines = [_show(ctx, p) for p in hits[:_MAX_LISTING]]
    more = f"\n... {len(hits) - _MAX_LISTING} more" if len(hits) > _MAX_LISTING else ""
    return ("\n".join(lines) + more) if lines else f"no files match {pattern!r}"


def grep(ctx: ToolContext, pattern: str, path: str = ".", include: str = "*", max_matches: int = 100) -> str:
    """Search file contents for a regular expression; prints ``path:line: text``.

    Args:
        pattern: Python regular expression.
        path: file or directory to search.
        include: only files whose name matches this glob, e.g. ``*.py``.
        max_matches: stop after this many matching lines.
    """
    if max_matches < 1:
        raise ToolError(f"max_matches must be 1 or more, got {max_matches}")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"bad regular expression {pattern!r}: {exc}") from exc
    root = ctx.guard.check_read(path)
    targets = [root] if root.is_file() else [p for p in walk(root) if p.match(include) and ctx.guard.may_read(p)]
    out: list[str] = []
    for p in targets:
        try:
            data = p.read_bytes()
        except OSError:
            continue
        if _is_binary(data[:8192]):
            continue
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                out.append(f"{_show(ctx, p)}:{n}: {line[:300]}")
                if len(out) >= max_matches:
                    return "\n".join(out) + f"\n... stopped at {max_matches} matches"
    return "\n".join(out) if out else f"no matches for {pattern!r}"


def ls(ctx: ToolContext, path: str = ".") -> str:
    """List a directory: one entry a line, directories end with ``/``, files show their size.

    Args:
        path: the directory.
    """
    p = ctx.guard.check_read(path)
    if not p.is_dir():
        raise ToolError(f"{path!r} is not a directory")
    rows = []
    for child in sorted(p.iterdir())[:_MAX_LISTING]:
        rows.append(f"{child.name}/" if child.is_dir() else f"{child.name}  ({child.stat().st_size} bytes)")
    return "\n".join(rows) or "(empty directory)"


def read(ctx: ToolContext, path: str, offset: int = 1, limit: int = 0) -> str:
    """Read a text file with line numbers, a window at a time.

    Args:
        path: the file.
        offset: first line to show (1-based).
        limit: most lines to show (0: the configured maximum).
    """
    # Checked before anything is shown: offset 0 or -2 printed "[lines -2-0 of 3; read again with
    # offset=1]" and a negative limit an empty window asking to be read again, which a small model follows.
    if offset < 1:
        raise ToolError(f"offset {offset}: lines are numbered from 1; use offset=1 for the start of the file")
    if limit < 0:
        raise ToolError(f"limit {limit}: give the number of lines to show, or 0 for the configured maximum")
    p = ctx.guard.check_read(path)
    if not p.is_file():
        raise ToolError(f"{path!r} is not a file" + (" (it is a directory; use ls)" if p.is_dir() else ""))
    size = p.stat().st_size
    if size == 0:
        return f"{path} is empty (0 lines)"
    with p.open("rb") as fh:
        head = fh.read(8192)
    if _is_binary(head):
        return f"{path} is a binary file ({size} bytes); not shown"
    limit = min(limit or ctx.config.max_read_lines, ctx.config.max_read_lines)
    lines: list[str] = []
    total = 0
    with p.open("r", encoding="utf-8", errors="replace") as fh:
        for total, line in enumerate(fh, 1):
            if offset <= total < offset + limit:
                lines.append(f"{total:6}\t{line.rstrip(chr(10))[:2000]}")
    if offset > max(total, 1):
        raise ToolError(f"{path!r} has {total} lines; offset {offset} is past the end")
    end = offset + len(lines) - 1
    note = f"\n[lines {offset}-{end} of {total}; read again with offset={end + 1}]" if end < total else ""
    big = f"[{path}: {size} bytes, shown in windows]\n" if size > ctx.config.max_file_kb * 1024 else ""
    return big + "\n".join(lines) + note


def read_many(ctx: ToolContext, paths: list[str]) -> str:
    """Read several text files at once (each as ``read`` would, first window only).

    Args:
        paths: the files.
    """
    parts = []
    for path in paths:
        try:
            parts.append(f"==> {path} <==\n{read(ctx, path)}")
        except ToolError as exc:
            parts.append(f"==> {path} <==\nerror: {exc}")
    return "\n\n".join(parts)


def write(ctx: ToolContext, path: str, content: str) -> str:
    """Create or overwrite a file with ``content`` (parent directories are made).

    Args:
        path: the file.
        content: its full new text.
    """
    p = ctx.guard.check_write(path)
    if p.is_dir():
        raise ToolError(f"{path!r} is a directory")
    p.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(p, content.encode())
    return f"wrote {len(content)} characters to {path}"


def _text_of(ctx: ToolContext, path: str) -> tuple[Path, str]:
    p = ctx.guard.check_write(path)
    if not p.is_file():
        raise ToolError(f"{path!r} does not exist; use write to create it")
    data = p.read_bytes()
    if _is_binary(data[:8192]):
        raise ToolError(f"{path!r} is a binary file; it cannot be edited as text")
    return p, data.decode("utf-8", errors="replace")


_NUMBERED = re.compile(r"^\s*\d+(?:\t|: |\| )")


def _unnumbered(lines: list[str]) -> list[str]:
    """``lines`` without the line numbers ``read`` prints, when every non-blank line has one (a
    line of code that merely starts with a number, among unnumbered ones, is kept as it is)."""
    if lines and all(_NUMBERED.match(line) or not line.strip() for line in lines):
        return [_NUMBERED.sub("", line, count=1) for line in lines]
    return lines


def _loose_span(text: str, old: str) -> tuple[int, int, str] | None:
    """Where ``old`` occurs once as whole lines when indentation and trailing space are ignored,
    and line numbers as ``read`` prints them are dropped: (start, end, the first line's indent).
    Small models copy ``old`` from a ``read`` with its numbers, or with the indentation off."""
    wanted = _unnumbered(old.splitlines())
    while wanted and not wanted[0].strip():
        wanted.pop(0)
    while wanted and not wanted[-1].strip():
        wanted.pop()
    if not wanted:
        return None
    lines = text.splitlines(keepends=True)
    key = [line.strip() for line in wanted]
    hits = [i for i in range(len(lines) - len(key) + 1)
            if [line.strip() for line in lines[i:i + len(key)]] == key]
    if len(hits) != 1:
        return None
    start = sum(len(line) for line in lines[:hits[0]])
    end = start + sum(len(line) for line in lines[hits[0]:hits[0] + len(key)])
    first = lines[hits[0]]
    return start, end, first[:len(first) - len(first.lstrip())]


def _reindent(new: str, indent: str) -> str:
    """``new`` (line numbers dropped as in ``_loose_span``: see ``_unnumbered``) with its common indentation replaced by
    ``indent``, each line ending in a newline."""
    body = textwrap.dedent("\n".join(_unnumbered(new.splitlines())))
    return "".join(f"{indent}{line}\n" if line.strip() else "\n" for line in body.splitlines())


def _closest(text: str, old: str, context: int = 2) -> str:
    """The file's lines most like ``old``'s first non-blank line, numbered, with
    two lines either side: what the model meant, to copy from (a small model otherwise retypes ``old`` wrong again)."""
    lines = text.splitlines()
    first = next((line.strip() for line in old.splitlines() if line.strip()), "")
    scores = [(difflib.SequenceMatcher(None, first, line.strip()).ratio(), n) for n, line in enumerate(lines)]
    best = max(scores, default=(0.0, 0))
    if best[0] < 0.5:
        return ""
    lo, hi = max(0, best[1] - context), min(len(lines), best[1] + context + 1)
    return "\nThe closest lines in the file are:\n" + "\n".join(f"{n + 1:6}\t{lines[n]}" for n in range(lo, hi))


def _replace(text: str, old: str, new: str, replace_all: bool, path: str) -> str:
    if not old:
        raise ToolError("old must not be empty")
    count = text.count(old)
    if count == 0 and not replace_all:
        span = _loose_span(text, old)
        if span is not None:
            start, end, indent = span
            return text[:start] + _reindent(new, indent) + text[end:]
    if count == 0:
        hint = " (it matches if surrounding whitespace is ignored; copy the exact text)" if old.strip() and old.strip() in text else ""
        raise ToolError(f"old text not found in {path}{hint}; copy it from `read` without the line numbers"
                        + _closest(text, old))
    if count > 1 and not replace_all:
        raise ToolError(f"old text occurs {count} times in {path}; add context to make it unique or set replace_all")
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def edit(ctx: ToolContext, path: str, old: str, new: str, replace_all: bool = False) -> str:
    """Replace exact text in a file; ``old`` must occur once unless ``replace_all``.

    Whole lines also match with other indentation, or copied from ``read`` with its line numbers.

    Args:
        path: the file.
        old: the exact text to replace.
        new: what replaces it.
        replace_all: replace every occurrence.
    """
    p, text = _text_of(ctx, path)
    changed = _replace(text, old, new, replace_all, path)
    if changed == text:  # "edited" would tell the model a fix was made
        raise ToolError(f"the edit changes nothing in {path}: new is the same text as what it replaces")
    write_bytes_atomic(p, changed.encode())
    return f"edited {path}"


def multi_edit(ctx: ToolContext, path: str, edits: list[dict]) -> str:
    """Apply several edits to one file, in order, all or none.

    Args:
        path: the file.
        edits: list of {"old": ..., "new": ..., "replace_all": false}.
    """
    p, text = _text_of(ctx, path)
    original = text
    for i, e in enumerate(edits):
        if not isinstance(e, dict) or "old" not in e or "new" not in e:
            raise ToolError(f"edit {i}: expected an object with old and new; nothing was changed")
        try:
            text = _replace(text, str(e["old"]), str(e["new"]), bool(e.get("replace_all", False)), path)
        except ToolError as exc:
            raise ToolError(f"edit {i}: {exc}; nothing was changed") from exc
    if text == original:
        raise ToolError(f"the edits change nothing in {path}: each new is the same text as what it replaces")
    write_bytes_atomic(p, text.encode())
    return f"applied {len(edits)} edits to {path}"


def _git_path(text: str) -> str:
    """A path as git writes it in a header: C-quoted (``"a\\tb"``, octal bytes) when unusual."""
    text = text.strip()
    if len(text) > 1 and text.startswith('"') and text.endswith('"'):
        return codecs.escape_decode(text[1:-1].encode())[0].decode("utf-8", errors="replace")
    return text


def _git_apply(ctx: ToolContext, patch_file: str, *args: str) -> str:
    """``git apply ARGS PATCH``; a failure names the patch PATCH, not its temporary file (the
    model would see a new random name each run, so two runs of one task would differ in it)."""
    try:
        return run_git(ctx, "apply", *args, patch_file)
    except ToolError as exc:
        raise ToolError("the patch does not apply; nothing was changed:\n" + str(exc).replace(patch_file, "PATCH")) from None


def _patch_paths(ctx: ToolContext, patch_file: str) -> tuple[list[str], list[str]]:
    """(the paths applying the patch would write, those it would only read), as git itself reads
    the patch. Not from the ``---``/``+++`` lines: git strips the first directory of those
    (``x/calc.py`` is ``calc.py``) and a rename's source has no such line, so checking the header
    text would let a patch write a protected file under another name."""
    listing = _git_apply(ctx, patch_file, "--numstat", "-z", "--recount")
    written = {rec.split("\t", 2)[2] for rec in listing.split("\0") if rec.count("\t") >= 2 and rec.split("\t", 2)[2]}
    read_only: set[str] = set()
    for line in Path(patch_file).read_text().splitlines():
        if line.startswith("rename from "):  # the source of a rename is deleted: a write
            written.add(_git_path(line[len("rename from "):]))
        elif line.startswith("copy from "):
            read_only.add(_git_path(line[len("copy from "):]))
    return sorted(written), sorted(read_only - written)


def apply_patch(ctx: ToolContext, patch: str) -> str:
    """Apply a unified diff (as ``git diff`` prints it) to the working directory, all or nothing.

    Args:
        patch: the diff text, with ``--- a/file`` / ``+++ b/file`` headers and ``@@`` hunks.
    """
    if not re.search(r"^(--- |\+\+\+ |diff --git )", patch, re.M):
        raise ToolError("no file headers (--- a/X, +++ b/X) found in the patch")
    with tempfile.NamedTemporaryFile("w", suffix=".patch", delete=False) as fh:
        fh.write(patch if patch.endswith("\n") else patch + "\n")
    try:
        paths, sources = _patch_paths(ctx, fh.name)
        for path in paths:
            ctx.guard.check_write(path)
        for path in sources:
            ctx.guard.check_read(path)
        for check in (True, False):
            _git_apply(ctx, fh.name, "--recount", "--whitespace=nowarn", *(["--check"] if check else []))
    finally:
        os.unlink(fh.name)
    return "patched " + ", ".join(paths)


