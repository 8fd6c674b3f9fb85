"""One change of the parent's plan, chosen from a numbered list: the operator proposer for a model
too small to write a plan.

:class:`~ratchet.workflows.proposers.OperatorProposer` asks for a whole plan under a grammar that
admits only valid ones. In the games headline's second run the 1.5B answered the same eight-step
plan (four single samples, then vote and avoid_refused twice) in nine of nine asks, whatever the
parent's failures said: free to write any plan, a small model wrote the longest one the grammar
allowed. :class:`EditChoiceProposer` keeps AFlow's "one change of the parent" and makes it a
multiple choice: the parent's plan and results, and a numbered list of changes (add a step, remove
one, change an argument) drawn at random from every one-step change that gives a valid plan
within the call cap and that the run has not tried. The model answers a number (under a grammar
that admits only the numbers shown). From a parent with no plan (hand-written code) the list
offers short plans instead, up to ``seed_steps`` steps.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from ratchet.contracts import ArchiveView, Candidate, Claim, Proposal, RatchetError, Skip
from ratchet.workflows.proposers import (
    MenuOptions,
    MenuProposer,
    menu_text,
    parent_spec,
    plan_of,
    step_instances,
    tried_plans,
)
from ratchet.workflows.spec import Menu


@dataclass(frozen=True)
class Change:
    """One entry of the list: what it does, in words, and the plan it makes."""

    text: str
    plan: list[dict[str, Any]]


def step_text(step: dict[str, Any]) -> str:
    """``sample k=3``: a step as the list shows it."""
    return " ".join([step["op"], *(f"{k}={v}" for k, v in step.items() if k != "op")])


def plan_text(plan: list[dict[str, Any]]) -> str:
    return " -> ".join(step_text(s) for s in plan)


def _key(plan: list[dict[str, Any]]) -> str:
    return json.dumps(plan, sort_keys=True)


def valid(plan: list[dict[str, Any]], menu: Menu, cap: int | None) -> bool:
    """Whether ``plan`` parses as the menu's spec within the call cap."""
    try:
        menu.parse(json.dumps({"name": "x", "steps": plan}), cap)
    except RatchetError:
        return False
    return True


def one_step_changes(plan: list[dict[str, Any]], menu: Menu, cap: int | None) -> list[Change]:
    """Every valid plan one change away from ``plan`` (a step added anywhere, one removed, one's
    argument changed), each once, in a fixed order."""
    steps = [json.loads(text) for _, text, _ in step_instances(menu, cap)]
    found: list[Change] = []
    for i in range(len(plan) + 1):
        found += [Change(f"add {step_text(s)} as step {i + 1}", [*plan[:i], s, *plan[i:]]) for s in steps]
    for i, old in enumerate(plan):
        found.append(Change(f"remove step {i + 1} ({step_text(old)})", [*plan[:i], *plan[i + 1:]]))
        # optional arguments of the old step (a reply budget) stay
        found += [Change(f"change step {i + 1} ({step_text(old)}) to {step_text(s)}", [*plan[:i], {**old, **s}, *plan[i + 1:]])
                  for s in steps if s["op"] == old["op"] and {**old, **s} != old]
    return _distinct([c for c in found if valid(c.plan, menu, cap)], exclude={_key(plan)})


def short_plans(menu: Menu, cap: int | None, length: int) -> list[Change]:
    """Every valid plan of at most ``length`` steps (for a parent that has no plan to change)."""
    steps = [json.loads(text) for _, text, _ in step_instances(menu, cap)]
    found = [Change(f"replace the workflow with {plan_text(list(p))}", list(p))
             for n in range(1, length + 1) for p in itertools.product(steps, repeat=n)
             if p[0]["op"] in menu.first]
    return _distinct([c for c in found if valid(c.plan, menu, cap)], exclude=set())


def _distinct(changes: list[Change], exclude: set[str]) -> list[Change]:
    seen, out = set(exclude), []
    for c in changes:
        if _key(c.plan) not in seen:
            seen.add(_key(c.plan))
            out.append(c)
    return out


def draw(changes: list[Change], n: int, rng: Any) -> list[Change]:
    """``n`` of ``changes`` without replacement, in the order drawn (any rng with ``random()``)."""
    pool, out = list(changes), []
    while pool and len(out) < n:
        out.append(pool.pop(min(int(rng.random() * len(pool)), len(pool) - 1)))
    return out


class EditChoiceOptions(MenuOptions):
    """The edit-choice proposer: one change of the parent's plan, picked from a numbered list (the
    menu's ``edit_template`` is the prompt)."""

    choices: int = Field(default=10, ge=2, le=40)
    """Changes listed per ask (drawn at random from all the untried ones)."""
    seed_steps: int = Field(default=3, ge=1, le=4)
    """From a parent with no plan: the longest plans listed."""
    max_tokens: int = Field(default=8, ge=1)
    """Reply budget: a number."""


class EditChoiceProposer(MenuProposer):
    """``ratchet.workflows.edits:EditChoiceProposer`` (see the module)."""

    name = "operator_edit"
    default_template = "operator_edit.md"
    Options = EditChoiceOptions
    options: EditChoiceOptions

    def menu_prompt(self, menu: Menu) -> str:
        return menu.edit_template

    def ask_number(self, messages: list[dict[str, Any]], n: int, rng: Any) -> str:
        """One model call whose answer is one of 1..n (under a grammar unless disabled or refused)."""
        grammar = "root ::= " + " | ".join(f'"{i}"' for i in range(1, n + 1)) + "\n"
        return self.ask_under(messages, grammar if self.options.grammar else None, rng)

    def calls(self, plan: list[dict[str, Any]]) -> int:
        return int(self.menu.parse(json.dumps({"name": "x", "steps": plan}), None).max_model_calls())

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any) -> Proposal | Skip:
        surface, cap = self.options.surface, self.options.max_model_calls
        plan = plan_of(parent.files.get(surface, ""))
        pool = one_step_changes(plan, self.menu, cap) if plan is not None else short_plans(self.menu, cap, self.options.seed_steps)
        tried = {_key(p) for p in tried_plans(archive, surface)}
        pool = [c for c in pool if _key(c.plan) not in tried]
        if not pool:
            return self.skip(parent, "every change of this plan the list could offer has been tried")
        shown = draw(pool, self.options.choices, rng)
        listed = "\n".join(f"{i}. {c.text}: {plan_text(c.plan)} ({self.calls(c.plan)} model calls)"
                           for i, c in enumerate(shown, 1))
        results = self.results(archive, parent.id)
        template, source = self.template(parent)
        messages = self.fitted_request(
            template, results, spec=parent_spec(parent, surface), menu=menu_text(self.menu.step_models),
            choices=listed, count=len(shown), cap=cap, score=self.score_text(archive, parent.id),
            successes=self.successes_text(parent, archive), rejected=self.rejected_text(archive))
        reply = self.ask_number(messages, len(shown), rng)
        number = re.search(r"\d+", reply)
        if number is None or not 1 <= int(number.group()) <= len(shown):
            return self.skip(parent, f"the reply names no change of the list (1-{len(shown)})", reply=reply)
        chosen = shown[int(number.group()) - 1]
        spec = self.menu.parse(json.dumps({"name": f"edit-{len(chosen.plan)}", "steps": chosen.plan}), cap)
        compiled = self.menu.compile(spec)
        files = {surface: compiled["workflow.py"]}
        return self.proposal(files, Claim(target=f"workflow: {chosen.text}"), (parent.id,), template=source,
                             prompt=messages[0]["content"], reply=reply, spec=spec.model_dump(exclude_none=True),
                             max_model_calls=spec.max_model_calls(), listed=[c.text for c in shown],
                             untried=len(pool), grammar=self.options.grammar and not self.grammar_refused)
