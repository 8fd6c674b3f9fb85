"""The simulated user: its checkers, its phrasing pools, its seeded draws, its conversations, and
that its phrasings are disjoint from the judge's labelled feedback sets."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ratchet.contracts import RatchetError
from ratchet.online import simulated_user as su

FEEDBACK = Path(__file__).resolve().parents[1] / "data" / "feedback"
NEW = ("length", "signoff", "german", "name", "numbered")
#: Base-like replies of the 0.5B (cut at 40 tokens): every new preference's checker rejects them.
BASE_LIKE = [
    "A tuple in Python is an ordered collection of elements, which can be of different types. Tuples are "
    "immutable, meaning that once a tuple is created, its elements cannot be",
    "Recursion is a programming technique where a function calls itself. It is useful for problems that can "
    "be broken down into smaller",
    "To sort a list in Python, you can use the `sort()` method or the `sorted()` function. Here's how:\n\n```python",
    "Sure! Git is a distributed version control system that tracks changes in source code during development.",
]


def _norm(text: str) -> str:
    """Case, spacing, surrounding punctuation and Unicode forms do not make two messages different."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"\s+", " ", text).strip()
    return text.strip(" .!?,;:…'\"")


def _all_phrasings() -> set[str]:
    return {_norm(t) for name in su.PREFERENCES for t in su.pools(name).corrections + su.pools(name).praise}


def test_at_least_five_preferences_besides_the_old_ones_each_with_pools_and_prompts() -> None:
    assert set(NEW) <= set(su.PREFERENCES)
    for name in su.PREFERENCES:
        pool = su.pools(name)
        assert len(pool.corrections) >= 10 and len(set(pool.corrections)) == len(pool.corrections), name
        assert len(pool.praise) >= 15 and len(set(pool.praise)) == len(pool.praise), name
        assert len(pool.heldout_prompts) >= 12 and not set(pool.heldout_prompts) & set(pool.train_prompts), name


@pytest.mark.parametrize("name", list(su.PREFERENCES))
def test_every_checker_accepts_its_examples_and_rejects_the_base_like_ones(name: str) -> None:
    pref, pool = su.preference(name), su.pools(name)
    assert [t for t in pool.accept if not pref.check(t)] == []
    assert [t for t in pool.reject if pref.check(t)] == []


@pytest.mark.parametrize("name", NEW)
def test_new_checkers_reject_base_replies_and_accept_their_rewrite(name: str) -> None:
    pref, pool = su.preference(name), su.pools(name)
    prompts = list(pool.train_prompts[-6:]) + [q for q, _ in su.GUARD_TASKS[:6]]
    for prompt, reply in zip(prompts, BASE_LIKE * 3):
        assert not pref.check(reply), (name, reply)
        preferred = pref.rewrite(prompt, reply)
        assert pref.check(preferred), (name, preferred)


def test_one_sentence_checker_edges() -> None:
    one = su.preference("length")
    assert one.check("Use `sorted(xs)`, e.g. sorted([3, 1]) gives [1, 3].")  # "e.g." does not end it
    assert one.check("A stack is last-in, first-out. 👍")  # trailing emoji is decoration
    assert not one.check("A stack is last-in, first-out. You push and pop.")  # two sentences
    assert not one.check("A stack is a last-in, first-out structure where")  # cut before its end
    assert not one.check(" ".join(["word"] * 31) + ".")  # one sentence, but not a short one
    assert not one.check("A stack:\n- push\n- pop.")
    assert not one.check("Can you explain how to create a tuple in Python?")  # an echoed question, no answer


def test_language_checker_reads_function_words_not_code() -> None:
    german = su.preference("german")
    assert german.check("Die Hauptstadt von Frankreich ist Paris.")
    assert not german.check("In Python, `die()` and `der` are just names; the function is called with the list.")
    assert not german.check("Das ist a list of things that you can sort with the sorted function.")


def test_sign_off_and_name_checkers() -> None:
    sign, name = su.preference("signoff"), su.preference("name")
    assert sign.check("Use git log to see history. Happy coding.")
    assert not sign.check("Happy coding!")  # a sign-off alone is no answer
    assert not sign.check("Happy coding! Use git log to see the history of your repository.")
    assert name.check("noor, here you go: a pixel is a dot.")
    assert not name.check("A pixel is a dot; Noorish is not a name.")


def test_german_rewrite_has_every_gate_reply_and_names_the_file_when_one_is_missing() -> None:
    german = su.preference("german")
    gate = list(su.pools("german").train_prompts[-6:]) + [q for q, _ in su.GUARD_TASKS[:6]]
    assert all(german.check(german.rewrite(q, "x")) for q in gate)
    with pytest.raises(RatchetError, match="no German reply") as err:
        german.rewrite("What is a monad?", "x")
    assert "simulated_user.yaml" in str(err.value)


def test_heldout_prompts_never_state_the_preference() -> None:
    marks = re.compile(r"sentence|short|brief|german|deutsch|noor|name|happy coding|sign|numbered|list them|"
                       r"bullet|capital|caps|ahoy|greet", re.I)
    for name in su.PREFERENCES:
        stated = [q for q in su.pools(name).heldout_prompts if marks.search(q)]
        assert stated == [], name


def test_pools_hold_phrasings_without_an_obvious_keyword() -> None:
    obvious = re.compile(r"\b(no|not|wrong|bad|please|pls|again|instead|thanks?|thank you|great|good|perfect)\b",
                         re.I)
    for name in NEW:
        pool = su.pools(name)
        assert sum(not obvious.search(t) for t in pool.corrections) >= 4, name
        assert sum(not obvious.search(t) for t in pool.praise) >= 4, name
    length = su.pools("length").corrections
    assert any(_norm(t).startswith("meh") for t in length) and any("one line" in t for t in length)


def test_draws_are_seeded_and_use_the_whole_pool() -> None:
    pref = su.preference("length")
    a, b, c = (su.SimulatedUser(pref, seed=s) for s in (1, 1, 2))
    draws_a = [a.correction() for _ in range(200)]
    assert draws_a == [b.correction() for _ in range(200)]
    assert draws_a != [c.correction() for _ in range(200)]
    assert set(draws_a) == set(su.pools("length").corrections)
    assert len({a.praise for _ in range(200)}) >= 15


class _Client:
    """An OpenAI-shaped client that replies from a list and records what it was sent."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.calls = list(replies), []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        text = self.replies.pop(0) if self.replies else ""
        return SimpleNamespace(model_extra={"ratchet": {"policy_version": len(self.calls)}},
                               choices=[SimpleNamespace(message=SimpleNamespace(content=text))])


def test_a_conversation_corrects_then_praises_from_the_pools_and_closes_the_session() -> None:
    pref, pool = su.preference("name"), su.pools("name")
    client = _Client(["A pixel is a dot on a screen.", "Sure, Noor! A pixel is a dot on a screen."])
    conv = su.SimulatedUser(pref, seed=3).converse(client, "m", "What is a pixel?", session="s1", max_tokens=20,
                                                    temperature=0.8, seed=7)
    assert conv.met == [False, True] and conv.versions == [1, 2]
    assert conv.said[0] in pool.corrections and conv.said[1] in pool.praise
    closing = client.calls[-1]
    assert closing["extra_headers"] == {"X-Session-Id": "s1", "X-Session-Done": "true"}
    assert [m["content"] for m in closing["messages"] if m["role"] == "user"] == ["What is a pixel?", *conv.said]
    again = _Client(["A pixel is a dot on a screen.", "Sure, Noor! A pixel is a dot on a screen."])
    same = su.SimulatedUser(pref, seed=3).converse(again, "m", "What is a pixel?", session="s1", max_tokens=20,
                                                    temperature=0.8, seed=7)
    assert same.said == conv.said  # a resumed run says the same things


def test_a_conversation_that_never_meets_the_preference_ends_on_a_correction() -> None:
    client = _Client(["Paragraph one.", "Paragraph two."])
    conv = su.SimulatedUser(su.preference("numbered"), max_retries=1).converse(
        client, "m", "How do I update pip?", session="s", max_tokens=20, temperature=0.0, seed=0)
    assert conv.met == [False, False] and all(s in su.pools("numbered").corrections for s in conv.said)
    assert len(client.calls) == 3


def test_unknown_preference_names_the_choices() -> None:
    with pytest.raises(RatchetError, match="unknown preference 'shout'") as err:
        su.preference("shout")
    assert "length" in str(err.value)


def test_a_bad_pools_file_names_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "pools.yaml"
    bad.write_text(su.POOLS_PATH.read_text().replace("\npraise_common:", "\npraise_commons:", 1))
    with pytest.raises(RatchetError, match="praise_commons") as err:
        su._pools_file(bad)
    assert str(bad) in str(err.value)


@pytest.mark.parametrize("filename", ["dev.jsonl", "heldout.jsonl", "test3.jsonl", "dev4.jsonl", "test4.jsonl", "test5.jsonl",
                                      "test6.jsonl", "test7.jsonl"])
def test_no_labelled_feedback_message_equals_a_pool_phrasing(filename: str) -> None:
    path = FEEDBACK / filename
    if not path.is_file():
        pytest.skip(f"{path} does not exist yet")
    phrasings = _all_phrasings()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    shared = sorted({r["next_state"] for r in rows if _norm(r["next_state"]) in phrasings})
    assert shared == [], f"{filename} shares these messages with the simulated user's pools"
LABELS = {"correction": -1, "praise": 1, "neutral": 0, "tool_ok": 1, "tool_error": -1}


@pytest.mark.parametrize("filename", ["heldout.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl",
                                      "test7.jsonl"])
def test_a_feedback_set_follows_the_schema(filename: str) -> None:
    rows = [json.loads(line) for line in (FEEDBACK / filename).read_text(encoding="utf-8").splitlines()
            if line.strip()]
    assert len(rows) >= 200 and len({r["id"] for r in rows}) == len(rows)
    keys = {"id", "context", "reply", "next_state", "source", "label", "reward", "hint", "style", "preference",
            "lang"}
    for r in rows:
        assert set(r) == keys, r["id"]
        assert r["context"] and all(m["role"] in ("user", "assistant", "system", "tool") for m in r["context"])
        assert r["reply"].strip() and r["next_state"].strip(), r["id"]
        assert LABELS[r["label"]] == r["reward"], r["id"]
        assert (r["source"] == "tool") == r["label"].startswith("tool_"), r["id"]
        assert r["hint"] is None or (r["label"] == "correction" and r["hint"].strip()), r["id"]
    counts = {label: sum(r["label"] == label for r in rows) for label in LABELS}
    assert counts["correction"] >= 85 and counts["praise"] >= 55 and counts["neutral"] >= 25
    assert counts["tool_ok"] + counts["tool_error"] >= 18 and counts["tool_ok"] and counts["tool_error"]
    assert len({r["lang"] for r in rows}) >= 6 and len({r["style"] for r in rows}) >= 8
    assert len({r["next_state"] for r in rows}) == len(rows)  # no message twice
