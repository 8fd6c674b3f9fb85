"""Online learning while serving (``ratchet serve`` with ``context.online: true``).

Two halves, in two processes, sharing one file (the playbook, written atomically):

- the judge loop hands each judged turn to :class:`TurnLearner`, which turns the judgement into an
  outcome (reward +1: success, -1: failure; 0, an undecided turn, teaches nothing) and calls
  :meth:`ContextLearner.observe` with the user's request, the reply and what followed it;
- the server passes every request's messages through :func:`served_messages`, which appends the
  items chosen for the request to the system message, so the turn recorded for training is what
  the model was shown.

Both halves choose items by the same rule as every other path (token budget, and with
``relevance: encoder``, the default, the encoder's relevance and ``min_relevance``), each with its
own copy of the encoder (:func:`serve_embedder`), so the items the learner counts tags for are the
ones the server showed.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ratchet.context.budget import select
from ratchet.context.config import ContextConfig
from ratchet.context.learner import ContextLearner
from ratchet.context.operations import Add
from ratchet.context.playbook import Playbook, PlaybookError
from ratchet.context.roles import render_items
from ratchet.context.similarity import Embedder, SentenceEmbedder
from ratchet.contracts import Model
from ratchet.online.judge.rules import is_tool_output

log = logging.getLogger("ratchet.context.online")

LESSONS_HEADER = "\n\nLessons learned from earlier conversations (follow those that apply):\n"
PLAYBOOK_FILE = "context/playbook.md"
"""Where the served playbook lives under the serve run's directory unless ``context.playbook`` says."""
STEPS_SUFFIX = ".steps.jsonl"
"""Beside the playbook (``playbook.md.steps.jsonl``): one line per learning step, what it cost."""


def steps_path(playbook: Path) -> Path:
    """The file :class:`TurnLearner` writes its steps' costs to, beside ``playbook``."""
    return playbook.with_name(playbook.name + STEPS_SUFFIX)


class ServeContext(ContextConfig):
    """The playbook of ``ratchet serve`` (the ``context:`` section of its config)."""

    online: bool = False
    """Learn a playbook from judged turns and put it into every served prompt (off: neither)."""
    prompt_set: Literal["tasks", "conversation"] = "conversation"
    """Served turns are learned with the conversation prompts: lessons about how this user wants
    to be answered, their specifics kept (see :attr:`ContextConfig.prompt_set`)."""
    placement: Literal["system", "user"] = "system"
    """Where a served prompt gets its lessons (:data:`PLACEMENTS`): ``system``, the end of the
    system message; ``user``, after the last user message, in brackets (the recorded turn holds
    that prompt; sessions are still matched on the request as the client sent it)."""
    lessons: Literal["stated", "reflector"] = "stated"
    """Where a served turn's lesson comes from (:data:`LESSON_SOURCES`). ``stated``: a correction's
    lesson is what the judge read the user to ask (its hint: the instruction in the user's own
    words), filed under ``user`` as it stands, folded into an item it repeats; no reflector or
    curator call. Praised turns and corrections without a hint teach nothing. ``reflector``: the
    reflector reads every decided turn and the curator files its lesson (ACE's way). Why
    ``stated``: on five hand-written turns, under two drafts of the conversation prompts, the 1.5B
    reflector's lesson was the assistant's answer, the user's praise or the prompt's own words in 9
    of 10 and never kept "Tomasz" of "I'm Tomasz, use my name"; handed the judge's hints of five
    corrections instead, the 1.5B curator dropped two and overwrote a third with the next. The hint
    already is the instruction."""
    min_relevance: float | None = Field(None, ge=-1.0, le=1.0)
    """None here: every item may enter every served prompt within ``budget_tokens``, ranked by
    relevance to the request and by record. A served playbook holds what one user wants (a name, a
    length, a language), which holds whatever they ask about: at the task learners' 0.4, "address
    the user as Noor", learned from "call me Noor", would stay out of "What is a byte?". A number
    scopes items to related requests as for tasks."""
    playbook: Path | None = None
    """The playbook file; None: ``context/playbook.md`` under the serve run's directory."""
    model: str | None = None
    """The model that plays reflector and curator (``local:NAME``…); None: the judge's model,
    else the served model."""
    relevance: Literal["encoder", "record"] = "encoder"
    """How the items for a request are chosen. ``encoder``: as everywhere else, by relevance to the
    last user message with ``encoder`` (all-MiniLM-L6-v2, ``ratchet models pull all-minilm-l6-v2``;
    a missing pull fails at start) and no item under ``min_relevance`` enters; the learner then
    also folds repeated lessons by meaning. Its cost, measured with one thread on a loaded 2-core
    machine: about 100 MB resident in each of the two processes, 0.7 s to load, a median 33 ms to
    embed a 12-word request and 113 ms a HumanEval-sized prompt (items are cached), off the
    server's event loop, beside a generation of seconds. ``record``: no encoder, items by record
    alone within the budget and no least relevance (an item then enters every prompt it fits, the
    failure of the first HumanEval trial)."""


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


def serve_embedder(config: ServeContext) -> Embedder | None:
    """The encoder a serving process chooses items with (``relevance: encoder``), loaded now so a
    missing pull fails at start; None for ``relevance: record``."""
    return SentenceEmbedder(config.encoder).load() if config.relevance == "encoder" else None


class SystemPlacement:
    """The lessons end the system message (one is added in front when there is none)."""

    name = "system"

    def place(self, messages: list[dict[str, Any]], lessons: str) -> list[dict[str, Any]]:
        if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
            return [{**messages[0], "content": messages[0]["content"] + lessons}, *messages[1:]]
        return [{"role": "system", "content": lessons.lstrip("\n")}, *messages]


class UserPlacement:
    """The lessons follow the last user message, in brackets: the turn the model answers. A small
    model may follow an instruction there that it ignores in the system message (measured on the
    0.5B: ``docs/context.md``). Where the last message is not a person's (a tool's result, an
    assistant prefill), they go to the system message instead."""

    name = "user"

    def place(self, messages: list[dict[str, Any]], lessons: str) -> list[dict[str, Any]]:
        if not messages or messages[-1].get("role") != "user":
            return SystemPlacement().place(messages, lessons)
        last, note = messages[-1], "\n\n(" + lessons.strip() + ")"
        content = last.get("content")
        if isinstance(content, list):  # OpenAI content parts: one more text part
            content = [*content, {"type": "text", "text": note}]
        else:
            content = f"{content or ''}{note}"
        return [*messages[:-1], {**last, "content": content}]


#: Where a served prompt gets its lessons (``context.placement``), by name.
PLACEMENTS = {p.name: p for p in (SystemPlacement, UserPlacement)}


def served_messages(messages: list[dict[str, Any]], playbook: Path, config: ServeContext,
                    embedder: Embedder | None = None) -> list[dict[str, Any]]:
    """``messages`` with the playbook's items for this request placed as ``config.placement``
    says (the system message by default); unchanged when nothing is chosen. Items are chosen as
    everywhere (:func:`~ratchet.context.budget.select`): with ``embedder``, by relevance to the
    last user message and none under ``min_relevance``; without, by record alone. A playbook file
    that does not parse is logged and served without, so a bad edit never fails a request."""
    try:
        book = Playbook.load(playbook)
    except PlaybookError as exc:
        log.warning("serving without the playbook: %s", exc)
        return messages
    items = select(book, request_text(messages), config.budget_tokens, embedder=embedder,
                   record_weight=config.record_weight, min_relevance=config.min_relevance).items
    if not items:
        return messages
    return PLACEMENTS[config.placement]().place(messages, LESSONS_HEADER + render_items(items))


STATED_SECTION = "user"
"""The section a stated lesson is filed under: what this user asked for."""


class StatedLessons:
    """A person's correction the judge found a hint in teaches the hint, as they put it; nothing
    else does. A failed tool's output is not what the user wants of every later answer: its hint
    ("The tool's output was: ...") would enter every prompt, so a tool's turn teaches nothing here."""

    name = "stated"

    def lesson(self, judgement: Any) -> tuple[bool, Add | None]:
        """(learn from this turn?, the ADD of the lesson it states: None asks the reflector)."""
        hint = (judgement.hint or "").strip()
        if judgement.reward >= 0 or not hint or is_tool_output(judgement.next_state):
            return False, None
        return True, Add(STATED_SECTION, hint)


class ReflectedLessons:
    """Every decided turn goes to the reflector (ACE)."""

    name = "reflector"

    def lesson(self, judgement: Any) -> tuple[bool, Add | None]:
        return judgement.reward != 0, None


#: How a served turn becomes a lesson (``context.lessons``), by name.
LESSON_SOURCES = {s.name: s for s in (StatedLessons, ReflectedLessons)}


class TurnLearner:
    """Learns from judged turns (``__call__(turn, judgement)``, after the judge loop stored it)."""

    def __init__(self, playbook: Path, model: Model, config: ServeContext, embedder: Embedder | None = None,
                 usage: Callable[[], dict[str, Any]] | None = None) -> None:
        # The server's embedder and rule: an attempt's ``shown`` items are those chosen here now.
        self.learner = ContextLearner(playbook, reflector_model=model, config=config, embedder=embedder, name="serve")
        self.usage = usage
        """Totals of the reflector/curator's calls so far (an accountant's ``snapshot``): each step's
        line records its own calls and model seconds, the cost of learning in context."""
        self.source = LESSON_SOURCES[config.lessons]()

    def __call__(self, turn: Any, judgement: Any) -> dict[str, Any] | None:
        """One learning step for a turn that teaches something (None for one that does not: an
        undecided one, reward 0, and under ``stated`` lessons any turn but a hinted correction).
        Every decided turn leaves a line in the steps file, one that teaches nothing a line with
        ``taught: false``: a reader waiting for the learner to take a turn sees it taken."""
        learn, stated = self.source.lesson(judgement)
        if not learn:
            if judgement.reward != 0:
                self._line({"turn": turn.turn_id, "reward": judgement.reward, "taught": False, "at": time.time()})
            return None
        trace = f"Reply:\n{turn.response_text}\n\nWhat followed:\n{judgement.next_state}"
        if judgement.hint:
            trace += f"\n\nJudge's hint: {judgement.hint}"
        before, started = self._usage(), time.monotonic()
        entry: dict[str, Any] | None = None
        try:
            entry = self.learner.observe(request_text(turn.messages), trace, 1.0 if judgement.reward > 0 else 0.0,
                                         trajectory_id=turn.turn_id, stated=stated)
        finally:  # a failed step is a line too (``error``): it cost calls, and a reader waiting on steps sees it
            after = self._usage()
            # A bench or a person reads what each step cost without the judge process's memory.
            self._line({"turn": turn.turn_id, "reward": judgement.reward,
                        **({"version": entry["version"], "items": entry["items"], "tokens": entry["tokens"]}
                           if entry is not None else {"error": True}),
                        "wall_s": round(time.monotonic() - started, 3), "at": time.time(),
                        **{k: after[k] - before[k] for k in ("calls", "failed_calls", "prompt_tokens",
                                                             "completion_tokens", "model_s") if k in after and k in before}})
        return entry

    def _line(self, line: dict[str, Any]) -> None:
        path = steps_path(self.learner.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(line) + "\n")

    def _usage(self) -> dict[str, Any]:
        return self.usage() if self.usage is not None else {}


def playbook_path(context: ServeContext, run_dir: Path | None) -> Path:
    """The served playbook's file (``context.playbook``, else under the run directory)."""
    if context.playbook is not None:
        return context.playbook
    if run_dir is None:
        raise PlaybookError("context.online needs a playbook file and the judge loop has no run directory",
                            hint="set context.playbook=PATH in the serve config")
    return Path(run_dir) / PLAYBOOK_FILE
