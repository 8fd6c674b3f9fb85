"""Proposers that search over workflows, each named by import path from an evolve config.

- :class:`OperatorProposer` (``ratchet.workflows.proposers:OperatorProposer``): a small model
  chooses and wires operators from a menu; its reply is an operator spec, checked by
  :func:`~ratchet.workflows.spec.parse_spec` against the run's call cap and compiled by
  :func:`~ratchet.workflows.spec.compile_spec`. With a model that honours GBNF grammars the reply
  is constrained to the spec's JSON form, so a 0.5B cannot answer outside the menu.
- :class:`AflowProposer` (AFlow, arXiv 2410.10762): one edit of the parent's workflow code, shown
  the parent's recorded successes and failures and its siblings' (the parent's other children's)
  outcomes, so an expansion does not repeat what its siblings already tried.
- :class:`MetaAgentProposer` (ADAS, arXiv 2408.08435): writes a new workflow from a few archive
  members (the parent and the best or randomly drawn others), never the whole archive: "Inefficiencies
  of Meta Agents" (arXiv 2510.06711) found the whole archive in context did worse than none.

Every one gives up with a :class:`~ratchet.contracts.Skip` carrying why (the parser's message for an
invalid spec), recorded like the engine's own proposers' skips.
"""

from __future__ import annotations

import ast
import importlib
import itertools
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ratchet.contracts import (
    ArchiveView,
    BudgetExceeded,
    Candidate,
    Claim,
    Message,
    Proposal,
    RatchetError,
    Skip,
)
from ratchet.evolve.proposers.base import ModelProposer, clip, pick
from ratchet.evolve.proposers.config import ModelProposerOptions
from ratchet.evolve.proposers.parsing import extract_file, parse_claim
from ratchet.models.request import continued
from ratchet.workflows.spec import CODE_MENU, STEP_MODELS, Menu

PROMPTS = Path(__file__).with_name("prompts")


# ------------------------------------------------------------------------------ shared evidence


def plan_of(workflow_source: str) -> list[dict] | None:
    """The ``PLAN`` of a workflow compiled from a spec (a literal list), None for hand-written code."""
    try:
        tree = ast.parse(workflow_source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PLAN" for t in node.targets):
            try:
                plan = ast.literal_eval(node.value)
            except ValueError:
                return None
            return plan if isinstance(plan, list) else None
    return None


def bounds(field: Any) -> tuple[Any, Any]:
    """A field's ``ge``/``le`` bounds (None where it has none)."""
    low = next((m.ge for m in field.metadata if hasattr(m, "ge")), None)
    high = next((m.le for m in field.metadata if hasattr(m, "le")), None)
    return low, high


def menu_text(models: tuple[type, ...] = STEP_MODELS) -> str:
    """One line per operator of ``models``: its name, arguments with their bounds, and what it does."""
    lines = []
    for model in models:
        op = model.model_fields["op"].annotation.__args__[0]
        args = []
        for name, field in model.model_fields.items():
            if name == "op":
                continue
            low, high = bounds(field)
            span = f" {low}..{high}" if low is not None else ""
            args.append(f"{name}{span} (default {field.default}): {field.description}")
        doc = " ".join((model.__doc__ or "").split())
        lines.append(f"- {op}: {doc}" + "".join(f"\n    - {a}" for a in args))
    return "\n".join(lines)


def step_instances(menu: Menu, max_model_calls: int | None) -> list[tuple[str, str, int]]:
    """Every step the grammar may write: ``(op, its JSON text, its model calls)``, one per value of
    each integer argument within its bounds (none above ``max_model_calls``). Optional arguments
    (``max_tokens``) are left out."""
    out = []
    for model in menu.step_models:
        op = model.model_fields["op"].annotation.__args__[0]
        ranges = []
        for name, field in model.model_fields.items():
            if name == "op" or field.default is None:
                continue
            low, high = bounds(field)
            if max_model_calls is not None:
                high = max(low, min(high, max_model_calls))
            ranges.append([(name, v) for v in range(low, high + 1)])
        for args in itertools.product(*ranges):
            step = model(op=op, **dict(args))
            text = json.dumps({"op": op, **dict(args)})
            out.append((op, text, menu.step_calls(step)))
    return out


def spec_grammar(max_model_calls: int | None = None, menu: Menu = CODE_MENU) -> str:
    """A GBNF grammar of the spec's JSON form in which every plan it allows is valid: a short name,
    then at most ``menu.max_steps`` steps from the menu, the first one of ``menu.first``, one of them
    ``menu.required``, and all together asking for at most ``max_model_calls`` model calls.

    The rules are states (calls left, steps left, required op seen): a step is offered only where
    the plan can still be finished within both. Without the budget in the grammar the 1.5B wrote
    ``sample`` thirty times until its token limit, and plans over the cap in two of five answers."""
    steps = step_instances(menu, max_model_calls)
    if max_model_calls is None:  # no cap: only the steps are counted
        steps = [(op, text, 0) for op, text, _ in steps]
    budget = max_model_calls or 0
    cheapest_required = min((c for op, _, c in steps if op == menu.required), default=None)
    rules: dict[str, str] = {}

    def finishable(calls: int, left: int, seen: bool) -> bool:
        return seen or (left >= 1 and cheapest_required is not None and cheapest_required <= calls)

    def rest(calls: int, left: int, seen: bool) -> str:
        name = f"rest-{calls}-{left}-{int(seen)}"
        if name not in rules:
            rules[name] = ""  # reserved while its alternatives are made (states only go down)
            alts = ['""'] if seen else []
            for op, text, cost in steps:
                then = (calls - cost, left - 1, seen or op == menu.required)
                if left >= 1 and cost <= calls and finishable(*then):
                    alts.append(f'", " {_literal(text)} {rest(*then)}')
            rules[name] = " | ".join(alts)
        return name

    firsts = []
    for op, text, cost in steps:
        then = (budget - cost, menu.max_steps - 1, op == menu.required)
        if op in menu.first and cost <= budget and finishable(*then):
            firsts.append(f"{_literal(text)} {rest(*then)}")
    lines = ['root ::= "{\\"name\\": \\"" name "\\", \\"steps\\": [" first "]}"',
             "name ::= [a-zA-Z0-9 _-]{1,40}",
             "first ::= " + " | ".join(firsts)]
    lines += [f"{name} ::= {body}" for name, body in rules.items()]
    return "\n".join(lines) + "\n"


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spec_in(reply: str) -> str:
    """The spec text of a reply: its fenced block if it has one, else the whole reply."""
    for lang in ("yaml", "json", "yml", ""):
        block = extract_file(reply, f"spec.{lang or 'txt'}")
        if block.text is not None and block.text.strip():
            return block.text
    return reply


def outcome_rows(archive: ArchiveView, ids: list[str], split: str) -> list[str]:
    """One line per candidate id: its status, its score on ``split`` and what it aimed at."""
    every = {c.id: c for c in archive.candidates()}
    accepted = {c.id for c in archive.candidates("accepted")}
    rows = []
    for cid in ids:
        cand = every.get(cid)
        score = archive.score(cid, split)
        claim = (cand.meta.get("claim") or {}) if cand is not None else {}
        aimed = claim.get("target", "?") if isinstance(claim, dict) else "?"
        status = "accepted" if cid in accepted else "not accepted"
        rows.append(f"- {cid}: {status}, {split} score {'?' if score is None else f'{score:.3f}'}; change: {aimed}")
    return rows


class WorkflowProposerOptions(ModelProposerOptions):
    """What the workflow proposers share."""

    surface: str = "workflow.py"
    """The workflow file the proposal writes (with the operator library beside it)."""
    score_split: str = "heldin"
    """The split whose score the model is shown for the parent and the other candidates."""
    max_successes: int = Field(default=20, ge=0)
    """Most solved task ids listed (the failures are shown with their traces, ``max_traces``)."""


class WorkflowProposer(ModelProposer):
    """Shared by the workflow proposers: their packaged prompts and evidence."""

    options: WorkflowProposerOptions

    def template(self, parent: Candidate, surface: str | None = None, default: str | None = None) -> tuple[str, str]:
        surface = surface if surface is not None else self.options.template
        if surface:
            return super().template(parent, surface, default)
        name = default or self.default_template
        return (PROMPTS / name).read_text(), f"package:workflows/{name}"

    grammar_refused = False
    """Set once the model refused a grammar: later asks go without one."""

    def ask_under(self, messages: list[Message], grammar: str | None, rng: Any) -> str:
        """One model call under ``grammar`` (a GBNF text; None: without), asked again without it when
        the backend refuses grammars (as :class:`~ratchet.contracts.Model` requires it to say), and
        without one from then on."""
        if self.ctx.model is None or grammar is None or self.grammar_refused:
            return self.ask(messages, rng)  # raises the engine's "needs a model" error without one
        seed = int(rng.random() * 2**31)
        self.asks += 1
        try:
            completion = self.ctx.model.complete(messages, temperature=self.options.temperature,
                                                 max_tokens=self.options.max_tokens, seed=seed, grammar=grammar)
        except BudgetExceeded:
            raise
        except RatchetError:
            self.grammar_refused = True
            return self.ask(messages, rng)
        return continued(messages, completion.text)

    def successes_text(self, parent: Candidate, archive: ArchiveView) -> str:
        solved = sorted({r.task_id for r in self.results(archive, parent.id) if r.score >= 1.0})
        if not solved:
            return "(no task solved by this version was recorded)"
        shown = ", ".join(solved[: self.options.max_successes])
        more = len(solved) - self.options.max_successes
        return shown + (f" (and {more} more)" if more > 0 else "")

    def score_text(self, archive: ArchiveView, cid: str) -> str:
        score = archive.score(cid, self.options.score_split)
        return "not scored" if score is None else f"{score:.3f} on {self.options.score_split}"

    def file_proposal(self, parent: Candidate, archive: ArchiveView, reply: str, prompt: str, template: str,
                      shown: tuple[str, ...] = (), **meta: Any) -> Proposal | Skip:
        """The workflow file in ``reply`` as a proposal; a skip when there is none or it changes nothing."""
        surface = self.options.surface
        new = extract_file(reply, surface)
        if new.text is None:
            return self.skip(parent, new.error or f"the reply holds no new {surface}", reply=reply)
        if new.text == parent.files.get(surface) or any(new.text == s for s in shown):
            return self.skip(parent, f"the new {surface} is identical to one the model was shown", reply=reply)
        claim, stated = self.claim(reply, [r.task_id for r in self.results(archive, parent.id)])
        files = {surface: new.text}  # the suites put the operator library beside it in the sandbox
        return self.proposal(files, claim, (parent.id,), template=template, claim_stated=stated,
                             prompt=prompt, reply=reply, **meta)


# ------------------------------------------------------------------------------ operator level


class MenuOptions(WorkflowProposerOptions):
    """What every proposer that builds plans from a domain's menu shares."""

    max_model_calls: int = Field(default=4, ge=1)
    """The run's call cap per task (the suite's ``workflow.max_model_calls``): no plan offered may ask more."""
    grammar: bool = True
    """Constrain the reply with a GBNF grammar where the model honours one (else it is asked without)."""
    menu: str = "ratchet.workflows.spec:CODE_MENU"
    """The domain's :class:`~ratchet.workflows.spec.Menu` by import path (``module:NAME``): operators,
    parser, compiler, prompts. Code by default; one-player games: ``ratchet.workflows.movespec:MOVE_MENU``."""


class OperatorOptions(MenuOptions):
    """The operator-level proposer: a spec from the menu instead of free code."""

    max_tokens: int = Field(default=400, ge=16)
    """Reply budget: a spec is short."""
    retries: int = Field(default=2, ge=0)
    """Asks again (one model call each, shown its answer and what is wrong with it) when a reply is
    not a valid spec (over the call cap, an unknown step) or is a plan the run already has. Each
    would cost the run a step for nothing: the 0.5B answered the same plan twice in a row, and the
    1.5B went over the cap in two of five answers."""


def load_menu(path: str) -> Menu:
    """The :class:`Menu` named by ``module:NAME``; a RatchetError naming the path otherwise."""
    module, _, attr = path.partition(":")
    try:
        menu = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError):
        menu = None
    if not isinstance(menu, Menu):
        raise RatchetError(f"operator proposer: menu {path!r} is not a Menu that can be imported",
                           hint="name one as module:NAME, e.g. ratchet.workflows.movespec:MOVE_MENU")
    return menu


class MenuProposer(WorkflowProposer):
    """A proposer over a domain's menu (``options.menu``), its prompt one of the menu's."""

    options: MenuOptions

    def __init__(self, options: MenuOptions, ctx: Any) -> None:
        super().__init__(options, ctx)
        self.menu = load_menu(options.menu)
        self.default_template = self.menu_prompt(self.menu)

    def menu_prompt(self, menu: Menu) -> str:
        """The packaged prompt of ``menu`` this proposer asks with."""
        return menu.template


class OperatorProposer(MenuProposer):
    """``ratchet.workflows.proposers:OperatorProposer`` (see the module)."""

    name = "operator"
    default_template = "operator.md"
    Options = OperatorOptions
    options: OperatorOptions

    def parent_spec(self, parent: Candidate) -> str:
        return parent_spec(parent, self.options.surface)

    def ask_spec(self, messages: list[Message], rng: Any) -> str:
        """One model call, grammar-constrained unless disabled or refused by the model."""
        return self.ask_under(messages, spec_grammar(self.options.max_model_calls, self.menu)
                              if self.options.grammar else None, rng)

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any) -> Proposal | Skip:
        results = self.results(archive, parent.id)
        template, source = self.template(parent)
        messages = self.fitted_request(
            template, results, spec=self.parent_spec(parent), menu=menu_text(self.menu.step_models),
            cap=self.options.max_model_calls, score=self.score_text(archive, parent.id),
            successes=self.successes_text(parent, archive), rejected=self.rejected_text(archive))
        tried = self.tried_plans(archive)
        first = messages
        asked_again: list[str] = []  # why each earlier answer of this proposal was not taken
        while True:
            reply = self.ask_spec(messages, rng)
            spec, problem = None, None
            try:
                spec = self.menu.parse(spec_in(reply), self.options.max_model_calls)
            except RatchetError as exc:
                problem = str(exc).splitlines()[0]
            if spec is not None and spec.plan() in tried:
                problem = "this run has already tried that plan"
            if problem is None or len(asked_again) >= self.options.retries:
                break
            answer = json.dumps(spec.plan()) if spec is not None else clip(spec_in(reply).strip(), 300)
            asked_again.append(f"{answer}: {problem}")
            # in the request, not as a turn of the conversation: shown its own answer as a turn, the
            # 1.5B answered it again word for word
            refused = "\n".join(f"- {p}" for p in asked_again)
            messages = [*first[:-1], {**first[-1], "content": first[-1]["content"] + "\n\n## Answers not usable "
                                      f"(answer a different plan)\n{refused}"}]
        if spec is None or problem is not None:  # out of retries: the last answer's problem
            return self.skip(parent, problem or "no spec", reply=reply, asked_again=asked_again)
        compiled = self.menu.compile(spec)
        compiled[self.options.surface] = compiled.pop("workflow.py")
        files = {k: v for k, v in compiled.items() if parent.files.get(k) != v}
        if self.options.surface not in files:
            return self.skip(parent, f"the spec {spec.name!r} compiles to the parent's own {self.options.surface}",
                             reply=reply)
        summary = " -> ".join(s.op for s in spec.steps)
        claim = parse_claim(reply, [r.task_id for r in results]) or Claim(target=f"workflow {spec.name}: {summary}")
        return self.proposal(files, claim, (parent.id,), template=source, prompt=messages[0]["content"], reply=reply,
                             spec=spec.model_dump(exclude_none=True), max_model_calls=spec.max_model_calls(),
                             grammar=self.options.grammar and not self.grammar_refused, asked_again=asked_again)

    def tried_plans(self, archive: ArchiveView) -> list[list[dict[str, Any]]]:
        return tried_plans(archive, self.options.surface)


def tried_plans(archive: ArchiveView, surface: str) -> list[list[dict[str, Any]]]:
    """The plans of every candidate the archive shows (whatever the gate said), by their steps: a
    spec's name is not part of what it does. Candidates proposed in the same round of steps are not
    shown to each other (the engine's ``before_step``), so two of them can still be the same plan."""
    plans = (plan_of(c.files.get(surface, "")) for c in archive.candidates())
    return [plan for plan in plans if plan is not None]


def parent_spec(parent: Candidate, surface: str) -> str:
    """The parent's plan as the prompt shows it; a hand-written workflow as its code."""
    plan = plan_of(parent.files.get(surface, ""))
    if plan is None:
        return (f"(the parent's {surface} is hand-written code, not a spec; its code:)\n"
                + clip(parent.files.get(surface, "(missing)"), 3000))
    return json.dumps({"name": "parent", "steps": plan})


# ------------------------------------------------------------------------------ AFlow


class AflowOptions(WorkflowProposerOptions):
    """AFlow's expansion: one edit of the parent's workflow from its successes, failures and siblings."""

    max_siblings: int = Field(default=6, ge=0)
    """Most of the parent's other children shown with their outcomes (the newest)."""
    prompt: str = "aflow.md"
    """The packaged prompt (``ratchet/workflows/prompts/``) used when ``template`` names no workspace
    file: ``aflow.md`` explains code workflows, ``aflow_moves.md`` move workflows of one-player games."""


class AflowProposer(WorkflowProposer):
    """``ratchet.workflows.proposers:AflowProposer`` (see the module)."""

    name = "aflow"
    default_template = "aflow.md"
    Options = AflowOptions
    options: AflowOptions

    def __init__(self, options: AflowOptions, ctx: Any) -> None:
        super().__init__(options, ctx)
        self.default_template = options.prompt

    def siblings_text(self, parent: Candidate, archive: ArchiveView) -> str:
        children = archive.children(parent.id)[-self.options.max_siblings:] if self.options.max_siblings else []
        return "\n".join(outcome_rows(archive, children, self.options.score_split)) or "(none yet)"

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any) -> Proposal | Skip:
        surface = self.options.surface
        if surface not in parent.files:
            return self.skip(parent, f"the parent has no {surface} to edit")
        template, source = self.template(parent)
        messages = self.fitted_request(
            template, self.results(archive, parent.id), surface_path=surface, surface=parent.files[surface],
            score=self.score_text(archive, parent.id), successes=self.successes_text(parent, archive),
            siblings=self.siblings_text(parent, archive), rejected=self.rejected_text(archive))
        reply = self.ask(messages, rng)
        return self.file_proposal(parent, archive, reply, messages[0]["content"], source,
                                  siblings=list(archive.children(parent.id)))


# ------------------------------------------------------------------------------ ADAS meta agent


class MetaAgentOptions(WorkflowProposerOptions):
    """ADAS's meta agent over a few archive members rather than the whole archive."""

    members: int = Field(default=3, ge=1, le=8)
    """Archive members shown: the parent (the selector's choice) and ``members - 1`` others."""
    others: Literal["best", "random"] = "best"
    """How the others are chosen among the accepted candidates: the best by ``score_split``, or a
    uniform draw (the parent itself already comes from the run's selector)."""
    max_member_chars: int = Field(default=3000, ge=200)
    """Longest workflow code shown per member (head and tail kept)."""
    reflections: int = Field(default=0, ge=0, le=2)
    """ADAS's self-reflection rounds: after the design, ask this many times (one call each, in the
    same conversation) to check it for errors and give the corrected file; the last reply that holds
    a file is proposed. ADAS uses 2; 0 keeps a small model's budget for more designs."""


class MetaAgentProposer(WorkflowProposer):
    """``ratchet.workflows.proposers:MetaAgentProposer`` (see the module)."""

    name = "meta_agent"
    default_template = "meta_agent.md"
    Options = MetaAgentOptions
    options: MetaAgentOptions

    def chosen(self, parent: Candidate, archive: ArchiveView, rng: Any) -> list[Candidate]:
        """The parent first, then the others (never the whole archive unless it is that small)."""
        rest = [c for c in archive.candidates("accepted") if c.id != parent.id and self.options.surface in c.files]
        want = self.options.members - 1
        if self.options.others == "best":
            rest.sort(key=lambda c: -(archive.score(c.id, self.options.score_split) or 0.0))  # stable: oldest on ties
            return [parent] + rest[:want]
        picked: list[Candidate] = []
        while rest and len(picked) < want:
            one = pick(rng, rest)
            picked.append(one)
            rest.remove(one)
        return [parent] + picked

    def members_text(self, members: list[Candidate], archive: ArchiveView) -> str:
        parts = []
        for i, cand in enumerate(members, 1):
            code = clip(cand.files.get(self.options.surface, ""), self.options.max_member_chars)
            parts.append(f"### workflow {i} ({cand.id}, score {self.score_text(archive, cand.id)})\n```python\n{code}\n```")
        return "\n\n".join(parts)

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any) -> Proposal | Skip:
        if self.options.surface not in parent.files:
            return self.skip(parent, f"the parent has no {self.options.surface} to learn from")
        members = self.chosen(parent, archive, rng)
        template, source = self.template(parent)
        messages = self.fitted_request(
            template, self.results(archive, parent.id), surface_path=self.options.surface,
            members=self.members_text(members, archive), rejected=self.rejected_text(archive))
        replies = [self.ask(messages, rng)]
        reflect, _ = self.template(parent, None, "meta_agent_reflect.md")
        for _ in range(self.options.reflections):
            messages = [*messages, {"role": "assistant", "content": replies[-1]},
                        *self.render(reflect, surface_path=self.options.surface)]
            replies.append(self.ask(messages, rng))
        # the last reply holding a file wins; a reflection that dropped the file keeps the one before
        reply = next((r for r in reversed(replies) if extract_file(r, self.options.surface).text is not None), replies[0])
        shown = tuple(c.files[self.options.surface] for c in members)
        return self.file_proposal(parent, archive, reply, messages[0]["content"], source, shown=shown,
                                  shown_members=[c.id for c in members], reflections=replies[1:])
