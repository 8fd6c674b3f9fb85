"""A playbook that cannot hurt where it does not apply: least relevance, lessons scoped to the task
they came from, tags that need evidence (issue #40)."""

import json

import numpy as np
import pytest

from ratchet.context.budget import relevance, select
from ratchet.context.config import ContextConfig
from ratchet.context.history import PlaybookHistory
from ratchet.context.learner import ContextLearner, Trajectory
from ratchet.context.operations import Add, Delete, Tag, apply_operations
from ratchet.context.playbook import ORIGIN_CHARS, Item, Playbook
from ratchet.context.tagging import (
    HELPFUL_ON_FAILURE,
    MODEL_TAG,
    NOT_SHOWN,
    EvidenceTags,
    OutcomeTags,
    ReflectorTags,
    tag_policy,
)
from ratchet.context.trial import Arm
from ratchet.models.scripted import ScriptedModel
from ratchet.store import RunStore

from .fakes import BagOfWords

STRINGS = "convert the input string to lowercase before counting characters"
NUMBERS = "compute the area of a triangle from its side and height"


def _book(*items: Item) -> Playbook:
    return Playbook({i.id: i for i in items}, next_id=len(items) + 1)


# -- least relevance ---------------------------------------------------------------------------


def test_an_item_below_the_least_relevance_never_enters_however_much_budget_is_left():
    book = _book(Item("ctx-00001", "s", "Always convert the input string to lowercase."),
                 Item("ctx-00002", "s", "Compute the area of a triangle as half base times height."))
    task = NUMBERS
    scores = relevance(BagOfWords(), task, list(book.items.values()))
    assert scores[0] < 0.2 < 0.3 < scores[1]  # the fake's cosines: the string rule shares only "the"
    for budget in (None, 10_000):
        chosen = select(book, task, budget, embedder=BagOfWords(), min_relevance=0.3)
        assert [i.id for i in chosen.items] == ["ctx-00002"] and chosen.dropped == 1
        # The same budget without a least relevance lets the unrelated rule in (the trial's failure).
        assert len(select(book, task, budget, embedder=BagOfWords(), min_relevance=None).items) == 2
    # A good record does not buy entry: the least relevance reads relevance alone.
    famous = _book(Item("ctx-00001", "s", "Always convert the input string to lowercase.", helpful=30))
    assert select(famous, task, None, embedder=BagOfWords(), min_relevance=0.3, record_weight=5.0).items == []


def test_without_an_encoder_relevance_is_not_measured_and_no_least_relevance_applies():
    book = _book(Item("ctx-00001", "s", "Always convert the input string to lowercase."))
    assert len(select(book, NUMBERS, None, embedder=None, min_relevance=0.9).items) == 1


def test_the_default_least_relevance_is_set_and_ace_add_only_has_none():
    assert ContextConfig().min_relevance == 0.4
    ace = Arm.named("ace-add-only", ContextConfig()).config
    assert ace.min_relevance is None and ace.budget_tokens is None and ace.curator_operations == ["ADD"]
    assert ace.tags == "reflector"


# -- scope: the task an item was learned from ----------------------------------------------------


def test_relevance_is_the_mean_of_the_cosines_with_the_text_and_with_the_task_it_came_from():
    emb = BagOfWords()
    scoped = Item("ctx-00001", "s", "Always convert the input string to lowercase.", origin=STRINGS)
    bare = Item("ctx-00002", "s", "Always convert the input string to lowercase.")
    task = "count the distinct characters of a string regardless of case"
    got = relevance(emb, task, [scoped, bare])
    t, text, origin = emb.embed([task, scoped.text, STRINGS])
    assert got[0] == pytest.approx((float(text @ t) + float(origin @ t)) / 2)
    assert got[1] == pytest.approx(float(text @ t))  # no origin (a playbook from before): the text alone
    # A generic rule learned on a string problem scores lower on a numeric task than its text alone
    # would make it, and higher on a task like its own.
    numeric = relevance(emb, NUMBERS, [scoped, bare])
    assert numeric[0] < relevance(emb, STRINGS, [scoped])[0]
    assert relevance(emb, STRINGS, [scoped])[0] > relevance(emb, STRINGS, [bare])[0]


def test_an_add_keeps_the_task_it_was_learned_from_and_the_file_round_trips():
    applied = apply_operations(Playbook(), [Add("s", "Lowercase the input.")], source="HumanEval/16",
                               origin="def count_distinct_characters(string: str) -> int:\n    \"\"\"regardless of case\"\"\"")
    item = applied.playbook.get("ctx-00001")
    assert item.origin == 'def count_distinct_characters(string: str) -> int: """regardless of case"""'
    text = applied.playbook.render()
    assert "task=def count_distinct_characters" in text
    again = Playbook.parse(text)
    assert again.get("ctx-00001") == item
    # A model never sees the origin: not in the prompt's form, not in what the item costs.
    assert "count_distinct" not in applied.playbook.render(provenance=False)
    long = apply_operations(Playbook(), [Add("s", "x")], origin="word " * 1000).playbook.get("ctx-00001")
    assert len(long.origin) <= ORIGIN_CHARS
    cost_plain = select(_book(Item("ctx-00001", "s", "x", ops=("ADD@1",))), "", None).tokens
    assert select(_book(long), "", None).tokens == cost_plain


def test_a_playbook_stored_before_origins_loads_with_none_and_keeps_its_provenance():
    old = ("# Playbook\n<!-- next_id=3 version=7 -->\n\n## code\n"
           "- [ctx-00001] (+33/-0) Always convert the input string to lowercase. <!-- src=HumanEval/16 ops=ADD@17,TAG@18 -->\n"
           "- [ctx-00002] (+0/-0) Plain item.\n")
    book = Playbook.parse(old)
    first = book.get("ctx-00001")
    assert first.origin == "" and first.sources == ("HumanEval/16",) and first.ops == ("ADD@17", "TAG@18")
    assert first.helpful == 33 and book.get("ctx-00002").origin == "" and book.version == 7
    assert Playbook.parse(book.render()).items == book.items


def test_a_merge_keeps_the_oldest_parts_origin():
    book = _book(Item("ctx-00001", "s", "a", origin=""), Item("ctx-00002", "s", "b", origin="task b"))
    from ratchet.context.operations import Merge

    merged = apply_operations(book, [Merge(("ctx-00002", "ctx-00001"), "a and b")]).playbook
    assert merged.get("ctx-00001").origin == "task b"  # the first part that has one


# -- tags need evidence ----------------------------------------------------------------------------


OPS = [Tag("ctx-00001", "helpful"), Tag("ctx-00002", "harmful"), Tag("ctx-00003", "helpful"), Add("s", "new"),
       Delete("ctx-00009")]


def test_the_reflector_strategy_drops_only_tags_of_items_the_attempt_did_not_show():
    kept, dropped = ReflectorTags().filter(OPS, {"ctx-00001", "ctx-00002"}, 0.0)
    assert kept == [OPS[0], OPS[1], OPS[3], OPS[4]]
    assert [(d.id, d.why) for d in dropped] == [("ctx-00003", NOT_SHOWN)]


def test_the_evidence_strategy_drops_helpful_on_a_failure_and_harmful_on_a_pass():
    shown = {"ctx-00001", "ctx-00002", "ctx-00003"}
    kept, dropped = EvidenceTags().filter(OPS, shown, 0.0)
    assert kept == [OPS[1], OPS[3], OPS[4]]
    assert [(d.id, d.tag, d.why) for d in dropped] == [
        ("ctx-00001", "helpful", HELPFUL_ON_FAILURE.format(score=0.0)),
        ("ctx-00003", "helpful", HELPFUL_ON_FAILURE.format(score=0.0))]
    kept, dropped = EvidenceTags().filter(OPS, shown, 1.0)
    assert kept == [OPS[0], OPS[2], OPS[3], OPS[4]] and [d.id for d in dropped] == ["ctx-00002"]
    assert "harmful on a passed attempt" in dropped[0].why
    kept, dropped = EvidenceTags().filter(OPS, shown, 0.5)  # a partial score may carry either
    assert kept == OPS and dropped == []
    kept, dropped = EvidenceTags().filter(OPS, {"ctx-00002"}, 1.0)  # not shown is checked first
    assert [(d.id, d.why) for d in dropped] == [("ctx-00001", NOT_SHOWN), ("ctx-00002", "harmful on a passed attempt (score 1)"),
                                               ("ctx-00003", NOT_SHOWN)]


def test_the_outcome_strategy_tags_every_shown_item_by_the_verdict_and_no_models_tag():
    shown = {"ctx-00002", "ctx-00001"}
    kept, dropped = OutcomeTags().filter(OPS, shown, 0.0)
    assert kept == [Tag("ctx-00001", "harmful"), Tag("ctx-00002", "harmful"), OPS[3], OPS[4]]
    assert len(dropped) == 3 and {d.why for d in dropped} == {MODEL_TAG}
    kept, _ = OutcomeTags().filter(OPS, shown, 1.0)
    assert kept[:2] == [Tag("ctx-00001", "helpful"), Tag("ctx-00002", "helpful")]
    kept, _ = OutcomeTags().filter(OPS, shown, 0.5)
    assert kept == [OPS[3], OPS[4]]
    assert OutcomeTags().filter([], set(), 0.0) == ([], [])
    assert tag_policy("evidence").name == "evidence" and ContextConfig().tags == "evidence"


def _tagging_model(tag: str):
    reply = json.dumps({"tags": [{"id": "ctx-00001", "tag": tag}], "lesson": ""})
    return ScriptedModel(lambda messages: reply)


@pytest.mark.parametrize("tags, score, helpful, harmful, why", [
    ("reflector", 0.0, 1, 0, None),
    ("evidence", 0.0, 0, 0, "helpful on a failed attempt (score 0)"),
    ("evidence", 1.0, 1, 0, None),
    ("outcome", 0.0, 0, 1, MODEL_TAG),
])
def test_the_learner_applies_the_tag_strategy_and_records_why_a_tag_was_dropped(tmp_path, tags, score, helpful, harmful, why):
    path = tmp_path / "playbook.md"
    Playbook.parse("# Playbook\n\n## s\n- [ctx-00001] (+0/-0) Guess the middle of the range.\n").save(path)
    run = RunStore(tmp_path / "runs").create_run("context", {})
    learner = ContextLearner(path, reflector_model=_tagging_model("helpful"), embedder=BagOfWords(), run=run,
                             config=ContextConfig(tags=tags))
    entry = learner.observe("guess a number", "guessed 50", score, trajectory_id="t1", shown=frozenset({"ctx-00001"}))
    item = Playbook.load(path).get("ctx-00001")
    assert (item.helpful, item.harmful) == (helpful, harmful)
    recorded = PlaybookHistory(run).entries()[-1]["tags_dropped"]
    assert recorded == ([] if why is None else [{"id": "ctx-00001", "tag": "helpful", "why": why}])
    assert learner.stats.tags_dropped == len(recorded)


def test_the_learner_keeps_the_task_as_the_origin_of_what_it_adds(tmp_path):
    replies = iter(['{"tags": [], "lesson": "Guess the middle."}',
                    json.dumps({"operations": [{"op": "ADD", "section": "s", "text": "Guess the middle."}]})])
    learner = ContextLearner(tmp_path / "p.md", reflector_model=ScriptedModel(lambda m: next(replies)),
                             embedder=BagOfWords())
    learner.observe("I am thinking of a number\nbetween 1 and 100", "guessed 50", 1.0, trajectory_id="t1")
    assert Playbook.load(tmp_path / "p.md").get("ctx-00001").origin == "I am thinking of a number between 1 and 100"
    assert np.isclose(relevance(BagOfWords(), "I am thinking of a number between 1 and 100",
                                list(learner.playbook.items.values()))[0],
                      (float(BagOfWords().embed(["I am thinking of a number between 1 and 100"])[0]
                             @ BagOfWords().embed(["Guess the middle."])[0]) + 1.0) / 2, atol=1e-5)
