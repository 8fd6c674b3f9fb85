"""A simulated user with a stable, checkable preference: measures whether learning from use learns.

Each :class:`Preference` is a behaviour the base model does not show (a fixed greeting, bullet
lists, capitals) with a programmatic checker and the sentence a person would use to ask for it.
:class:`SimulatedUser` talks like people do: praise when the reply meets the preference, a
correction that states the preference and asks again when it does not. The personalization
benchmark (``bench/online_personalization.py``) and the real-model learning test drive
``ratchet serve`` with it through the stock ``openai`` client.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ratchet.contracts import RatchetError


class Preference(Protocol):
    name: str
    #: How the user states the preference in a correction.
    instruction: str
    #: A reply in the preferred form, for the promotion gate's held-out cases.
    example: str

    def check(self, text: str) -> bool: ...


@dataclass(frozen=True)
class Greeting:
    """Every reply starts with a fixed greeting (a persona's catch phrase)."""

    word: str = "Ahoy!"
    name: str = "greeting"

    @property
    def instruction(self) -> str:
        return f"Always start your reply with the greeting '{self.word}'."

    @property
    def example(self) -> str:
        return f"{self.word} "

    def check(self, text: str) -> bool:
        return text.lstrip(" \t\n*#>\"'").lower().startswith(self.word.lower().rstrip("!"))


@dataclass(frozen=True)
class Bullets:
    """Every reply is a bullet list (at least two lines starting with ``-`` or ``*``), nothing before it."""

    name: str = "bullets"
    instruction: str = "Always answer as a bullet list: every line starts with '- ', no introduction."
    example: str = "- "

    def check(self, text: str) -> bool:
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        bullets = [line for line in lines if re.match(r"^[-*•]\s", line)]
        return len(bullets) >= 2 and bool(lines) and bool(re.match(r"^[-*•]\s", lines[0]))


@dataclass(frozen=True)
class Capitals:
    """Every reply is in capital letters (at least 90% of its letters, and at least 10 letters)."""

    name: str = "caps"
    instruction: str = "Always answer in ALL CAPITAL LETTERS."
    example: str = "SURE! "

    def check(self, text: str) -> bool:
        letters = [c for c in text if c.isalpha()]
        return len(letters) >= 10 and sum(c.isupper() for c in letters) >= 0.9 * len(letters)


PREFERENCES: dict[str, Preference] = {p.name: p for p in (Greeting(), Bullets(), Capitals())}


def preference(name: str) -> Preference:
    try:
        return PREFERENCES[name]
    except KeyError:
        raise RatchetError(f"unknown preference {name!r}", hint=f"one of: {', '.join(PREFERENCES)}") from None


#: Questions the simulated user asks while it teaches (the training side).
TRAIN_PROMPTS = [
    "What is a Python list?", "How do I reverse a string in Python?", "What does git commit do?",
    "What is a for loop?", "What is JSON?", "How do I read a file in Python?", "What is a dictionary in Python?",
    "What does HTTP stand for?", "What is a function?", "What is an integer?", "How do I install a Python package?",
    "What is a compiler?", "What is a database?", "What does CSS do?", "What is an operating system?",
    "What is a loop counter?", "What is a string?", "How do I print in Python?", "What is a boolean?",
    "What is a linked list?", "What is a web browser?", "What is an array?", "What does RAM do?",
    "What is a bug in software?", "How do I add two numbers in Python?", "What is open source?",
    "What is a text editor?", "What is a server?", "What is Linux?", "What is a unit test?",
    "What is a hash map?", "What is a byte?", "What is an IP address?", "What is a password manager?",
    "What is a spreadsheet?", "What is a URL?", "What does a CPU do?", "What is a command line?",
    "What is a file path?", "What is a keyboard shortcut?",
]
#: Questions never used in training: the preference is measured on these.
HELDOUT_PROMPTS = [
    "What is a tuple in Python?", "How do I sort a list in Python?", "What is recursion?", "What is a variable?",
    "What is an API?", "What is a class in programming?", "What is SQL?", "What is a stack?",
    "What is a queue in programming?", "What is Git?", "What is a pixel?", "What is an algorithm?",
]
#: Neutral tasks with a checkable answer (case-insensitive substring): the guard of the base's quality.
GUARD_TASKS = [
    ("What is 7 times 8? Answer with the number.", "56"), ("What is the capital of France?", "paris"),
    ("What is 15 plus 27? Answer with the number.", "42"), ("What is the capital of Japan?", "tokyo"),
    ("How many days are in a week?", "7"), ("What color is the sky on a clear day?", "blue"),
    ("What is 100 minus 1? Answer with the number.", "99"), ("What is the largest planet in the solar system?",
                                                            "jupiter"),
    ("How many legs does a spider have?", "8"), ("What is H2O commonly called?", "water"),
    ("What is 9 squared? Answer with the number.", "81"), ("Which language is spoken in Spain?", "spanish"),
]


@dataclass
class Conversation:
    """What one simulated conversation produced: replies in order and whether each met the preference."""

    prompt: str
    replies: list[str] = field(default_factory=list)
    met: list[bool] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)


class SimulatedUser:
    """Asks a question, then praises or corrects each reply according to its preference.

    A conversation: the question; if the reply misses the preference, a correction that states it
    and asks again (up to ``max_retries`` times); a closing message (praise or a last correction)
    sent with ``X-Session-Done`` so the server pairs the last reply with it.
    """

    praise = "Thanks, perfect! That's exactly how I like it."

    def __init__(self, pref: Preference, *, max_retries: int = 1) -> None:
        self.pref = pref
        self.max_retries = max_retries

    def correction(self) -> str:
        return f"No, that's not how I asked. {self.pref.instruction} Please answer again."

    def converse(self, client: Any, model: str, prompt: str, *, session: str, max_tokens: int,
                 temperature: float, seed: int) -> Conversation:
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        out = Conversation(prompt)
        for attempt in range(self.max_retries + 1):
            reply, version = self._ask(client, model, messages, session, max_tokens, temperature, seed + attempt)
            ok = self.pref.check(reply)
            out.replies.append(reply)
            out.met.append(ok)
            out.versions.append(version)
            messages.append({"role": "assistant", "content": reply})
            if ok:
                messages.append({"role": "user", "content": self.praise})
                break
            messages.append({"role": "user", "content": self.correction()})
        # The closing message: its reply is not needed (one token), it pairs the last turn.
        self._ask(client, model, messages, session, 1, 0.0, seed, done=True)
        return out

    @staticmethod
    def _ask(client: Any, model: str, messages: Sequence[dict[str, Any]], session: str, max_tokens: int,
             temperature: float, seed: int, *, done: bool = False) -> tuple[str, int]:
        headers = {"X-Session-Id": session}
        if done:
            headers["X-Session-Done"] = "true"
        response = client.chat.completions.create(model=model, messages=list(messages), max_tokens=max_tokens,
                                                  temperature=temperature, seed=seed, extra_headers=headers)
        extra = getattr(response, "model_extra", None) or {}
        version = int((extra.get("ratchet") or {}).get("policy_version", -1))
        return response.choices[0].message.content or "", version


def heldout_cases(pref: Preference, base_replies: dict[str, str]) -> list[dict[str, Any]]:
    """Preference cases for the promotion gate: held-out prompt, the base's reply in the preferred
    form (``pref.example`` + the reply) and as it is (dispreferred)."""
    return [{"messages": [{"role": "user", "content": q}], "preferred": pref.example + reply, "dispreferred": reply}
            for q, reply in base_replies.items()]


def guard_cases(base_replies: dict[str, str], pref: Preference | None = None) -> list[dict[str, Any]]:
    """Guard cases: neutral tasks with the base model's own answer as the reference.

    With ``pref`` the reference is written in the preferred form (``pref.example`` + the answer):
    the user wants the preference on every reply, neutral ones included, so a reference without it
    would measure the preference itself (measured: the greeting's first token alone moved a plain
    reference by −3.5 nats per token) instead of whether the answers are still good.
    """
    prefix = pref.example if pref is not None else ""
    return [{"messages": [{"role": "user", "content": q}], "reference": prefix + reply} for q, reply in base_replies.items()]
