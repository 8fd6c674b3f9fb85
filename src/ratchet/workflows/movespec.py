"""A move-level workflow as a list of steps from a menu: how a player answers one move of a
one-player text game (the second domain of the workflow search, beside :mod:`ratchet.workflows.spec`
for code)::

    name: think-vote
    steps:
      - {op: think}
      - {op: sample, k: 3, max_tokens: 24}
      - {op: vote}
      - {op: avoid_refused}

:func:`parse_move_spec` reads such text and rejects a malformed plan, or one that may ask for more
model calls per move than the run's cap; :func:`compile_move_spec` turns it into a ``workflow.py``
that runs the plan with :func:`moveops.run_move_plan` in the sandbox (where a games run puts
``flowops.py`` and ``moveops.py``). :data:`MOVE_MENU` gives the operator proposer this menu.
"""

from __future__ import annotations

import pprint
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ratchet.contracts import RatchetError
from ratchet.workflows.spec import Menu, check_cap, describe_error, load_raw

#: The libraries a move workflow imports in the sandbox (``workflow.libraries`` of a games run).
MOVE_LIBRARIES = ["ratchet.workflows.flowops", "ratchet.workflows.moveops"]


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Think(_Step):
    """One reasoning call about the rules and the game so far before any move is asked for; every later sample sees it."""

    op: Literal["think"]
    max_tokens: int | None = Field(None, ge=16, le=1024)
    """Reply budget of the reasoning (the run's cap still applies); None: the run's cap."""


class SampleMoves(_Step):
    """Ask the model for the move ``k`` times and add the move of each reply (its last ``[...]``) to the pool."""

    op: Literal["sample"]
    k: int = Field(1, ge=1, le=8)
    """How many replies (they differ only when the run samples at a temperature above 0)."""
    max_tokens: int | None = Field(None, ge=4, le=1024)
    """Reply budget of each call (the run's cap still applies); None: the run's cap."""


class VoteMoves(_Step):
    """Put first the move most replies agree on (self-consistency); ties to the earliest."""

    op: Literal["vote"]


class AvoidRefused(_Step):
    """Put first the moves the game has not already refused (seen in its invalid-move messages)."""

    op: Literal["avoid_refused"]


class ReviewMove(_Step):
    """Ask the model to check the first move against the rules; when it says wrong, ask for a better move (two calls at most)."""

    op: Literal["review"]
    max_tokens: int | None = Field(None, ge=16, le=1024)
    """Reply budget of the review call; None: the run's cap."""


MoveStep = Annotated[Think | SampleMoves | VoteMoves | AvoidRefused | ReviewMove, Field(discriminator="op")]
MOVE_OPS = ("think", "sample", "vote", "avoid_refused", "review")
MOVE_STEP_MODELS = (Think, SampleMoves, VoteMoves, AvoidRefused, ReviewMove)


def move_step_calls(step: Any) -> int:
    """Most model calls one step asks for on one move: ``sample`` k, ``think`` 1, ``review`` 2."""
    per = {"sample": lambda s: s.k, "think": lambda s: 1, "review": lambda s: 2}
    return per[step.op](step) if step.op in per else 0


class MoveSpec(BaseModel):
    """A move workflow as a list of operator steps (see the module)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    name: str = Field("moves", min_length=1, max_length=80)
    """A name for people and the archive."""
    steps: list[MoveStep] = Field(min_length=1, max_length=8)
    """The operator steps, run in order for every move."""

    def max_model_calls(self) -> int:
        """Most model calls the plan asks for on one move: ``sample`` k, ``think`` 1, ``review`` 2."""
        return sum(move_step_calls(s) for s in self.steps)

    def plan(self) -> list[dict]:
        """The steps as the plain data :func:`moveops.run_move_plan` reads."""
        return [s.model_dump(exclude_none=True) for s in self.steps]


def parse_move_spec(text: str, max_model_calls: int | None = None) -> MoveSpec:
    """A move spec from YAML or JSON text; a malformed one raises ``RatchetError`` naming the step
    and field. A plan must start with ``think`` or ``sample`` and hold a ``sample`` (no move
    otherwise); with ``max_model_calls``, a plan that may ask for more calls per move fails too."""
    raw = load_raw(text)
    try:
        spec = MoveSpec.model_validate(raw)
    except ValidationError as exc:
        raise RatchetError("move spec is invalid: " + "; ".join(describe_error(e, raw, MOVE_OPS) for e in exc.errors()),
                           hint="each step is {op: NAME, ...arguments}; ops: " + ", ".join(MOVE_OPS)) from None
    ops = [s.op for s in spec.steps]
    if ops[0] not in ("think", "sample"):
        raise RatchetError(f"move spec: step 1 is {ops[0]!r}, but there is no move until a `sample` step",
                           hint="start with {op: sample, k: N} (or a think step before it)")
    if "sample" not in ops:
        raise RatchetError("move spec has no `sample` step: it would never ask for a move", hint="add {op: sample, k: N}")
    check_cap(spec.max_model_calls(), max_model_calls, "move", "sample fewer moves or drop a think/review step")
    return spec


WORKFLOW_TEMPLATE = '''"""Move workflow {name!r}, compiled from a move spec (ratchet.workflows.movespec); edit the spec, not this file.

Each move: {summary}. At most {calls} model calls per move.
"""

from flowops import as_step
from moveops import run_move_plan

PLAN = {plan}


def workflow(task, files):
    return (yield from run_move_plan(PLAN, task, files))


step = as_step(workflow)
'''


def compile_move_spec(spec: MoveSpec) -> dict[str, str]:
    """The files of a move workflow running ``spec``: ``workflow.py`` (the games run supplies the libraries)."""
    summary = " -> ".join(s.op for s in spec.steps)
    source = WORKFLOW_TEMPLATE.format(name=spec.name, summary=summary, calls=spec.max_model_calls(),
                                      plan=pprint.pformat(spec.plan(), sort_dicts=False))
    return {"workflow.py": source}


def vote_spec(k: int, max_tokens: int | None = None) -> MoveSpec:
    """Best-of-k for games, the baseline: sample the move ``k`` times (each reply within
    ``max_tokens``, None: the run's cap), answer the majority move."""
    sample = {"op": "sample", "k": k, **({"max_tokens": max_tokens} if max_tokens else {})}
    return MoveSpec.model_validate({"name": f"vote-of-{k}", "steps": [sample, {"op": "vote"}]})


MOVE_MENU = Menu(MOVE_STEP_MODELS, ("think", "sample"), parse_move_spec, compile_move_spec, "operator_moves.md",
                 step_calls=move_step_calls, max_steps=MoveSpec.model_fields["steps"].metadata[-1].max_length,
                 required="sample", edit_template="operator_moves_edit.md")
"""The move operators of :mod:`moveops` for one-player games (``menu: ratchet.workflows.movespec:MOVE_MENU``)."""
