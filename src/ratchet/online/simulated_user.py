"""A simulated user with a stable, checkable preference: measures whether learning from use learns.

Each :class:`Preference` is a behaviour the base model does not show (one-sentence answers, a
sign-off, German, the user's name, a numbered list, a fixed greeting, bullets, capitals) with a
programmatic checker and a rewrite of a reply into the preferred form (for the promotion gate's
cases). :class:`SimulatedUser` talks the way people do: when a reply meets the preference it praises
it, when it does not it corrects it and asks again — each message drawn, seeded, from a pool of
many phrasings (``data/simulated_user.yaml``), most of them without the words a keyword judge looks
for. The personalization benchmark (``bench/online_personalization.py``) and the real-model learning
test drive ``ratchet serve`` with it through the stock ``openai`` client.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ratchet.contracts import RatchetError

POOLS_PATH = Path(__file__).resolve().parent / "data" / "simulated_user.yaml"


class Preference(Protocol):
    name: str
    #: How the preference is stated as an instruction (the canonical hint).
    instruction: str
    #: The preferred form's characteristic text: its opening where it has one (``"Ahoy! "``,
    #: ``"1. "``), else its mark (the sign-off).
    example: str

    def check(self, text: str) -> bool: ...

    def rewrite(self, prompt: str, reply: str) -> str:
        """``reply`` (to ``prompt``) in the preferred form, as well as a program can write it (for
        greeting, bullets and caps: the opening prepended, the form their results were measured with)."""
        ...


# ---------------------------------------------------------------------------------------------
# Text pieces the checkers share
# ---------------------------------------------------------------------------------------------

#: A sentence ends at . ! ? (closing quotes/brackets allowed) followed by space and a new sentence's
#: start; "e.g. the" or "list.sort()" do not end one.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”’)\]*]*\s+(?=[\"'“(*]*[A-Z0-9])")
#: Decoration a reply may close with after its last sentence: spaces, quotes, brackets, markdown,
#: emoji and other symbols.
_TRAILING = re.compile(r"[\s\"'”’)\]*_~`\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F]+$")


def _sentences(text: str) -> list[str]:
    """The sentences of a reply's prose, code blocks dropped, one line's list markers removed."""
    prose = re.sub(r"```.*?(```|$)", " ", text, flags=re.S)
    out: list[str] = []
    for line in prose.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)]|#+)\s+", "", line).strip()
        out += [s.strip() for s in _BOUNDARY.split(line) if s.strip()]
    return out


def _as_items(prompt: str, reply: str) -> list[str]:
    """A reply cut into list items: its sentences; a single sentence is split at its first comma."""
    items = [s.rstrip(":") for s in _sentences(reply)]
    if len(items) == 1 and ", " in items[0]:
        head, tail = items[0].split(", ", 1)
        items = [head, tail[:1].upper() + tail[1:]]
    if len(items) < 2:
        # One clause: the second item is a pointer to more, the form is what the gate scores.
        items = (items or [prompt.rstrip("?")]) + ["Ask if you want more detail."]
    return items


# ---------------------------------------------------------------------------------------------
# Preferences
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OneSentence:
    """Every reply is one complete sentence: one line, ends with . or !, at most ``max_words`` words.

    A question is no answer: the 0.5B often replies to a question with a rephrased question ("Can
    you explain how to create a tuple in Python?"), which a checker that took ``?`` counted as a
    one-sentence answer (the base's held-out 4/12 were all such echoes).
    """

    max_words: int = 30
    name: str = "length"
    instruction: str = "Answer in one short sentence."
    example: str = ""

    def check(self, text: str) -> bool:
        body = _TRAILING.sub("", text.strip())
        if not body or "\n" in body or "```" in body or body[-1] not in ".!":
            return False
        return len(body.split()) <= self.max_words and not _BOUNDARY.search(body)

    def rewrite(self, prompt: str, reply: str) -> str:
        first = (_sentences(reply) or [prompt])[0].rstrip(":;, ")
        words = first.split()[: self.max_words]
        text = " ".join(words).rstrip(".!?:;, ")
        return text + "."


@dataclass(frozen=True)
class SignOff:
    """Every reply ends with a fixed sign-off (after at least a few words of answer)."""

    phrase: str = "Happy coding!"
    name: str = "signoff"

    @property
    def instruction(self) -> str:
        return f"End every reply with '{self.phrase}'."

    @property
    def example(self) -> str:
        return self.phrase

    def check(self, text: str) -> bool:
        core = re.escape(self.phrase.rstrip("!.").lower())
        body = text.strip().lower()
        match = re.search(rf"{core}\W*$", body)
        return match is not None and len(body[: match.start()].split()) >= 3

    def rewrite(self, prompt: str, reply: str) -> str:
        return f"{reply.rstrip()}\n\n{self.phrase}"


#: Function words that are (nearly) only German or only English; "in", "an", "so", "was" are both.
_GERMAN = frozenset("der die das den dem des und ist sind ein eine einen einem einer nicht mit zu von für "
                    "auf es sie wird werden auch oder wie man du ich wir kann können bei aus nach sich zum "
                    "zur im ihr als wenn dass über hat haben diese dieser dieses oft sehr".split())
_ENGLISH = frozenset("the is are a and of to it that for with this you can be on as by or from which what "
                     "has have will your its".split())


@dataclass(frozen=True)
class Language:
    """Every reply is in German: German function words at least two and twice the English ones.

    The preferred form of a reply cannot be written by a program (a translation), so the gate's
    replies come from ``answers`` (prompt → German reply, hand-written in the pools file).
    """

    name: str = "german"
    instruction: str = "Always answer in German."
    example: str = "Gerne! "
    answers: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    def check(self, text: str) -> bool:
        words = re.findall(r"[a-zäöüß]+", re.sub(r"```.*?(```|$)|`[^`]*`", " ", text.lower(), flags=re.S))
        german = sum(w in _GERMAN for w in words)
        english = sum(w in _ENGLISH for w in words)
        return german >= 2 and german >= 2 * english

    def rewrite(self, prompt: str, reply: str) -> str:
        try:
            return self.answers[prompt]
        except KeyError:
            raise RatchetError(f"no German reply for the prompt {prompt!r}",
                               hint=f"add it under preferences.{self.name}.answers in {POOLS_PATH}") from None


@dataclass(frozen=True)
class Name:
    """Every reply addresses the user by name (the base model never does: it is not told the name)."""

    name_of_user: str = "Noor"
    name: str = "name"

    @property
    def instruction(self) -> str:
        return f"Call me by my name, {self.name_of_user}."

    @property
    def example(self) -> str:
        return f"Sure, {self.name_of_user}! "

    def check(self, text: str) -> bool:
        return re.search(rf"\b{re.escape(self.name_of_user)}\b", text, re.I) is not None

    def rewrite(self, prompt: str, reply: str) -> str:
        return self.example + reply.lstrip()


@dataclass(frozen=True)
class Numbered:
    """Every reply is a numbered list (at least two lines ``1.``/``1)``, ``2.`` …), nothing before it."""

    name: str = "numbered"
    instruction: str = "Always answer as a numbered list starting with '1.', no introduction."
    example: str = "1. "

    def check(self, text: str) -> bool:
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        items = [line for line in lines if re.match(r"^\d+[.)]\s", line)]
        return len(items) >= 2 and bool(re.match(r"^1[.)]\s", lines[0]))

    def rewrite(self, prompt: str, reply: str) -> str:
        return "\n".join(f"{i}. {item}" for i, item in enumerate(_as_items(prompt, reply), 1))


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

    def rewrite(self, prompt: str, reply: str) -> str:
        return self.example + reply


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

    def rewrite(self, prompt: str, reply: str) -> str:
        # The opening alone, as the gate has scored it since the first bullets runs (their results
        # and the real-model test were measured with it); the margin is decided by that token.
        return self.example + reply


@dataclass(frozen=True)
class Capitals:
    """Every reply is in capital letters (at least 90% of its letters, and at least 10 letters)."""

    name: str = "caps"
    instruction: str = "Always answer in ALL CAPITAL LETTERS."
    example: str = "SURE! "

    def check(self, text: str) -> bool:
        letters = [c for c in text if c.isalpha()]
        return len(letters) >= 10 and sum(c.isupper() for c in letters) >= 0.9 * len(letters)

    def rewrite(self, prompt: str, reply: str) -> str:
        return self.example + reply  # the opening alone, as for Bullets


# ---------------------------------------------------------------------------------------------
# The pools file
# ---------------------------------------------------------------------------------------------


class _Examples(BaseModel):
    model_config = ConfigDict(extra="forbid")
    accept: list[str] = Field(min_length=1)
    """Replies the checker must accept."""
    reject: list[str] = Field(min_length=1)
    """Base-like replies the checker must reject."""


class _PreferencePools(BaseModel):
    model_config = ConfigDict(extra="forbid")
    params: dict[str, Any] = {}
    """Keyword arguments of the preference's checker class (the name, the sign-off, ...)."""
    corrections: list[str] = Field(min_length=8)
    """What the user says when a reply misses the preference."""
    praise: list[str] = Field(min_length=3)
    """What the user says when a reply meets it (drawn together with ``praise_common``)."""
    train_prompts: list[str] | None = None
    """Questions asked while the user teaches (default: ``prompts.train``)."""
    heldout_prompts: list[str] | None = None
    """Questions the preference is measured on (default: ``prompts.heldout``); none states it."""
    answers: dict[str, str] = {}
    """Replies in the preferred form a program cannot write (a translation), by prompt."""
    examples: _Examples
    """Replies the checker must accept and reject (the tests hold it to them)."""


class _Prompts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    train: list[str] = Field(min_length=12)
    """Questions asked while the user teaches; the benchmark's gate takes the last six."""
    heldout: list[str] = Field(min_length=6)
    """Questions never asked in training: the preference is measured on these."""


class _PoolsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int = 1
    """Format version of the file."""
    prompts: _Prompts
    """The default training and held-out questions."""
    guard_tasks: list[tuple[str, str]] = Field(min_length=6)
    """Neutral tasks with their answer (case-insensitive substring of a correct reply)."""
    praise_common: list[str] = Field(min_length=5)
    """Praise that fits any preference."""
    preferences: dict[str, _PreferencePools]
    """Per preference (by name), its pools."""


#: The checker class of each preference name in the pools file.
CHECKERS: dict[str, type] = {"length": OneSentence, "signoff": SignOff, "german": Language, "name": Name,
                             "numbered": Numbered, "greeting": Greeting, "bullets": Bullets, "caps": Capitals}


@functools.cache
def _pools_file(path: Path = POOLS_PATH) -> _PoolsFile:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        pools = _PoolsFile.model_validate(data)
    except (OSError, yaml.YAMLError) as e:
        raise RatchetError(f"cannot read the simulated user's pools {path}: {e}",
                           hint="restore the file from the package") from None
    except ValidationError as e:
        raise RatchetError(f"bad simulated user's pools in {path}:\n{e}",
                           hint="fix the named key; the header of the file describes each") from None
    unknown = set(pools.preferences) - set(CHECKERS)
    if unknown:
        raise RatchetError(f"{path}: no checker for the preferences {sorted(unknown)}",
                           hint=f"name one of: {', '.join(CHECKERS)}")
    return pools


@dataclass(frozen=True)
class Pools:
    """What the simulated user with one preference says and asks."""

    corrections: tuple[str, ...]
    praise: tuple[str, ...]
    train_prompts: tuple[str, ...]
    heldout_prompts: tuple[str, ...]
    accept: tuple[str, ...]
    reject: tuple[str, ...]


def pools(name: str) -> Pools:
    """The phrasing pools and prompts of the preference ``name``."""
    file = _pools_file()
    if name not in file.preferences:
        raise RatchetError(f"unknown preference {name!r}", hint=f"one of: {', '.join(file.preferences)}")
    p = file.preferences[name]
    return Pools(tuple(p.corrections), tuple(p.praise + file.praise_common),
                 tuple(p.train_prompts or file.prompts.train),
                 tuple(p.heldout_prompts or file.prompts.heldout),
                 tuple(p.examples.accept), tuple(p.examples.reject))


def _build(name: str) -> Preference:
    p = _pools_file().preferences[name]
    params = dict(p.params)
    if p.answers:
        params["answers"] = dict(p.answers)
    try:
        return CHECKERS[name](**params)
    except TypeError as e:
        raise RatchetError(f"{POOLS_PATH}: bad params for the preference {name!r}: {e}",
                           hint="params are the keyword arguments of its checker class") from None


PREFERENCES: dict[str, Preference] = {name: _build(name) for name in _pools_file().preferences}


def preference(name: str) -> Preference:
    try:
        return PREFERENCES[name]
    except KeyError:
        raise RatchetError(f"unknown preference {name!r}", hint=f"one of: {', '.join(PREFERENCES)}") from None


#: Questions the simulated user asks while it teaches (the default training side).
TRAIN_PROMPTS: list[str] = list(_pools_file().prompts.train)
#: Questions never used in training: the preference is measured on these (the default held-out side).
HELDOUT_PROMPTS: list[str] = list(_pools_file().prompts.heldout)
#: Neutral tasks with a checkable answer (case-insensitive substring): the guard of the base's quality.
GUARD_TASKS: list[tuple[str, str]] = [tuple(t) for t in _pools_file().guard_tasks]  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# The user
# ---------------------------------------------------------------------------------------------


@dataclass
class Conversation:
    """What one simulated conversation produced: replies in order, whether each met the preference,
    and what the user said after each."""

    prompt: str
    replies: list[str] = field(default_factory=list)
    met: list[bool] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    said: list[str] = field(default_factory=list)


class SimulatedUser:
    """Asks a question, then praises or corrects each reply according to its preference.

    A conversation: the question; if the reply misses the preference, a correction (drawn from the
    pool) and the reply again (up to ``max_retries`` times); a closing message (praise or a last
    correction) sent with ``X-Session-Done`` so the server pairs the last reply with it. Every draw
    is seeded by ``seed`` and the conversation's own seed, so a resumed run says the same things.
    """

    def __init__(self, pref: Preference, *, max_retries: int = 1, seed: int = 0,
                 pool: Pools | None = None) -> None:
        self.pref = pref
        self.max_retries = max_retries
        self.seed = seed
        self.pool = pool or pools(pref.name)
        self._rng = random.Random(f"{seed}")

    @property
    def praise(self) -> str:
        """The next praise, drawn from the pool (an attribute for callers that read one message)."""
        return self._rng.choice(self.pool.praise)

    def correction(self) -> str:
        """The next correction, drawn from the pool."""
        return self._rng.choice(self.pool.corrections)

    def converse(self, client: Any, model: str, prompt: str, *, session: str, max_tokens: int,
                 temperature: float, seed: int) -> Conversation:
        rng = random.Random(f"{self.seed}/{seed}")
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        out = Conversation(prompt)
        for attempt in range(self.max_retries + 1):
            reply, version = self._ask(client, model, messages, session, max_tokens, temperature, seed + attempt)
            ok = self.pref.check(reply)
            said = rng.choice(self.pool.praise if ok else self.pool.corrections)
            out.replies.append(reply)
            out.met.append(ok)
            out.versions.append(version)
            out.said.append(said)
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": said}]
            if ok:
                break
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
    """Preference cases for the promotion gate: held-out prompt, the base's reply rewritten into the
    preferred form (``pref.rewrite``) and as it is (dispreferred)."""
    return [{"messages": [{"role": "user", "content": q}], "preferred": pref.rewrite(q, reply),
             "dispreferred": reply} for q, reply in base_replies.items()]


def guard_cases(base_replies: dict[str, str], pref: Preference | None = None) -> list[dict[str, Any]]:
    """Guard cases: neutral tasks with the base model's own answer as the reference.

    With ``pref`` the reference is written in the preferred form (``pref.rewrite`` of the answer):
    the user wants the preference on every reply, neutral ones included, so a reference without it
    would measure the preference itself (measured: the greeting's first token alone moved a plain
    reference by −3.5 nats per token) instead of whether the answers are still good.
    """
    return [{"messages": [{"role": "user", "content": q}],
             "reference": pref.rewrite(q, reply) if pref is not None else reply}
            for q, reply in base_replies.items()]
