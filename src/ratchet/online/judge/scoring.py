"""How well a judge hears feedback: labelled feedback sets and the scores of a judge on one.

A feedback set is JSON lines (``tests/data/feedback/README.md`` has the schema): the conversation,
the reply, the next state, who produced it (``user`` or ``tool``), the label and its reward, and
for a correction the instruction it states (the hint). :func:`score` turns a judge's verdicts on a
set into per-class precision and recall, sign errors (a correction read as +1 or praise as -1, the
worst error: it teaches the opposite) and hint agreement; :func:`run` times a judge on the set.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ratchet.contracts import RatchetError
from ratchet.online.judge.rules import TOOL_PREFIX, is_tool_output
from ratchet.online.records import Turn

LABELS = {"correction": -1, "praise": 1, "neutral": 0, "tool_ok": 1, "tool_error": -1}
SOURCES = ("user", "tool")
#: The classes the table reports: a person's three, and a tool's output with its two outcomes.
CLASS_OF = {"correction": "correction", "praise": "praise", "neutral": "neutral",
            "tool_ok": "tool", "tool_error": "tool"}


@dataclass(frozen=True)
class FeedbackRow:
    """One labelled next state."""

    id: str
    context: list[dict[str, Any]]
    reply: str
    next_state: str
    source: str
    label: str
    reward: int
    hint: str | None = None
    style: str = ""
    preference: str = ""
    lang: str = ""

    @property
    def rendered(self) -> str:
        """The next state as the judge reads it: a tool's output starts with ``tool:``."""
        return f"{TOOL_PREFIX} {self.next_state}" if self.source == "tool" else self.next_state

    @property
    def request(self) -> str:
        """What the person had asked that the reply answered (the context's last user message)."""
        from ratchet.online.judge.labels import last_request

        return last_request(self.context)

    def turn(self) -> Turn:
        return Turn(self.id, "feedback-set", False, "main", [*self.context], self.reply, [], [], [], 0)


def _row(data: Any, where: str) -> FeedbackRow:
    if not isinstance(data, dict):
        raise RatchetError(f"{where}: expected a JSON object, got {type(data).__name__}",
                           hint="one object per line, see tests/data/feedback/README.md")
    missing = [k for k in ("id", "context", "reply", "next_state", "source", "label", "reward") if k not in data]
    if missing:
        raise RatchetError(f"{where}: missing {', '.join(missing)}", hint="see tests/data/feedback/README.md")
    label, source = data["label"], data["source"]
    if label not in LABELS:
        raise RatchetError(f"{where}: label {label!r} is not one of {', '.join(LABELS)}")
    if source not in SOURCES:
        raise RatchetError(f"{where}: source {source!r} is not one of {', '.join(SOURCES)}")
    if (source == "tool") != label.startswith("tool_"):
        raise RatchetError(f"{where}: label {label!r} does not go with source {source!r}",
                           hint="tool outputs are labelled tool_ok / tool_error, people's messages the rest")
    if data["reward"] != LABELS[label]:
        raise RatchetError(f"{where}: reward {data['reward']!r} of a {label} must be {LABELS[label]}")
    if not isinstance(data["next_state"], str) or not isinstance(data["context"], list) or not data["context"]:
        raise RatchetError(f"{where}: next_state must be text and context a non-empty list of messages")
    next_state = data["next_state"]
    if source == "tool" and is_tool_output(next_state):
        # a set written with the output already rendered ("tool: ..."): the judge would read it prefixed
        # twice, and the tool reader would see "tool: HTTP/2 401" where a served output starts "HTTP/2 401"
        next_state = next_state.lstrip()[len(TOOL_PREFIX):].lstrip(" ")
    return FeedbackRow(str(data["id"]), data["context"], str(data["reply"]), next_state, source, label,
                       int(data["reward"]), data.get("hint"), str(data.get("style", "")),
                       str(data.get("preference", "")), str(data.get("lang", "")))


def load_feedback(path: str | Path) -> list[FeedbackRow]:
    """The rows of a feedback set; a malformed line is an error naming the file, the line and the fix."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RatchetError(f"cannot read the feedback set {path}: {exc.strerror or exc}") from None
    rows, seen = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RatchetError(f"{where}: not JSON ({exc.msg})", hint="one JSON object per line") from None
        row = _row(data, where)
        if row.id in seen:
            raise RatchetError(f"{where}: id {row.id!r} appears twice", hint="ids are unique within a file")
        seen.add(row.id)
        rows.append(row)
    if not rows:
        raise RatchetError(f"the feedback set {path} has no rows")
    return rows


# ---------------------------------------------------------------------------------------------
# Hints
# ---------------------------------------------------------------------------------------------


def _tokens(text: str | None) -> list[str]:
    return re.findall(r"\w+", (text or "").lower())


def hint_f1(predicted: str | None, wanted: str) -> float:
    """Word-overlap F1 of a hint and the labelled one (0 when either is empty)."""
    got, want = _tokens(predicted), _tokens(wanted)
    common = sum((Counter(got) & Counter(want)).values())
    if not common:
        return 0.0
    precision, recall = common / len(got), common / len(want)
    return 2 * precision * recall / (precision + recall)


def hint_contains(predicted: str | None, wanted: str) -> bool:
    """Whether every word of the labelled hint is in the predicted one (case and punctuation aside)."""
    want = set(_tokens(wanted))
    return bool(want) and want <= set(_tokens(predicted))


# ---------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------


@dataclass
class Verdicts:
    """A judge's reward and hint for each row of a set, and the seconds each took."""

    rewards: list[int]
    hints: list[str | None]
    seconds: list[float] = field(default_factory=list)


def run(judge: Any, rows: Sequence[FeedbackRow], progress: Callable[[str], None] | None = None) -> Verdicts:
    """Judge every row (as the server would: its turn and rendered next state), timing each."""
    out = Verdicts([], [], [])
    for number, row in enumerate(rows, 1):
        start = time.perf_counter()
        judgement = judge.judge(row.turn(), row.rendered)
        out.seconds.append(time.perf_counter() - start)
        out.rewards.append(int(judgement.reward))
        out.hints.append(judgement.hint)
        if progress:
            progress(f"  {number}/{len(rows)} {row.label} -> {judgement.reward:+d} ({out.seconds[-1]:.1f} s)")
    return out


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 3) if den else None


def score(rows: Sequence[FeedbackRow], verdicts: Verdicts) -> dict[str, Any]:
    """Precision / recall per class, sign errors, hint agreement and mean seconds of ``verdicts``.

    Sign errors (a -1 row judged +1 or a +1 row judged -1) are counted over every row, tool outputs
    included, and their rate is over every row; ``sign_errors_tool`` says how many were tool outputs.

    A person's message is heard as a correction when its reward is -1, as praise at +1, as neutral
    at 0; a tool output is right when its reward matches the label's. Hint agreement is over the
    corrections with a labelled hint that the judge heard: mean word-overlap F1, and the share whose
    predicted hint holds every word of the labelled one (``given``: how many got a hint at all).
    """
    if len(verdicts.rewards) != len(rows):
        raise ValueError(f"{len(verdicts.rewards)} verdicts for {len(rows)} rows")
    result: dict[str, Any] = {"rows": len(rows), "classes": {}}
    people = [(r, v) for r, v in zip(rows, verdicts.rewards) if r.source == "user"]
    for label, reward in (("correction", -1), ("praise", 1), ("neutral", 0)):
        gold = sum(1 for r, _ in people if r.label == label)
        said = sum(1 for _, v in people if v == reward)
        right = sum(1 for r, v in people if r.label == label and v == reward)
        result["classes"][label] = {"n": gold, "precision": _ratio(right, said), "recall": _ratio(right, gold)}
    tools = [(r, v) for r, v in zip(rows, verdicts.rewards) if r.source == "tool"]
    errors_said = sum(1 for _, v in tools if v == -1)
    errors_right = sum(1 for r, v in tools if r.label == "tool_error" and v == -1)
    result["classes"]["tool"] = {
        "n": len(tools), "accuracy": _ratio(sum(1 for r, v in tools if v == r.reward), len(tools)),
        "error_precision": _ratio(errors_right, errors_said),
        "error_recall": _ratio(errors_right, sum(1 for r, _ in tools if r.label == "tool_error")),
    }
    # over every row, tool outputs included (a failed tool call read as +1 teaches the wrong way too);
    # how many of them are tool outputs is kept apart, since every judge shares the tool rules
    signs = [r.id for r, v in zip(rows, verdicts.rewards) if r.reward * v == -1]
    result["sign_errors"] = len(signs)
    result["sign_error_rate"] = _ratio(len(signs), len(rows))
    result["sign_error_ids"] = signs
    result["sign_errors_tool"] = sum(1 for r, v in zip(rows, verdicts.rewards) if r.source == "tool" and r.reward * v == -1)
    hinted = [(r, h) for r, v, h in zip(rows, verdicts.rewards, verdicts.hints)
              if r.label == "correction" and r.hint and v == -1]
    result["hints"] = {
        "n": len(hinted),
        "given": sum(1 for _, h in hinted if h),
        "f1": round(sum(hint_f1(h, r.hint or "") for r, h in hinted) / len(hinted), 3) if hinted else None,
        "contains": _ratio(sum(1 for r, h in hinted if hint_contains(h, r.hint or "")), len(hinted)),
    }
    result["seconds_mean"] = round(sum(verdicts.seconds) / len(verdicts.seconds), 4) if verdicts.seconds else None
    return result
