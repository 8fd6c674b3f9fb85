"""Reading a model's reply: the claim, a rewritten file, SEARCH/REPLACE blocks.

Small models format loosely: labels in bold or as bullets, ids quoted or bracketed, a JSON object
instead of lines, a block fence without a language. Every reader here is tolerant of that and
returns None (or an error text) instead of raising, so one bad reply never stops the loop.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from ratchet.contracts import Claim

#: The claim format every prompt asks for (also shown to the model by the templates).
CLAIM_FORMAT = """TARGET: <the failure this change fixes, in one line>
ROOT CAUSE: <why the current version fails there, in one line>
FLIPS: <comma-separated ids (at most 5) of the tasks you predict will go from failing to passing>"""

_LABELS = {
    "target": r"target(?:ed)?(?:\s+failure)?|failure(?:\s+targeted)?|goal",
    "root_cause": r"root[\s_-]*cause|cause|diagnosis",
    "flips": r"(?:predicted[\s_-]*)?flips?|predicted(?:\s+tasks?|\s+task\s+ids?)?|tasks?\s+to\s+flip|will\s+flip",
}
_LINE = re.compile(
    r"^[\s>*#-]*(?:\d+[.)]\s*)?[*_`]*\s*(?P<label>" + "|".join(f"(?P<{k}>{v})" for k, v in _LABELS.items())
    + r")\s*[*_`]*\s*[:=\-–]\s*[*_`]*\s*(?P<value>.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE_OPEN = re.compile(r"^[ \t]*```+[ \t]*([\w.+-]*)[^\n]*$", re.MULTILINE)
_ID_SPLIT = re.compile(r"[,;\s]+")
_ID_STRIP = "`'\"[](){}<>*.:"


def parse_claim(text: str, known_ids: Iterable[str] = ()) -> Claim | None:
    """The claim in ``text`` (labelled lines or a JSON object), or None when it states no target.

    ``known_ids`` (the task ids the model was shown or could know): when given, predicted flips
    are kept only if they name one of them (``3`` matches ``HumanEval/3``), so an invented id never
    counts against the proposer's precision as a real prediction.
    """
    fields = _claim_from_json(text) or _claim_from_lines(_outside_fences(text))
    if not fields.get("target", "").strip():
        fields = _claim_from_fenced_claim(text) or fields
    if not fields or not fields.get("target", "").strip():
        return None
    flips = _flip_ids(fields.get("flips", ""), list(known_ids))
    return Claim(target=_clean(fields["target"]), root_cause=_clean(fields.get("root_cause", "")),
                 predicted_flips=tuple(flips))


def _clean(value: str) -> str:
    return value.strip().strip("*_`").strip()[:500]


def _claim_from_lines(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _LINE.finditer(text):
        key = next(k for k in _LABELS if match.group(k))
        if key not in found:
            found[key] = match.group("value")
    return found


def _only_claim_lines(block: str) -> bool:
    """A fenced block that holds claim lines and nothing else (two labels at least: a prompt
    file may well start with "Goal: ..."), or the claim as a JSON object. Small models fence their
    claim instead of the file (the 0.5B wrote ``{"TARGET": …, "FLIPS": […]}`` as a workflow.py)."""
    if block.lstrip().startswith("{") and re.search(r'"target"\s*:', block, re.IGNORECASE) and \
            re.search(r'"(?:root[ _]cause|flips|predicted_flips)"\s*:', block, re.IGNORECASE):
        return True
    labelled = [_LINE.match(line) for line in block.splitlines() if line.strip()]
    return bool(labelled) and all(labelled) and len({next(k for k in _LABELS if m.group(k)) for m in labelled}) >= 2


def _claim_from_fenced_claim(text: str) -> dict[str, str]:
    """The claim of a reply that stated it only inside a fence holding nothing else."""
    for kind, _, body in _segments(text):
        if kind == "code" and _only_claim_lines(body):
            return _claim_from_lines(body)
    return {}


def _claim_from_json(text: str) -> dict[str, str] | None:
    for match in re.finditer(r"\{[^{}]*\}", text, re.DOTALL):
        try:
            raw = json.loads(match.group(0))
        except ValueError:
            continue
        if not isinstance(raw, dict):
            continue
        lowered = {str(k).lower().replace(" ", "_").replace("-", "_"): v for k, v in raw.items()}
        target = lowered.get("target") or lowered.get("target_failure")
        if not target:
            continue
        flips = lowered.get("predicted_flips", lowered.get("flips", ""))
        return {
            "target": str(target),
            "root_cause": str(lowered.get("root_cause", "")),
            "flips": ", ".join(map(str, flips)) if isinstance(flips, list) else str(flips),
        }
    return None


def _flip_ids(value: str, known: list[str]) -> list[str]:
    tokens = [t.strip(_ID_STRIP) for t in _ID_SPLIT.split(value)]
    out: list[str] = []
    for token in tokens:
        if not token or token.lower() in ("none", "n/a", "and", "tasks", "task"):
            continue
        if known:
            # "3" names "HumanEval/3" or "t3" (small models drop prefixes), never "t13"
            match = next((k for k in known if k == token), None) or next(
                (k for k in known if re.split(r"[/#:]", k)[-1] == token
                 or (token.isdigit() and re.search(rf"(?<!\d){token}$", k))), None)
            if match is None:
                continue
            token = match
        if token not in out:
            out.append(token)
    return out


def _outside_fences(text: str) -> str:
    """``text`` without its fenced blocks (a claim label inside code is not a claim)."""
    return "\n".join(body for kind, _, body in _segments(text) if kind == "text")


#: Block languages whose content may hold fenced blocks of its own: a Markdown prompt with its
#: worked example's ```tool calls, which the first bare fence inside would otherwise cut short.
_NESTING = {"markdown", "md"}


def _closing(text: str, start: int, nesting: bool) -> re.Match[str] | None:
    """The bare fence (backticks alone on their line) that closes the block opened before
    ``start``; in a Markdown block a fence with a language inside opens a nested block, closed by
    the next bare fence."""
    depth = 1
    for line in _FENCE_OPEN.finditer(text, start):
        if line.group(1):
            depth += 1 if nesting else 0
        elif not line.group(0).strip().strip("`"):
            depth -= 1
            if depth == 0:
                return line
    return None


def _segments(text: str, markdown: bool = False) -> list[tuple[str, str, str]]:
    """Split into ("text", "", body) and ("code", language, body) parts; an unclosed fence is
    ("open", language, body). ``markdown``: the text is about a Markdown file, so a block with no
    language may hold fenced blocks too."""
    parts: list[tuple[str, str, str]] = []
    pos = 0
    while True:
        opening = _FENCE_OPEN.search(text, pos)
        if opening is None:
            parts.append(("text", "", text[pos:]))
            return parts
        parts.append(("text", "", text[pos:opening.start()]))
        lang = opening.group(1).lower()
        closing = _closing(text, opening.end(), lang in _NESTING or (markdown and not lang))
        if closing is None:
            parts.append(("open", lang, text[opening.end() + 1:]))
            return parts
        parts.append(("code", lang, text[opening.end() + 1:closing.start()]))
        pos = closing.end()


def closed(reply: str) -> str:
    """``reply`` with its last block closed when it is left open. For a reply that ended by itself
    (not at its token limit): small models often leave the closing fence out, and the block then
    runs to the end of the reply (the 1.5B ended a new system prompt so, and the step was lost as
    "cut off")."""
    return reply + "\n```\n" if _segments(reply)[-1][0] == "open" else reply


#: What the packaged prompts put in the answer format's block where the file goes.
PLACEHOLDER = "...the whole file..."
#: How a long trace shown to the model is shortened (``base.clip``): a block that holds it is the
#: evidence copied back, not a file the model wrote.
ELIDED = "[... {} characters left out ...]"
_ELIDED = re.compile(re.escape(ELIDED).replace(re.escape("{}"), r"\d+"))
#: The placeholder as small models copy it: bracketed, quoted, its dots changed ("[...the whole file...]"),
#: or made a comment of the file's language ("# the whole file...": the 0.5B, as an AFlow workflow edit).
_PLACEHOLDER_COPY = re.compile(r"[\s.…\[\]<>(){}'\"`*_#/!-]*the whole file[\s.…\[\]<>(){}'\"`*_#/!-]*", re.IGNORECASE)

_LANGUAGES = {".py": {"python", "py", "python3"}, ".md": {"markdown", "md", "text", "txt"},
              ".yaml": {"yaml", "yml"}, ".yml": {"yaml", "yml"}, ".json": {"json"}}


@dataclass(frozen=True)
class FileReply:
    """A whole file read from a reply, or why none could be read."""

    text: str | None
    error: str | None = None


def extract_file(reply: str, path: str) -> FileReply:
    """The new full text of ``path`` from a reply: the fenced block in the file's language (else
    the longest block); for Python, an unfenced reply that parses as a module with a definition."""
    suffix = PurePosixPath(path).suffix
    segments = _segments(reply, markdown=suffix == ".md")
    every = [(lang, body) for kind, lang, body in segments if kind == "code"]
    blocks = [(lang, body) for lang, body in every if not _is_tool_call(lang, body, suffix)]
    if every and not blocks:
        return FileReply(None, f"the reply's block is a tool call, not the new text of {path}")
    wanted = _LANGUAGES.get(suffix, set())
    typed = [body for lang, body in blocks if lang in wanted]
    chosen = typed or [body for lang, body in blocks if lang in ("", *wanted)] or [b for _, b in blocks]
    if chosen:
        text = max(chosen, key=len)
        if _only_claim_lines(text):
            # taken as the file, the claim would replace the harness's text
            return FileReply(None, f"the reply's block holds only the claim lines, not the new text of {path}")
        if _PLACEHOLDER_COPY.fullmatch(text):
            # the 1.5B copied the answer format's block as it stands: the prompt became that one line
            return FileReply(None, f"the reply's block is the answer format's placeholder {PLACEHOLDER!r}, "
                                   f"not the new text of {path}")
        if _ELIDED.search(text):
            # the 1.5B pasted a failing task's trace as a HumanEval system prompt, twice in one run
            return FileReply(None, f"the reply's block holds a trace it was shown (its '{ELIDED.format('N')}' "
                                   f"mark), not the new text of {path}")
        if text.strip():
            return FileReply(text.rstrip("\n") + "\n")
    if any(kind == "open" for kind, _, _ in segments):
        return FileReply(None, "the reply's code block is never closed (the reply was probably cut off)")
    if suffix == ".py":
        body = "\n".join(line for line in reply.splitlines() if not _LINE.match(line)).strip()
        if body and re.search(r"^(def|class|import|from)\s", body, re.MULTILINE):
            try:
                ast.parse(body)
                return FileReply(body + "\n")
            except SyntaxError:
                pass
    return FileReply(None, f"the reply holds no fenced block with the new text of {path}")


def _is_tool_call(lang: str, body: str, suffix: str) -> bool:
    """A ```tool block, or (for a file that is not JSON) a block that is one JSON tool call
    (``{"name": ..., "arguments": ...}``): what a model that has just run as an agent writes."""
    if lang == "tool":
        return True
    if suffix == ".json" or not body.lstrip().startswith("{"):
        return False
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and "name" in data and "arguments" in data


# ------------------------------------------------------------------------------- SEARCH/REPLACE

_BLOCK = re.compile(
    r"^[ \t]*<{5,}[ \t]*SEARCH[^\n]*\n(?P<search>.*?)^[ \t]*={5,}[ \t]*\n(?P<replace>.*?)^[ \t]*>{5,}[ \t]*REPLACE[^\n]*$",
    re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True)
class EditBlock:
    """One SEARCH/REPLACE block (OpenEvolve's diff format)."""

    search: str
    replace: str


def parse_blocks(reply: str) -> list[EditBlock]:
    """Every complete SEARCH/REPLACE block in the reply, in order."""
    return [EditBlock(m.group("search"), m.group("replace")) for m in _BLOCK.finditer(reply)]


def apply_blocks(text: str, blocks: list[EditBlock]) -> tuple[str | None, str | None]:
    """``(new text, None)`` when every block applies, else ``(None, why the first one did not)``.

    A block applies when its SEARCH text occurs in the file exactly, or line by line once trailing
    whitespace is ignored (small models often drop or add trailing spaces); the first occurrence is
    replaced.
    """
    for number, block in enumerate(blocks, 1):
        if not block.search.strip():
            return None, f"block {number} has an empty SEARCH part"
        if block.search in text:
            text = text.replace(block.search, block.replace, 1)
            continue
        replaced = _replace_loose(text, block)
        if replaced is None:
            first = block.search.strip().splitlines()[0][:80]
            return None, f"block {number}'s SEARCH text is not in the file (it starts {first!r})"
        text = replaced
    return text, None


def _replace_loose(text: str, block: EditBlock) -> str | None:
    lines = text.splitlines(keepends=True)
    wanted = [line.rstrip() for line in block.search.splitlines()]
    while wanted and not wanted[-1]:
        wanted.pop()
    bare = [line.rstrip() for line in lines]
    for start in range(len(lines) - len(wanted) + 1):
        if bare[start:start + len(wanted)] == wanted:
            replacement = block.replace if block.replace.endswith("\n") or not block.replace else block.replace + "\n"
            return "".join(lines[:start]) + replacement + "".join(lines[start + len(wanted):])
    return None
