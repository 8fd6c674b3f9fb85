"""Online learning while serving (``ratchet serve`` with ``context.online: true``).

Two halves, in two processes, sharing one file (the playbook, written atomically):

- the judge loop hands each judged turn to :class:`TurnLearner`, which turns the judgement into an
  outcome (reward +1: success, -1: failure; 0, an undecided turn, teaches nothing) and calls
  :meth:`ContextLearner.observe` with the user's request, the reply and what followed it;
- the server passes every request's messages through :func:`served_messages`, which appends the
  items chosen for the request (token budget, record only: the serving process loads no encoder)
  to the system message, so the turn recorded for training is what the model was shown.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ratchet.context.budget import select
from ratchet.context.config import ContextConfig
from ratchet.context.learner import ContextLearner
from ratchet.context.playbook import Playbook, PlaybookError
from ratchet.context.roles import render_items
from ratchet.contracts import Model

log = logging.getLogger("ratchet.context.online")

LESSONS_HEADER = "\n\nLessons learned from earlier conversations (follow those that apply):\n"
PLAYBOOK_FILE = "context/playbook.md"
"""Where the served playbook lives under the serve run's directory unless ``context.playbook`` says."""


class ServeContext(ContextConfig):
    """The playbook of ``ratchet serve`` (the ``context:`` section of its config)."""

    online: bool = False
    """Learn a playbook from judged turns and put it into every served prompt (off: neither)."""
    playbook: Path | None = None
    """The playbook file; None: ``context/playbook.md`` under the serve run's directory."""
    model: str | None = None
    """The model that plays reflector and curator (``local:NAME``…); None: the judge's model,
    else the served model."""


def request_text(messages: Sequence[dict[str, Any]]) -> str:
    """The last user message's text: what the turn was asked (for relevance and the reflector)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # OpenAI content parts
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def served_messages(messages: list[dict[str, Any]], playbook: Path, config: ContextConfig) -> list[dict[str, Any]]:
    """``messages`` with the playbook's items for this request appended to the system message (one
    is added in front when there is none); unchanged when nothing is chosen. A playbook file that
    does not parse is logged and served without, so a bad edit never fails a request."""
    try:
        book = Playbook.load(playbook)
    except PlaybookError as exc:
        log.warning("serving without the playbook: %s", exc)
        return messages
    # No encoder here, so relevance is not measured and ``min_relevance`` cannot apply (select's rule).
    items = select(book, request_text(messages), config.budget_tokens, record_weight=config.record_weight).items
    if not items:
        return messages
    lessons = LESSONS_HEADER + render_items(items)
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        return [{**messages[0], "content": messages[0]["content"] + lessons}, *messages[1:]]
    return [{"role": "system", "content": lessons.lstrip("\n")}, *messages]


class TurnLearner:
    """Learns from judged turns (``__call__(turn, judgement)``, after the judge loop stored it)."""

    def __init__(self, playbook: Path, model: Model, config: ContextConfig) -> None:
        self.learner = ContextLearner(playbook, reflector_model=model, config=config, name="serve")

    def __call__(self, turn: Any, judgement: Any) -> dict[str, Any] | None:
        """One learning step for a decided turn (None for an undecided one, reward 0)."""
        if judgement.reward == 0:
            return None
        trace = f"Reply:\n{turn.response_text}\n\nWhat followed:\n{judgement.next_state}"
        if judgement.hint:
            trace += f"\n\nJudge's hint: {judgement.hint}"
        return self.learner.observe(request_text(turn.messages), trace, 1.0 if judgement.reward > 0 else 0.0,
                                    trajectory_id=turn.turn_id)


def playbook_path(context: ServeContext, run_dir: Path | None) -> Path:
    """The served playbook's file (``context.playbook``, else under the run directory)."""
    if context.playbook is not None:
        return context.playbook
    if run_dir is None:
        raise PlaybookError("context.online needs a playbook file and the judge loop has no run directory",
                            hint="set context.playbook=PATH in the serve config")
    return Path(run_dir) / PLAYBOOK_FILE
