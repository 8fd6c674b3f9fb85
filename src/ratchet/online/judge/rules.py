"""The keyword judge, and the tool-output rules every judge shares.

A next state that starts with ``tool:`` is a tool's output (how the server renders a tool message
after a tool call); every judge reads it with a :class:`~ratchet.online.judge.tools.ToolReader`
(``tools.py``). :func:`tool_vote` below, +1 unless an error word hits, is the first such reading,
kept as the word layer and a baseline. The keyword lists below are the
original rule judge: kept as a baseline and an option (``judge.kind=rule``); the default judge
(:mod:`ratchet.online.judge.classifier`) learns its verdicts instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ratchet.online.judge.hints import instruction_of
from ratchet.online.judge.tools import RuleToolReader, ToolReader
from ratchet.online.records import Judgement, Turn
from ratchet.online.sessions import SESSION_ENDED

TOOL_PREFIX = "tool:"

_POSITIVE = (
    r"\bthanks?\b", r"\bthank you\b", r"\bthx\b", r"\bperfect\b", r"\bgreat\b", r"\bawesome\b", r"\bexcellent\b",
    r"\bnice\b", r"\bexactly\b", r"\blooks good\b", r"\blgtm\b", r"\bthat works\b", r"\bit works\b",
    r"\bworked\b", r"\bcorrect\b", r"\bgood job\b", r"\bwell done\b", r"\bspot on\b", r"\bhelpful\b",
)
_NEGATIVE = (
    r"^\s*no\b", r"\bwrong\b", r"\bincorrect\b", r"\bnot what i\b", r"\bi meant\b", r"\bi said\b",
    r"\btry again\b", r"\bredo\b", r"\bretry\b", r"\bdoes ?n[o']t work\b", r"\bdid ?n[o']t work\b",
    r"\bnot working\b", r"\bstill (?:broken|wrong|fails|failing)\b", r"\binstead\b", r"\bthat'?s not\b",
    r"\bplease fix\b", r"\bfix (?:it|this)\b", r"\bshould (?:be|have)\b", r"\bdon'?t\b", r"\bstop\b",
    r"\bnot (?:right|correct|quite)\b", r"\bmistake\b", r"\bbad\b", r"\bwrong answer\b",
)

#: What a failed tool call prints: error classes, failing exit codes, shells' and tools' complaints.
_TOOL_ERROR = (
    r"\btraceback\b", r"\b\w*errors?\b", r"\bexception\b", r"\bfailed\b", r"\bfailure\b", r"\bnot found\b",
    # a dotted error class ("psycopg2.errors.UndefinedTable: ...") and a missing table or file
    r"\b\w+\.errors\.\w+", r"\bdoes not exist\b",
    r"\bexit (?:code|status):? [1-9]", r"\bpermission denied\b", r"\btimed? ?out\b", r"\bno such file\b",
    r"\bfatal:", r"\bsegmentation fault\b", r"\bkilled\b", r"\bnpm err!", r"\bdid not match\b",
    r"\bcannot\b|\bcan't\b|\bcould not\b|\bunable to\b", r"(?-i:\b[45]\d\d (?:[A-Z][a-z]+ ?)+\b)",
    r"\"(?:error|code)\":\s*(?:\"|[45]\d\d)", r"(?-i:^E\s{2,}\w)", r"\bdenied\b", r"\binvalid\b",
    # test runners' verdicts: Go's "--- FAIL" / "FAIL", TAP's "not ok", a panic, a red cross
    r"(?-i:\bFAIL\b)", r"^not ok\b", r"(?-i:^panic:)", r"(?-i:\bpanicked at\b)", r"[✗✘❌✕]",
)
#: Reports of no errors ("0 errors", "no issues found") that must not read as errors.
_TOOL_CLEAN = (
    r"\b0 (?:errors?|failed|failures?|warnings?)\b", r"\bno (?:errors?|issues|problems|failures)\b",
    r"\bfound 0 errors?\b", r"\ball checks passed\b",
    # an empty error list in JSON ("errors": [])
    r"\"errors?\":\s*(?:\[\s*\]|\{\s*\}|null|0)",
)


def _hits(patterns: Sequence[str], text: str) -> int:
    return sum(1 for p in patterns if re.search(p, text, re.IGNORECASE | re.MULTILINE))


def is_tool_output(next_state: str) -> bool:
    """Whether the next state is a tool's output (``tool: ...``) rather than a person's message."""
    return (next_state or "").lstrip().lower().startswith(TOOL_PREFIX)


def tool_vote(output: str) -> int:
    """+1 for a tool output that succeeded, -1 for one that reports an error.

    Reports of zero errors are removed before looking for error words, so "Build succeeded.
    0 warnings, 0 errors." and "Found 0 errors in 14 files" read as success.
    """
    text = output
    for pattern in _TOOL_CLEAN:
        text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    return -1 if _hits(_TOOL_ERROR, text) else 1


class RuleJudge:
    """Keyword rules on the next state. One vote per turn.

    A tool output (:func:`is_tool_output`) is read by ``tools`` (the rules' reader by default). Otherwise negative cues
    (correction, redo, "no, I meant") beat positive ones — a change request is negative feedback
    even when polite — and no cue gives 0. With ``hints`` on, a negative turn's hint comes from the
    user's own correction, so on-policy distillation has something to condition the teacher on:
    with ``hint_style="instruction"`` (the default) the instruction it states
    (:func:`instruction_of`), added to the request as if the user had said it up front; with
    ``"followup"`` the whole correction, introduced as the user's follow-up.
    """

    name = "rule"

    def __init__(self, *, hints: bool = True, hint_chars: int = 400, hint_style: str = "instruction",
                 tools: ToolReader | None = None) -> None:
        if hint_style not in ("instruction", "followup"):
            raise ValueError(f"hint_style must be 'instruction' or 'followup', not {hint_style!r}")
        self.hints = hints
        self.hint_chars = hint_chars
        self.hint_style = hint_style
        self.tools = tools or RuleToolReader()

    def vote(self, next_state: str, call: str = "") -> int:
        text = next_state or ""
        if text == SESSION_ENDED:
            return 0
        if is_tool_output(text):
            return self.tools.read(text.lstrip()[len(TOOL_PREFIX):].strip(), call).vote
        neg, pos = _hits(_NEGATIVE, text), _hits(_POSITIVE, text)
        if neg:
            return -1
        return 1 if pos else 0

    def judge(self, turn: Turn, next_state: str) -> Judgement:
        vote = self.vote(next_state, turn.response_text)
        hint = correction_hint(next_state, self.hint_style, self.hint_chars) if self.hints and vote < 0 else None
        return Judgement(turn.turn_id, vote, [vote], hint, next_state, self.name)


def correction_hint(next_state: str, style: str = "instruction", chars: int = 400) -> str | None:
    """The hint of a corrected turn: the instruction the correction states, else the whole message.

    A tool's error output is handed on whole as what the environment said; an empty next state
    gives no hint.
    """
    text = (next_state or "").strip()[:chars]
    if not text:
        return None
    if is_tool_output(text):
        return f"The tool's output was: {text[len(TOOL_PREFIX):].strip()}"
    instruction = instruction_of(text) if style == "instruction" else None
    return instruction or f"The user's follow-up was: {text}"
