"""The workflow proposers with the scripted model: what each shows the model, what it proposes,
and how it gives up (a Skip carrying the reason, recorded)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from windowed import SmallWindow

from ratchet.contracts import (
    BudgetExceeded,
    Candidate,
    Failure,
    Proposal,
    Proposer,
    RatchetError,
    Skip,
    TaskResult,
)
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import Manifest
from ratchet.models.scripted import ScriptedModel
from ratchet.workflows import compile_spec, parse_spec
from ratchet.workflows.proposers import (
    AflowOptions,
    AflowProposer,
    MetaAgentOptions,
    MetaAgentProposer,
    OperatorOptions,
    OperatorProposer,
    load_menu,
    plan_of,
    spec_grammar,
)

HAND = "def step(state):\n    return {'answer': 'x'}\n"
BEST_OF_2 = compile_spec(parse_spec("name: best-of-2\nsteps: [{op: sample, k: 2}, {op: select_by_examples}]"))


class Run:
    def __init__(self) -> None:
        self.records: list[tuple[str, dict]] = []

    def append_jsonl(self, relpath: str, record: dict) -> None:
        self.records.append((relpath, record))


class Archive:
    """ArchiveView over dicts: statuses, held-in scores, search results with traces."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[Candidate, str]] = {}
        self.scores: dict[str, float] = {}
        self.search: dict[str, list[TaskResult]] = {}

    def add(self, files: dict[str, str], status: str = "accepted", parent: str | None = None, score: float | None = None,
            target: str = "", **per_task: float) -> Candidate:
        c = Candidate.from_files("wf", files, parent, claim={"target": target})
        self.items[c.id] = (c, status)
        if score is not None:
            self.scores[c.id] = score
        self.search[c.id] = [TaskResult(t, 0, s, trace=f"trace of {t}",
                                        failures=() if s >= 1 else (Failure("test_failed", f"{t} wrong answer", t),))
                             for t, s in per_task.items()]
        return c

    def candidates(self, status=None):
        return [c for c, s in self.items.values() if status is None or s == status]

    def results(self, cid, split):
        return self.search.get(cid, []) if split == "search" else []

    def score(self, cid, split):
        return self.scores.get(cid) if split == "heldin" else None

    def children(self, cid):
        return [c.id for c, _ in self.items.values() if c.parent_id == cid]

    def rejected(self, limit=10):
        return []

    def unusable(self, limit=None):
        return []


def ctx_with(tmp_path: Path, model) -> EngineContext:
    manifest = Manifest(name="wf", editable=["workflow.py", "prompts/*.md"], protected=["evolve.yaml"])
    return EngineContext(manifest, tmp_path, model=model, run=Run())


def prompt_of(model: ScriptedModel, i: int = 0) -> str:
    return model.calls[i]["messages"][0]["content"]


def test_every_workflow_proposer_satisfies_the_protocol(tmp_path) -> None:
    ctx = ctx_with(tmp_path, ScriptedModel([]))
    for proposer in (OperatorProposer(OperatorOptions(), ctx), AflowProposer(AflowOptions(), ctx),
                     MetaAgentProposer(MetaAgentOptions(), ctx)):
        assert isinstance(proposer, Proposer)


# ------------------------------------------------------------------------------ operator level


def test_operator_proposer_shows_spec_menu_failures_and_proposes_the_compiled_spec(tmp_path) -> None:
    reply = json.dumps({"name": "sample-revise", "steps": [{"op": "sample", "k": 2}, {"op": "strip_tests"},
                                                          {"op": "select_by_examples"}, {"op": "revise", "rounds": 1}]})
    model = ScriptedModel([reply])
    archive = Archive()
    parent = archive.add(BEST_OF_2, score=0.4, t1=1.0, t2=0.0)
    out = OperatorProposer(OperatorOptions(max_model_calls=3), ctx_with(tmp_path, model)).propose(
        parent, archive, random.Random(0))
    assert isinstance(out, Proposal)
    prompt = prompt_of(model)
    assert '"op": "sample", "k": 2' in prompt and "select_by_examples" in prompt  # the parent's spec
    assert "- revise:" in prompt and "rounds 1..3" in prompt  # the menu with bounds
    assert "t2 wrong answer" in prompt and "t1" in prompt.split("solved")[1]  # failures and successes
    assert "at most 3 model calls" in prompt
    assert model.calls[0]["params"]["grammar"] == spec_grammar(3)
    expected = compile_spec(parse_spec(reply))
    assert out.files == {"workflow.py": expected["workflow.py"]}  # the library is unchanged: not re-sent
    assert plan_of(out.files["workflow.py"])[-1] == {"op": "revise", "rounds": 1}
    assert out.claim.target == "workflow sample-revise: sample -> strip_tests -> select_by_examples -> revise"
    assert out.meta["max_model_calls"] == 3


def test_operator_proposer_skips_with_the_parsers_message(tmp_path) -> None:
    too_costly = '{"name": "x", "steps": [{"op": "sample", "k": 4}, {"op": "review"}]}'
    model = ScriptedModel(["steps: [{op: smaple, k: 2}]", too_costly])
    archive = Archive()
    parent = archive.add(BEST_OF_2)
    ctx = ctx_with(tmp_path, model)
    proposer = OperatorProposer(OperatorOptions(max_model_calls=4, retries=0), ctx)
    first = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(first, Skip) and "step 1: unknown op 'smaple'" in first.reason
    second = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(second, Skip) and "6 model calls per task, more than the run's cap of 4" in second.reason
    assert [r["reason"] for _, r in ctx.run.records] == [first.reason, second.reason]


def test_operator_proposer_asks_again_with_the_parsers_message(tmp_path) -> None:
    too_costly = '{"name": "x", "steps": [{"op": "sample", "k": 4}, {"op": "review"}]}'
    fits = '{"name": "x", "steps": [{"op": "sample", "k": 3}, {"op": "vote"}]}'
    model = ScriptedModel(["steps: [{op: smaple, k: 2}]", too_costly, fits])
    archive = Archive()
    parent = archive.add(BEST_OF_2)
    out = OperatorProposer(OperatorOptions(max_model_calls=4), ctx_with(tmp_path, model)).propose(
        parent, archive, random.Random(0))
    assert isinstance(out, Proposal) and plan_of(out.files["workflow.py"]) == [{"op": "sample", "k": 3}, {"op": "vote"}]
    first, second = out.meta["asked_again"]
    assert "unknown op 'smaple'" in first and "more than the run's cap of 4" in second
    last = model.calls[2]["messages"][-1]["content"]
    assert "## Answers not usable" in last and "smaple" in last and "cap of 4" in last
    assert [m["role"] for m in model.calls[2]["messages"]] == [m["role"] for m in model.calls[0]["messages"]]
    # out of retries, the last answer's problem is the skip's reason
    model = ScriptedModel([too_costly], cycle=True)
    out = OperatorProposer(OperatorOptions(max_model_calls=4), ctx_with(tmp_path, model)).propose(
        parent, archive, random.Random(0))
    assert isinstance(out, Skip) and "cap of 4" in out.reason and len(model.calls) == 3


def test_operator_proposer_skips_a_spec_equal_to_the_parent_and_reads_fenced_yaml(tmp_path) -> None:
    # the parent's plan under another name is a plan the run has: asked again (twice), then skipped
    model = ScriptedModel(["Here:\n```yaml\nname: best-of-2\nsteps: [{op: sample, k: 2}, {op: select_by_examples}]\n```\n"],
                          cycle=True)
    archive = Archive()
    parent = archive.add(BEST_OF_2)
    out = OperatorProposer(OperatorOptions(), ctx_with(tmp_path, model)).propose(parent, archive, random.Random(0))
    assert isinstance(out, Skip) and "already tried that plan" in out.reason
    assert len(model.calls) == 3
    out = OperatorProposer(OperatorOptions(retries=0), ctx_with(tmp_path, model)).propose(parent, archive, random.Random(0))
    assert isinstance(out, Skip) and len(model.calls) == 4
    # with nothing in the archive to repeat, the parent's own plan is still caught when compiled
    elsewhere = Archive().add(BEST_OF_2)
    out = OperatorProposer(OperatorOptions(), ctx_with(tmp_path, model)).propose(elsewhere, Archive(), random.Random(0))
    assert isinstance(out, Skip) and "compiles to the parent's own workflow.py" in out.reason


def test_operator_proposer_asks_again_when_the_plan_was_already_tried(tmp_path) -> None:
    tried = '{"name": "fresh-name", "steps": [{"op": "sample", "k": 2}, {"op": "strip_tests"}, {"op": "select_by_examples"}]}'
    other = '{"name": "vote-4", "steps": [{"op": "sample", "k": 4}, {"op": "vote"}]}'
    model = ScriptedModel([tried, other])
    archive = Archive()
    parent = archive.add(BEST_OF_2)
    rejected = compile_spec(parse_spec(tried.replace("fresh-name", "old-name")))
    archive.add(rejected, status="rejected")  # another name, the same steps: the same plan
    out = OperatorProposer(OperatorOptions(), ctx_with(tmp_path, model)).propose(parent, archive, random.Random(0))
    assert isinstance(out, Proposal) and plan_of(out.files["workflow.py"]) == [{"op": "sample", "k": 4}, {"op": "vote"}]
    assert out.meta["asked_again"] == ['[{"op": "sample", "k": 2}, {"op": "strip_tests"}, {"op": "select_by_examples"}]: '
                                       "this run has already tried that plan"]
    again = model.calls[1]["messages"]
    assert len(again) == len(model.calls[0]["messages"])  # the same request, with the refused answer in it
    assert again[-1]["content"].startswith(model.calls[0]["messages"][-1]["content"])
    assert again[-1]["content"].endswith("- " + out.meta["asked_again"][0])


def test_operator_proposer_from_hand_written_code_falls_back_without_grammar(tmp_path) -> None:
    class NoGrammar(ScriptedModel):
        def complete(self, messages, **kw):
            if kw.get("grammar") is not None:
                raise RatchetError("this backend cannot honour a GBNF grammar")
            return super().complete(messages, **kw)

    model = NoGrammar(['[{"op": "sample", "k": 3}, {"op": "vote"}]'] * 2)
    archive = Archive()
    parent = archive.add({"workflow.py": HAND})
    proposer = OperatorProposer(OperatorOptions(), ctx_with(tmp_path, model))
    out = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(out, Proposal) and set(out.files) == {"workflow.py"}  # no library copy: the suite supplies it
    assert "hand-written code" in prompt_of(model) and HAND.strip() in prompt_of(model)
    assert proposer.grammar_refused and out.meta["grammar"] is False
    assert proposer.propose(parent, archive, random.Random(0))  # later asks skip the grammar at once
    assert [c["params"].get("grammar") for c in model.calls] == [None, None]


def test_operator_proposer_lets_a_budget_stop_through(tmp_path) -> None:
    class Spent(ScriptedModel):
        def complete(self, messages, **kw):
            raise BudgetExceeded("budget spent")

    archive = Archive()
    with pytest.raises(BudgetExceeded):
        OperatorProposer(OperatorOptions(), ctx_with(tmp_path, Spent([]))).propose(
            archive.add(BEST_OF_2), archive, random.Random(0))


def walk(grammar: str, rng: random.Random) -> str:
    """A random spec the grammar allows: from ``first``, one alternative at a time to an empty one."""
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines())
    text, rule = [], "first"
    while rule:
        alt = rng.choice(rules[rule].split(" | "))
        text += [json.loads(f'"{lit}"') for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', alt)]
        rule = alt.split()[-1] if alt.split()[-1].startswith("rest-") else None
    return '{"name": "w", "steps": [' + "".join(text) + "]}"


@pytest.mark.parametrize("menu_name", ["ratchet.workflows.spec:CODE_MENU", "ratchet.workflows.movespec:MOVE_MENU"])
@pytest.mark.parametrize("cap", [1, 2, 4, None])
def test_every_plan_the_spec_grammar_allows_is_valid_and_within_the_cap(menu_name, cap) -> None:
    # The 1.5B under the old grammar (any number of steps, each within the cap) wrote thirty samples
    # to its token limit and plans over the cap; now the grammar's plans are exactly the valid ones.
    menu = load_menu(menu_name)
    grammar = spec_grammar(cap, menu)
    rng = random.Random(0)
    plans = [menu.parse(walk(grammar, rng), cap) for _ in range(300)]  # raises on an invalid one
    assert all(len(p.steps) <= menu.max_steps and p.steps[0].op in menu.first for p in plans)
    assert all(any(s.op == menu.required for s in p.steps) for p in plans)
    if cap is not None:
        assert max(p.max_model_calls() for p in plans) == cap  # the whole budget is reachable
    if cap is None or cap >= 4:  # room for every op beside a sample (review costs 2)
        ops = {s.op for p in plans for s in p.steps}
        assert ops == {m.model_fields["op"].annotation.__args__[0] for m in menu.step_models}
    llama_cpp = pytest.importorskip("llama_cpp")
    llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)  # raises on a malformed grammar


def test_spec_grammar_offers_no_argument_above_the_cap() -> None:
    assert '\\"k\\": 3' not in spec_grammar(2) and '\\"k\\": 2' in spec_grammar(2)
    assert len(spec_grammar(4).splitlines()) < 200  # states of (calls left, steps left, sample seen)


# ------------------------------------------------------------------------------ AFlow


def test_aflow_shows_successes_failures_and_siblings_and_proposes_one_edit(tmp_path) -> None:
    new = HAND.replace("'x'", "'y'")
    model = ScriptedModel([f"TARGET: t2 returns x\nROOT CAUSE: constant answer\n```python\n{new}```\n"])
    archive = Archive()
    parent = archive.add({"workflow.py": HAND}, score=0.5, t1=1.0, t2=0.0)
    archive.add({"workflow.py": HAND + "# a\n"}, status="rejected", parent=parent.id, score=0.3, target="add a vote")
    archive.add({"workflow.py": HAND + "# b\n"}, parent=parent.id, score=0.6, target="sample twice")
    out = AflowProposer(AflowOptions(), ctx_with(tmp_path, model)).propose(parent, archive, random.Random(0))
    assert isinstance(out, Proposal) and out.files == {"workflow.py": new}
    assert out.claim.target == "t2 returns x" and out.parents == (parent.id,)
    prompt = prompt_of(model)
    assert "score 0.500 on heldin" in prompt and "t2 wrong answer" in prompt
    assert "not accepted, heldin score 0.300; change: add a vote" in prompt
    assert "accepted, heldin score 0.600; change: sample twice" in prompt
    assert len(out.meta["siblings"]) == 2


def test_aflow_skips_an_unchanged_or_missing_file(tmp_path) -> None:
    archive = Archive()
    parent = archive.add({"workflow.py": HAND})
    same = AflowProposer(AflowOptions(), ctx_with(tmp_path, ScriptedModel([f"```python\n{HAND}```"]))).propose(
        parent, archive, random.Random(0))
    assert isinstance(same, Skip) and "identical" in same.reason
    none = AflowProposer(AflowOptions(), ctx_with(tmp_path, ScriptedModel(["I would add a vote."]))).propose(
        parent, archive, random.Random(0))
    assert isinstance(none, Skip) and none.reason
    other = archive.add({"prompts/system.md": "x"})
    assert "has no workflow.py" in AflowProposer(AflowOptions(), ctx_with(tmp_path, ScriptedModel([]))).propose(
        other, archive, random.Random(0)).reason


def test_a_request_shows_fewer_failures_until_it_fits_the_window_and_says_when_none_does(tmp_path) -> None:
    """Measured: the 1.5B proposer's AFlow request was 3,415 tokens of a 4,096 window, so its
    whole-file reply was cut at 681 tokens, never closing its code block (2 of 2 AFlow steps)."""
    new = HAND.replace("'x'", "'y'")
    archive = Archive()
    parent = archive.add({"workflow.py": HAND}, score=0.0, **{f"t{i}": 0.0 for i in range(6)})
    reply = f"TARGET: t1\n```python\n{new}```\n"
    wide = SmallWindow([reply], 100_000)
    AflowProposer(AflowOptions(max_tokens=300), ctx_with(tmp_path, wide)).propose(parent, archive, random.Random(0))
    whole = wide.count_tokens(wide.calls[0]["messages"])
    narrow = SmallWindow([reply], whole + 300 - 20)
    out = AflowProposer(AflowOptions(max_tokens=300), ctx_with(tmp_path, narrow)).propose(parent, archive, random.Random(0))
    assert isinstance(out, Proposal) and out.files == {"workflow.py": new}
    assert narrow.count_tokens(narrow.calls[0]["messages"]) + 300 <= narrow.context_tokens
    assert 0 < prompt_of(narrow).count("### task ") < prompt_of(wide).count("### task ")
    unfitted = SmallWindow([reply], whole + 300 - 20)
    AflowProposer(AflowOptions(max_tokens=300, fit_context=False), ctx_with(tmp_path, unfitted)).propose(
        parent, archive, random.Random(0))
    assert prompt_of(unfitted) == prompt_of(wide)
    with pytest.raises(RatchetError, match=r"proposer 'aflow': its shortest request is \d+ tokens") as err:
        AflowProposer(AflowOptions(max_tokens=300), ctx_with(tmp_path, SmallWindow([reply], 320))).propose(
            parent, archive, random.Random(0))
    assert "?n_ctx=8192" in err.value.hint


# ------------------------------------------------------------------------------ ADAS meta agent


def test_meta_agent_sees_only_a_few_members_best_first(tmp_path) -> None:
    archive = Archive()
    members = [archive.add({"workflow.py": HAND + f"# v{i}\n"}, score=i / 10) for i in range(6)]
    new = "from flowops import as_step\n\ndef step(state):\n    return {'answer': 'z'}\n"
    model = ScriptedModel([f"TARGET: combine v5 and v4\n```python\n{new}```"])
    out = MetaAgentProposer(MetaAgentOptions(members=3), ctx_with(tmp_path, model)).propose(
        members[1], archive, random.Random(0))
    assert isinstance(out, Proposal)
    assert out.meta["shown_members"] == [members[1].id, members[5].id, members[4].id]
    prompt = prompt_of(model)
    assert "# v1" in prompt and "# v5" in prompt and "# v4" in prompt
    assert "# v3" not in prompt and "# v0" not in prompt  # not the whole archive
    assert set(out.files) == {"workflow.py"}  # it imports flowops, which the suite supplies


def test_meta_agent_random_others_and_skips_a_copy_of_a_member(tmp_path) -> None:
    archive = Archive()
    members = [archive.add({"workflow.py": HAND + f"# v{i}\n"}, score=i / 10) for i in range(6)]
    model = ScriptedModel([f"```python\n{members[3].files['workflow.py']}```"] * 2)
    proposer = MetaAgentProposer(MetaAgentOptions(members=2, others="random"), ctx_with(tmp_path, model))
    picks = {proposer.chosen(members[0], archive, random.Random(s))[1].id for s in range(30)}
    assert len(picks) > 2 and members[0].id not in picks
    out = MetaAgentProposer(MetaAgentOptions(members=6), ctx_with(tmp_path, model)).propose(
        members[0], archive, random.Random(0))
    assert isinstance(out, Skip) and "identical to one the model was shown" in out.reason


@pytest.mark.real_model
def test_the_embedded_model_answers_a_spec_under_the_grammar(tmp_path) -> None:
    """The 0.5B, constrained by the grammar, answers a spec the parser reads within the call cap
    (what it chooses is not asserted; only a plan the run already holds, asked again twice, may
    leave it without a proposal)."""
    from ratchet.models.spec import load_model

    model = load_model("local:qwen2.5-coder-0.5b", threads=1)
    archive = Archive()
    parent = archive.add(BEST_OF_2, score=0.4, t1=1.0, t2=0.0)
    out = OperatorProposer(OperatorOptions(max_model_calls=4), ctx_with(tmp_path, model)).propose(
        parent, archive, random.Random(0))
    assert isinstance(out, Proposal) or "already tried" in out.reason, out
    if isinstance(out, Proposal):
        assert 1 <= out.meta["max_model_calls"] <= 4 and not any("cap" in a for a in out.meta["asked_again"])


def test_meta_agent_reflects_in_the_same_conversation_and_keeps_the_last_file(tmp_path) -> None:
    archive = Archive()
    parent = archive.add({"workflow.py": HAND}, score=0.5)
    first, fixed = HAND.replace("'x'", "'y'"), HAND.replace("'x'", "'z'")
    model = ScriptedModel([f"TARGET: y\n```python\n{first}```", f"TARGET: z\n```python\n{fixed}```"])
    out = MetaAgentProposer(MetaAgentOptions(reflections=1), ctx_with(tmp_path, model)).propose(
        parent, archive, random.Random(0))
    assert isinstance(out, Proposal) and out.files == {"workflow.py": fixed}
    second = model.calls[1]["messages"]
    assert second[1]["role"] == "assistant" and first in second[1]["content"]
    assert second[2]["role"] == "user"
    assert "Check the workflow you just wrote" in second[2]["content"]
    model = ScriptedModel([f"```python\n{first}```", "It looks right to me."])  # the reflection drops the file
    out = MetaAgentProposer(MetaAgentOptions(reflections=1), ctx_with(tmp_path, model)).propose(
        parent, archive, random.Random(0))
    assert isinstance(out, Proposal) and out.files == {"workflow.py": first} and len(model.calls) == 2
