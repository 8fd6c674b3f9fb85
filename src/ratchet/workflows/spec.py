"""An operator-level workflow description a small model can write: a list of steps from a menu.

A proposer that cannot write free workflow code reliably can still choose operators and their
arguments::

    name: sample-test-revise
    steps:
      - {op: sample, k: 3}
      - {op: strip_tests}
      - {op: select_by_examples}
      - {op: revise, rounds: 1}

:func:`parse_spec` reads such text (YAML or JSON) and rejects a malformed one with a message naming
the step and the field; :func:`compile_spec` turns a valid spec into a workspace's files: a
``workflow.py`` that runs the plan with :func:`flowops.run_plan` in the sandbox (where the workflow
suites put ``flowops.py``).
The pool semantics of each operator are documented on :func:`flowops.run_plan`.
"""

from __future__ import annotations

import pprint
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ratchet.contracts import RatchetError


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Sample(_Step):
    """Ask the model for ``k`` codes of the task (its system prompt from ``prompts/system.md``)."""

    op: Literal["sample"]
    k: int = Field(1, ge=1, le=8)
    """How many replies (they differ only when the run samples at a temperature above 0)."""
    max_tokens: int | None = Field(None, ge=16, le=4096)
    """Reply budget of each call (the run's cap still applies); None: the run's cap."""


class StripTests(_Step):
    """Cut the model's own test code (prints, asserts, ``__main__`` blocks) after the functions."""

    op: Literal["strip_tests"]


class TestExamples(_Step):
    """Run every code of the pool on the docstring's examples (one test run per distinct code)."""

    op: Literal["test_examples"]


class FilterPassing(_Step):
    """Keep only the codes that pass all visible examples (all of them when none does)."""

    op: Literal["filter_passing"]


class SelectByExamples(_Step):
    """Put first the code passing most visible examples; ties to the largest behaviour cluster."""

    op: Literal["select_by_examples"]


class Vote(_Step):
    """Put first the code of the largest group of identical (normalized) codes."""

    op: Literal["vote"]


class Revise(_Step):
    """While the first code fails a visible example, ask the model to fix it (up to ``rounds`` times)."""

    op: Literal["revise"]
    rounds: int = Field(1, ge=1, le=3)
    """Most repair calls."""


class ReviewStep(_Step):
    """Ask the model to review the first code; when it says wrong, ask for a fix (two calls at most)."""

    op: Literal["review"]


Step = Annotated[Sample | StripTests | TestExamples | FilterPassing | SelectByExamples | Vote | Revise | ReviewStep,
                 Field(discriminator="op")]
MENU = ("sample", "strip_tests", "test_examples", "filter_passing", "select_by_examples", "vote", "revise", "review")
#: The step models in menu order (the same union ``WorkflowSpec.steps`` accepts).
STEP_MODELS = (Sample, StripTests, TestExamples, FilterPassing, SelectByExamples, Vote, Revise, ReviewStep)


def code_step_calls(step: Any) -> int:
    """Most model calls one step asks for on one task: ``sample`` k, ``revise`` its rounds, ``review`` 2."""
    per = {"sample": lambda s: s.k, "revise": lambda s: s.rounds, "review": lambda s: 2}
    return per[step.op](step) if step.op in per else 0


class WorkflowSpec(BaseModel):
    """A workflow as a list of operator steps (see the module)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    name: str = Field("workflow", min_length=1, max_length=80)
    """A name for people and the archive."""
    steps: list[Step] = Field(min_length=1, max_length=12)
    """The operator steps, run in order over a pool of candidate codes."""

    def max_model_calls(self) -> int:
        """Most model calls the plan can ask for on one task: what to set the run's call cap to, and
        the cost to match a baseline against."""
        return sum(code_step_calls(s) for s in self.steps)

    def plan(self) -> list[dict]:
        """The steps as the plain data :func:`flowops.run_plan` reads."""
        return [s.model_dump(exclude_none=True) for s in self.steps]


def parse_spec(text: str, max_model_calls: int | None = None) -> WorkflowSpec:
    """A spec from YAML or JSON text; a malformed one raises ``RatchetError`` naming the step and
    field and listing the menu. With ``max_model_calls``, a plan that could ask for more fails too."""
    raw = load_raw(text)
    try:
        spec = WorkflowSpec.model_validate(raw)
    except ValidationError as exc:
        raise RatchetError("workflow spec is invalid: " + "; ".join(describe_error(e, raw) for e in exc.errors()),
                           hint="each step is {op: NAME, ...arguments}; ops: " + ", ".join(MENU)) from None
    if spec.steps[0].op != "sample":
        raise RatchetError(f"workflow spec: step 1 is {spec.steps[0].op!r}, but the pool is empty until a `sample` step",
                           hint="start with {op: sample, k: N}")
    check_cap(spec.max_model_calls(), max_model_calls, "task", "sample fewer codes or drop a revise/review step")
    return spec


def load_raw(text: str) -> dict:
    """The mapping of a spec's YAML or JSON text (a bare list of steps becomes ``{"steps": [...]}``)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RatchetError(f"workflow spec is not YAML/JSON: {exc}".splitlines()[0],
                           hint="write a mapping: {name: ..., steps: [{op: sample, k: 3}, ...]}") from None
    if isinstance(raw, list):
        raw = {"steps": raw}  # a bare list of steps is the common small-model output
    if not isinstance(raw, dict):
        raise RatchetError(f"workflow spec must be a mapping with `steps`, got {type(raw).__name__}",
                           hint="write {name: ..., steps: [{op: sample, k: 3}, ...]}")
    return raw


def check_cap(calls: int, max_model_calls: int | None, per: str, hint: str) -> None:
    """Refuse a plan that may ask for more than the run's call cap (None: no cap)."""
    if max_model_calls is not None and calls > max_model_calls:
        raise RatchetError(f"workflow spec may ask for {calls} model calls per {per}, "
                           f"more than the run's cap of {max_model_calls}", hint=hint)


def describe_error(error: dict, raw: dict, menu: tuple[str, ...] = MENU) -> str:
    loc = list(error["loc"])
    where = "spec"
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        where = f"step {loc[1] + 1}"
        step = raw["steps"][loc[1]] if isinstance(raw.get("steps"), list) and loc[1] < len(raw["steps"]) else None
        rest = [str(p) for p in loc[2:] if p not in menu]
        if error["type"] == "union_tag_invalid" or (error["type"] == "union_tag_not_found"):
            op = step.get("op") if isinstance(step, dict) else None
            return f"{where}: unknown op {op!r}" if op is not None else f"{where}: has no `op`"
        if isinstance(step, dict) and "op" in step:
            where += f" ({step['op']})"
        if rest:
            where += f" field `{'.'.join(rest)}`"
    elif loc:
        where = f"field `{'.'.join(str(p) for p in loc)}`"
    return f"{where}: {error['msg']}"


WORKFLOW_TEMPLATE = '''"""Workflow {name!r}, compiled from an operator spec (ratchet.workflows.spec); edit the spec, not this file.

Steps: {summary}. At most {calls} model calls per task.
"""

from flowops import as_step, run_plan

PLAN = {plan}


def workflow(task, files):
    return (yield from run_plan(PLAN, task, files))


step = as_step(workflow)
'''


def compile_spec(spec: WorkflowSpec) -> dict[str, str]:
    """The files of a workflow running ``spec``: ``workflow.py`` (the suites supply the operator library)."""
    summary = " -> ".join(s.op for s in spec.steps)
    source = WORKFLOW_TEMPLATE.format(name=spec.name, summary=summary, calls=spec.max_model_calls(),
                                      plan=pprint.pformat(spec.plan(), sort_dicts=False))
    return {"workflow.py": source}


@dataclass(frozen=True)
class Menu:
    """What an operator-level proposer offers a model for one domain: the steps it may choose (their
    models give the menu's text and the grammar), the ops a plan may start with, how a reply is
    parsed (against the run's call cap) and compiled into a workspace's files, and the packaged
    prompt (``ratchet/workflows/prompts/``) that explains the domain. Named by import path in the
    proposer's options (``menu``), so a domain brings its menu without a flag in the proposer."""

    step_models: tuple[type[BaseModel], ...]
    first: tuple[str, ...]
    parse: Callable[[str, int | None], Any]
    compile: Callable[[Any], dict[str, str]]
    template: str
    step_calls: Callable[[Any], int]
    """Most model calls one step (a validated step model) asks for: what the grammar budgets."""
    max_steps: int
    """Most steps of a plan (the spec model's own limit)."""
    required: str
    """An op every plan must hold (the one that makes candidates)."""
    edit_template: str
    """The packaged prompt of :class:`~ratchet.workflows.edits.EditChoiceProposer` for this domain."""


CODE_MENU = Menu(STEP_MODELS, ("sample",), parse_spec, compile_spec, "operator.md", step_calls=code_step_calls,
                 max_steps=WorkflowSpec.model_fields["steps"].metadata[-1].max_length, required="sample",
                 edit_template="operator_edit.md")
"""The code operators of :mod:`flowops` for HumanEval-style tasks (the operator proposer's default)."""
