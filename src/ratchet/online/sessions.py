"""Session tagging, session inference and next-state pairing.

A request names its session with the ``X-Session-Id`` header (or a ``session_id`` body field), its
kind with ``X-Turn-Type: main|side`` (``turn_type``) and the end of a session with
``X-Session-Done: true`` (``session_done``). Body fields are removed before generation.

When a client sends no session id (stock OpenAI clients), the session is INFERRED: a chat client
resends the whole conversation each time, so the messages up to and including the last assistant
message are exactly the previous request's prompt plus the reply we served. We keep a hash of
(prompt + reply) for every served turn and look the prefix up. A request with no assistant message
opens a new session. Each inferred session is announced once in the log at INFO.

Pairing: when the next main request of a session arrives, the messages that follow our previous
reply (the user's next message, a tool's output) are that reply's next state; the judge reads it.
A session closed by ``X-Session-Done`` leaves its last turn without a next state; if the session
never produced a paired turn at all, its last main turn is paired with the marker
:data:`SESSION_ENDED` so that every session yields at least one judged turn (a judge may still
give a hint for it; the rule judge scores the marker 0).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("ratchet.online.sessions")

#: Next state given to the only main turn of a session that ended without a follow-up.
SESSION_ENDED = "(the conversation ended here without a further message)"

_TRUE = {"1", "true", "yes", "on"}
BODY_FIELDS = ("session_id", "turn_type", "session_done")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def conversation_key(messages: Sequence[Mapping[str, Any]]) -> str:
    """A stable hash of a conversation: roles and text only, surrounding whitespace ignored
    (clients re-serialize messages; they rarely keep extra fields or trailing spaces)."""
    canon = [[str(m.get("role", "")), _text(m.get("content")).strip()] for m in messages]
    return hashlib.sha256(json.dumps(canon, ensure_ascii=False).encode()).hexdigest()[:32]


def render_next_state(messages: Sequence[Mapping[str, Any]]) -> str:
    """The next state as the judge reads it: one user message as its text; a tool's output, or
    several messages, as ``role: text`` lines. A tool message always keeps its ``tool:`` prefix:
    the judge tells a tool's success or error from a person's words by it."""
    new = [m for m in messages if m.get("role") != "assistant"] or list(messages)
    if len(new) == 1 and new[0].get("role", "user") != "tool":
        return _text(new[0].get("content"))
    return "\n".join(f"{m.get('role', 'user')}: {_text(m.get('content'))}" for m in new)


@dataclass(frozen=True)
class TurnTag:
    """How one request is tagged. ``pair_with`` is (previous turn id, its next state) or None."""

    session_id: str
    inferred: bool
    turn_type: str
    done: bool
    pair_with: tuple[str, str] | None = None


@dataclass
class _Session:
    last_main_turn: str | None = None
    last_main_prompt_len: int = 0
    paired: int = 0
    announced: bool = False
    turn_ids: list[str] = field(default_factory=list)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


class SessionTracker:
    """In-memory session state of the serving process (bounded, least recently used evicted)."""

    def __init__(self, *, infer: bool = True, max_sessions: int = 10_000, default_turn_type: str = "main") -> None:
        self.infer = infer
        self.max_sessions = max_sessions
        self.default_turn_type = default_turn_type
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._by_key: OrderedDict[str, str] = OrderedDict()  # hash(prompt + reply) -> session id
        self._lock = threading.Lock()
        self.inferred_sessions = 0

    # ------------------------------------------------------------------ tagging

    @staticmethod
    def split_body(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(body without the session fields and any x_* / X-* keys, the removed fields)."""
        clean, tags = {}, {}
        for key, value in body.items():
            low = key.lower().replace("-", "_")
            if low in BODY_FIELDS:
                tags[low] = value
            elif low.startswith("x_"):
                tags[low[2:]] = value
            else:
                clean[key] = value
        return clean, tags

    def tag(self, headers: Mapping[str, str], body_tags: Mapping[str, Any], messages: list[dict[str, Any]]) -> TurnTag:
        """Decide session, turn type and done-ness of a request, and which earlier turn it pairs."""
        h = {k.lower(): v for k, v in headers.items()}
        sid = h.get("x-session-id") or body_tags.get("session_id")
        turn_type = str(h.get("x-turn-type") or body_tags.get("turn_type") or self.default_turn_type).lower()
        if turn_type not in ("main", "side"):
            turn_type = self.default_turn_type
        done = _flag(h.get("x-session-done") or body_tags.get("session_done") or False)
        inferred = False
        with self._lock:
            if not sid:
                if not self.infer:
                    return TurnTag("unknown", False, "side", done)
                sid = self._infer(messages)
                inferred = True
            session = self._touch(str(sid))
            if inferred and not session.announced:
                session.announced = True
                self.inferred_sessions += 1
                log.info("session inferred: %s (request without X-Session-Id; matched by conversation prefix)", sid)
            pair = None
            if turn_type == "main" and session.last_main_turn is not None:
                follow = self._follow_up(messages, session.last_main_prompt_len)
                if follow:
                    pair = (session.last_main_turn, render_next_state(follow))
                    session.paired += 1
                    session.last_main_turn = None
        return TurnTag(str(sid), inferred, turn_type, done, pair)

    @staticmethod
    def _follow_up(messages: list[dict[str, Any]], prev_prompt_len: int) -> list[dict[str, Any]]:
        # The conversation normally is previous prompt + our reply + new messages. If the client
        # rewrote its history, fall back to the newest non-assistant message.
        if len(messages) > prev_prompt_len + 1 and messages[prev_prompt_len].get("role") == "assistant":
            return messages[prev_prompt_len + 1 :]
        for m in reversed(messages):
            if m.get("role") in ("user", "tool"):
                return [m]
        return []

    def _infer(self, messages: list[dict[str, Any]]) -> str:
        last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        if last_assistant >= 0:
            found = self._by_key.get(conversation_key(messages[: last_assistant + 1]))
            if found is not None:
                return found
        return f"auto-{uuid.uuid4().hex[:12]}"

    def _touch(self, sid: str) -> _Session:
        session = self._sessions.get(sid)
        if session is None:
            session = self._sessions[sid] = _Session()
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(sid)
        return session

    # ------------------------------------------------------------------ after serving

    def served(self, tag: TurnTag, turn_id: str, messages: list[dict[str, Any]], reply: str) -> tuple[str, str] | None:
        """Record a served turn; returns (turn id, next state) when closing the session pairs it."""
        with self._lock:
            session = self._touch(tag.session_id)
            session.turn_ids.append(turn_id)
            key = conversation_key([*messages, {"role": "assistant", "content": reply}])
            self._by_key[key] = tag.session_id
            while len(self._by_key) > 4 * self.max_sessions:
                self._by_key.popitem(last=False)
            if tag.turn_type == "main":
                session.last_main_turn = turn_id
                session.last_main_prompt_len = len(messages)
            if not tag.done:
                return None
            # Closing: the last turn has no next state, unless the session would otherwise yield nothing.
            closing = None
            if tag.turn_type == "main" and session.paired == 0:
                closing = (turn_id, SESSION_ENDED)
            self._forget_locked(tag.session_id)
            return closing

    def forget(self, session_id: str) -> bool:
        """Drop a session from memory (privacy: ``ratchet serve forget``)."""
        with self._lock:
            return self._forget_locked(session_id)

    def _forget_locked(self, session_id: str) -> bool:
        found = self._sessions.pop(session_id, None) is not None
        for key in [k for k, s in self._by_key.items() if s == session_id]:
            del self._by_key[key]
        return found

    def __len__(self) -> int:
        return len(self._sessions)
