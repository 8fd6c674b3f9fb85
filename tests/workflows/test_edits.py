"""The edit-choice proposer with the scripted model: the changes it lists (valid, within the cap,
untried), what it shows the model, and how it reads the answer."""

from __future__ import annotations

import json
import random

import pytest

from ratchet.contracts import Proposal, Skip
from ratchet.models.scripted import ScriptedModel
from ratchet.workflows import compile_spec, parse_spec
from ratchet.workflows.edits import EditChoiceOptions, EditChoiceProposer, draw, one_step_changes, short_plans
from ratchet.workflows.movespec import MOVE_MENU
from ratchet.workflows.proposers import plan_of
from ratchet.workflows.spec import CODE_MENU
from tests.workflows.test_proposers import HAND, Archive, ctx_with

PLAN = [{"op": "sample", "k": 2}, {"op": "select_by_examples"}]
BEST_OF_2 = compile_spec(parse_spec(json.dumps({"name": "best-of-2", "steps": PLAN})))


def test_one_step_changes_are_valid_distinct_within_the_cap_and_not_the_plan() -> None:
    changes = one_step_changes(PLAN, CODE_MENU, 4)
    plans = [json.dumps(c.plan) for c in changes]
    assert len(plans) == len(set(plans)) and json.dumps(PLAN) not in plans
    assert all(CODE_MENU.parse(json.dumps({"steps": c.plan}), 4).max_model_calls() <= 4 for c in changes)
    texts = {c.text for c in changes}
    assert "add vote as step 3" in texts and "change step 1 (sample k=2) to sample k=4" in texts
    assert "remove step 2 (select_by_examples)" in texts
    assert "remove step 1 (sample k=2)" not in texts  # a plan must start with a sample
    assert not any("k=5" in t for t in texts) and "add review as step 1" not in texts
    # an optional argument of a changed step stays
    kept = one_step_changes([{"op": "sample", "k": 1, "max_tokens": 16}], MOVE_MENU, 4)
    assert any(c.plan[0] == {"op": "sample", "k": 3, "max_tokens": 16} for c in kept)


def test_short_plans_start_right_and_fit_the_cap() -> None:
    plans = short_plans(MOVE_MENU, 2, 2)
    assert plans and all(c.plan[0]["op"] in ("think", "sample") for c in plans)
    assert all(any(s["op"] == "sample" for s in c.plan) and len(c.plan) <= 2 for c in plans)
    assert {"op": "think"} not in [c.plan[0] for c in plans if len(c.plan) == 1]


def test_draw_takes_distinct_items_with_any_rng() -> None:
    items = list(range(30))
    got = draw(items, 10, random.Random(1))
    assert len(got) == len(set(got)) == 10 and len(draw(items, 40, random.Random(1))) == 30


def test_the_proposer_lists_untried_changes_and_proposes_the_one_named(tmp_path) -> None:
    model = ScriptedModel(["3"])
    archive = Archive()
    parent = archive.add(BEST_OF_2, score=0.4, t1=1.0, t2=0.0)
    tried = compile_spec(parse_spec(json.dumps({"name": "other", "steps": [*PLAN, {"op": "vote"}]})))
    archive.add(tried, status="rejected")
    proposer = EditChoiceProposer(EditChoiceOptions(choices=6), ctx_with(tmp_path, model))
    out = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(out, Proposal)
    prompt = model.calls[0]["messages"][0]["content"]
    listed = out.meta["listed"]
    assert len(listed) == 6 and f"3. {listed[2]}" in prompt and "Answer with its number only (1 to 6)" in prompt
    assert "t2 wrong answer" in prompt and '"op": "sample", "k": 2' in prompt  # the failures, the parent's plan
    assert model.calls[0]["params"]["grammar"] == 'root ::= "1" | "2" | "3" | "4" | "5" | "6"\n'
    assert out.claim.target == f"workflow: {listed[2]}"
    assert plan_of(out.files["workflow.py"]) not in (PLAN, [*PLAN, {"op": "vote"}])
    assert all("add vote as step 3" != t for t in listed)  # the tried plan is never offered


def test_a_hand_written_parent_gets_short_plans_and_a_bad_answer_is_a_skip(tmp_path) -> None:
    archive = Archive()
    parent = archive.add({"workflow.py": HAND}, score=0.3)
    out = EditChoiceProposer(EditChoiceOptions(), ctx_with(tmp_path, ScriptedModel(["2"]))).propose(
        parent, archive, random.Random(0))
    assert isinstance(out, Proposal) and out.meta["listed"][1].startswith("replace the workflow with sample")
    skip = EditChoiceProposer(EditChoiceOptions(choices=4), ctx_with(tmp_path, ScriptedModel(["9"]))).propose(
        parent, archive, random.Random(0))
    assert isinstance(skip, Skip) and "names no change of the list (1-4)" in skip.reason


def test_the_move_menu_uses_its_own_prompt(tmp_path) -> None:
    model = ScriptedModel(["1"])
    archive = Archive()
    parent = archive.add({"workflow.py": MOVE_MENU.compile(MOVE_MENU.parse("[{op: sample, k: 1}]", 4))["workflow.py"]})
    out = EditChoiceProposer(EditChoiceOptions(menu="ratchet.workflows.movespec:MOVE_MENU"), ctx_with(tmp_path, model)).propose(
        parent, archive, random.Random(0))
    assert isinstance(out, Proposal) and "plays one-player text games" in model.calls[0]["messages"][0]["content"]
    assert "from moveops import run_move_plan" in out.files["workflow.py"]


@pytest.mark.parametrize("menu", [CODE_MENU, MOVE_MENU])
def test_every_listed_plan_compiles(menu) -> None:
    for change in short_plans(menu, 4, 2)[:50] + one_step_changes([{"op": "sample", "k": 1}], menu, 4):
        assert plan_of(menu.compile(menu.parse(json.dumps({"steps": change.plan}), 4))["workflow.py"]) == change.plan


def test_the_headline_search_runs_the_edit_proposer_with_its_cap_and_its_domains_menu() -> None:
    from ratchet.workflows.headline import HeadlineConfig, search_config
    from tests.workflows.test_headline_games import ORIGINAL

    games = HeadlineConfig(original=ORIGINAL, domain="games", model="scripted:", search_ids=["GuessTheNumber-v0#20"],
                           heldin_ids=["GuessTheNumber-v0#22"], test_ids=["GuessTheNumber-v0#100"])
    [edit, aflow] = search_config(games).proposers
    assert edit.name == "ratchet.workflows.edits:EditChoiceProposer" and edit.weight == 3
    assert edit.options == {"max_model_calls": games.workflow.max_model_calls, "menu": "ratchet.workflows.movespec:MOVE_MENU"}
    assert aflow.options == {"prompt": "aflow_moves.md"}
