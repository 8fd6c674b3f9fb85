"""Proposers with the scripted model: every proposer, the diff fallback, unusable replies, claims."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ratchet.contracts import Candidate, Decision, Proposal, Proposer, RatchetError, Skip, TaskResult
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import Manifest
from ratchet.evolve.proposers.agentic import AgenticProposer, AgentOutcome, AgentTask, ToolError
from ratchet.evolve.proposers.base import NO_CLAIM, SKIPS_FILE, clip
from ratchet.evolve.proposers.config import (
    AgenticOptions,
    ControlOptions,
    DiffOptions,
    MergeOptions,
    ReflectiveOptions,
)
from ratchet.evolve.proposers.controls import CosmeticProposer, NoopProposer
from ratchet.evolve.proposers.diff import DiffProposer
from ratchet.evolve.proposers.merge import MergeProposer
from ratchet.evolve.proposers.mutation import AutofixOptions, AutofixProposer, MutationOptions, MutationProposer
from ratchet.evolve.proposers.parsing import apply_blocks, extract_file, parse_blocks, parse_claim
from ratchet.evolve.proposers.reflective import ReflectiveProposer
from ratchet.models.scripted import ScriptedModel

from doubles import Archive

WORKFLOW = "def step(state):\n    return {'answer': 'x'}\n"
PROMPT = "You write Python.\n"


class Run:
    """What a proposer writes to the run store: skip records."""

    def __init__(self) -> None:
        self.records: list[tuple[str, dict]] = []

    def append_jsonl(self, relpath: str, record: dict) -> None:
        self.records.append((relpath, record))


def make_ctx(tmp_path: Path, model: ScriptedModel | None, **extra) -> EngineContext:
    manifest = Manifest(name="coder", editable=["workflow.py", "prompts/*.md", "proposer/*.md"],
                        protected=["evolve.yaml"])
    return EngineContext(manifest, tmp_path, model=model, run=Run(), extra=extra)


def root() -> Candidate:
    return Candidate.from_files("coder", {"workflow.py": WORKFLOW, "prompts/system.md": PROMPT})


def fenced(text: str, lang: str = "python") -> str:
    return f"```{lang}\n{text}```\n"


CLAIM = "TARGET: t2 fails on empty input\nROOT CAUSE: no check for []\nFLIPS: t2, t9\n"
NEW_WORKFLOW = "def step(state):\n    return {'answer': 'y'}\n"


def only_workflow() -> list[str]:
    return ["workflow.py"]


def test_every_proposer_satisfies_the_protocol(tmp_path) -> None:
    ctx = make_ctx(tmp_path, ScriptedModel([]), agent_runtime=object())
    for proposer in (ReflectiveProposer(ReflectiveOptions(), ctx), DiffProposer(DiffOptions(), ctx),
                     MergeProposer(MergeOptions(), ctx), AgenticProposer(AgenticOptions(), ctx),
                     NoopProposer(ControlOptions(), ctx), CosmeticProposer(ControlOptions(), ctx),
                     MutationProposer(MutationOptions(), ctx), AutofixProposer(AutofixOptions(), ctx)):
        assert isinstance(proposer, Proposer)


# ------------------------------------------------------------------------------------ reflective


def test_reflective_rewrites_one_surface_from_failures_and_rejections(tmp_path) -> None:
    model = ScriptedModel([CLAIM + fenced(NEW_WORKFLOW)])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(root(), t1=1.0, t2=0.0, t3=0.0)
    bad = Candidate.from_files("coder", {"workflow.py": "pass\n"}, parent.id,
                               claim={"target": "speed"}, proposal={"surfaces": ["workflow.py"]})
    archive.rejects.append((bad, Decision(False, "held-in 0.30 vs parent 0.33: inside the noise")))
    proposal = ReflectiveProposer(ReflectiveOptions(surfaces=only_workflow()), ctx).propose(
        parent, archive, random.Random(0))
    assert isinstance(proposal, Proposal)
    assert proposal.files == {"workflow.py": NEW_WORKFLOW}
    assert proposal.parents == (parent.id,) and proposal.proposer == "reflective"
    # t9 is not a task the model could know: it is not kept as a prediction
    assert proposal.claim.target == "t2 fails on empty input" and proposal.claim.predicted_flips == ("t2",)
    prompt = model.calls[0]["messages"][0]["content"]
    assert "trace of t2: got 0.0" in prompt and "t2 assertion failed" in prompt
    assert "trace of t1" not in prompt  # passing tasks are not shown as failures
    assert "inside the noise" in prompt and "speed" in prompt
    assert WORKFLOW in prompt


def test_reflective_unparseable_reply_is_none_with_a_recorded_reason(tmp_path) -> None:
    model = ScriptedModel(["I think the code is fine as it is.", "Still fine."])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(root(), t1=0.0)
    proposer = ReflectiveProposer(ReflectiveOptions(surfaces=only_workflow()), ctx)
    skip = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(skip, Skip)
    # one format retry (the default), then given up with both asks' reasons
    assert len(model.calls) == 2 and proposer.asks == 2
    assert skip.reason.startswith("first reply: the reply holds no fenced block")
    assert "format retry 1: the reply holds no fenced block" in skip.reason
    assert [a["ask"] for a in skip.attempts] == ["first reply", "format retry 1"]
    assert skip.claim is None
    [(path, record)] = ctx.run.records
    assert path == SKIPS_FILE and record["proposer"] == "reflective" and record["parent"] == parent.id
    assert "code is fine" in record["reply"] and "Still fine" in record["retries"]


def test_reflective_cut_off_reply_is_refused(tmp_path) -> None:
    """Cut off at its token limit ("length"), an open block is a file cut short: refused."""
    ctx = make_ctx(tmp_path, ScriptedModel([CLAIM + "```python\ndef step(state):\n    return {'answer': 'a long line'}\n"]))
    archive = Archive()
    parent = archive.add(root(), t1=0.0)
    proposer = ReflectiveProposer(ReflectiveOptions(surfaces=only_workflow(), format_retries=0, max_tokens=30), ctx)
    skip = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(skip, Skip)
    assert "never closed" in skip.reason


def test_a_reply_that_ended_with_its_block_open_is_taken_to_its_end(tmp_path) -> None:
    """Ended by the model ("stop"), an open last block runs to the reply's end: the 1.5B left the
    closing fence out of a new system prompt, and the step was lost as cut off."""
    prompt = "You write Python.\nWrite the function in one ```python code block.\nTrace the examples first.\n"
    ctx = make_ctx(tmp_path, ScriptedModel([CLAIM + "```markdown\n" + prompt]))
    archive = Archive()
    parent = archive.add(root(), t1=0.0)
    proposer = ReflectiveProposer(ReflectiveOptions(surfaces=["prompts/system.md"], format_retries=0), ctx)
    assert proposer.propose(parent, archive, random.Random(0)).files == {"prompts/system.md": prompt}


def test_reflective_change_without_a_claim_still_counts(tmp_path) -> None:
    ctx = make_ctx(tmp_path, ScriptedModel([fenced(NEW_WORKFLOW)]))
    archive = Archive()
    parent = archive.add(root(), t1=0.0)
    proposal = ReflectiveProposer(ReflectiveOptions(surfaces=only_workflow()), ctx).propose(
        parent, archive, random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.claim.target == NO_CLAIM and proposal.meta["claim_stated"] is False


def test_proposer_prompt_read_from_the_candidate_surface_then_workspace(tmp_path) -> None:
    model = ScriptedModel([CLAIM + fenced(NEW_WORKFLOW)] * 2)
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    options = ReflectiveOptions(surfaces=only_workflow(), template="proposer/reflective.md")
    (tmp_path / "proposer").mkdir()
    (tmp_path / "proposer" / "reflective.md").write_text("WORKSPACE TEMPLATE for $surface_path")
    parent = archive.add(root(), t1=0.0)
    proposal = ReflectiveProposer(options, ctx).propose(parent, archive, random.Random(0))
    assert model.calls[0]["messages"][0]["content"] == "WORKSPACE TEMPLATE for workflow.py"
    assert proposal.meta["template"] == "workspace:proposer/reflective.md"
    evolved = Candidate.from_files("coder", {**parent.files, "proposer/reflective.md": "EVOLVED {x} $failures"})
    archive.add(evolved, t1=0.0)
    ReflectiveProposer(options, ctx).propose(evolved, archive, random.Random(0))
    assert model.calls[1]["messages"][0]["content"].startswith("EVOLVED {x} ### task t1")


def test_the_humaneval_coder_instructions_template_renders_every_field(tmp_path) -> None:
    """examples/humaneval-coder/proposer/reflective.md, the reflective request written for a system
    prompt: every placeholder filled, the prompt and the failures shown, the reply read as the file."""
    shipped = Path(__file__).resolve().parents[2] / "examples" / "humaneval-coder" / "proposer" / "reflective.md"
    new_prompt = "You write Python.\nTrace the docstring's examples by hand before you answer.\n"
    model = ScriptedModel([CLAIM + fenced(new_prompt, "markdown")])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(Candidate.from_files("coder", {**root().files, "proposer/reflective.md": shipped.read_text()}),
                         t1=0.0)
    options = ReflectiveOptions(surfaces=["prompts/system.md"], template="proposer/reflective.md")
    proposal = ReflectiveProposer(options, ctx).propose(parent, archive, random.Random(0))
    asked = model.calls[0]["messages"][0]["content"]
    assert "$" not in asked and PROMPT.strip() in asked and "### task t1" in asked and "TARGET:" in asked
    assert proposal.files == {"prompts/system.md": new_prompt} and proposal.meta["template"] == "candidate:proposer/reflective.md"


def test_the_proposer_prompt_itself_can_be_the_surface_changed(tmp_path) -> None:
    new_prompt = "Improve $surface_path. $failures $claim_format\n"
    ctx = make_ctx(tmp_path, ScriptedModel([CLAIM + fenced(new_prompt, "markdown")]))
    archive = Archive()
    parent = archive.add(Candidate.from_files("coder", {**root().files, "proposer/reflective.md": "old\n"}), t1=0.0)
    proposal = ReflectiveProposer(ReflectiveOptions(surfaces=["proposer/*"]), ctx).propose(
        parent, archive, random.Random(0))
    assert proposal.files == {"proposer/reflective.md": new_prompt}


# ------------------------------------------------------------------------------------ diff


def diff_reply(search: str, replace: str) -> str:
    return CLAIM + f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_diff_applies_search_replace_blocks(tmp_path) -> None:
    model = ScriptedModel([diff_reply("    return {'answer': 'x'}\n", "    return {'answer': 'y'}\n")])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(root(), t1=1.0, t2=0.0)
    proposal = DiffProposer(DiffOptions(surfaces=only_workflow()), ctx).propose(parent, archive, random.Random(0))
    assert proposal.files == {"workflow.py": NEW_WORKFLOW}
    assert proposal.meta["applied"] is True and "fallback" not in proposal.meta and len(model.calls) == 1
    assert proposal.claim.predicted_flips == ("t2",)


def test_diff_falls_back_to_a_whole_file_rewrite_when_a_block_does_not_apply(tmp_path) -> None:
    model = ScriptedModel([diff_reply("    return {'answer': 'z'}\n", "    return 1\n"),
                           "TARGET: t2 fails\nFLIPS: t2\n" + fenced(NEW_WORKFLOW)])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(root(), t2=0.0)
    proposal = DiffProposer(DiffOptions(surfaces=only_workflow()), ctx).propose(parent, archive, random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.files == {"workflow.py": NEW_WORKFLOW}
    assert proposal.meta["applied"] is False and proposal.meta["fallback"] == "package:rewrite_after_diff.md"
    assert "not in the file" in proposal.meta["diff_error"]
    second = model.calls[1]["messages"][0]["content"]
    assert "could not be\napplied" in second and "'answer': 'z'" in second  # it sees its failed edit
    assert proposal.claim.target == "t2 fails"


def test_diff_without_fallback_gives_up_with_the_reason(tmp_path) -> None:
    ctx = make_ctx(tmp_path, ScriptedModel([diff_reply("nothing like it\n", "x\n")]))
    archive = Archive()
    parent = archive.add(root(), t2=0.0)
    proposer = DiffProposer(DiffOptions(surfaces=only_workflow(), fallback=False), ctx)
    skip = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(skip, Skip)
    assert "not in the file" in skip.reason


def test_diff_fallback_unparseable_too_is_none_not_an_exception(tmp_path) -> None:
    ctx = make_ctx(tmp_path, ScriptedModel([diff_reply("absent\n", "x\n"), "sorry, I cannot"]))
    archive = Archive()
    parent = archive.add(root(), t2=0.0)
    proposer = DiffProposer(DiffOptions(surfaces=only_workflow()), ctx)
    skip = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(skip, Skip)
    assert "not in the file" in skip.reason and "whole-file fallback: " in skip.reason
    assert ctx.run.records[0][1]["fallback_reply"] == "sorry, I cannot"


def test_diff_reply_with_a_whole_file_instead_of_blocks_is_taken(tmp_path) -> None:
    model = ScriptedModel([CLAIM + fenced(NEW_WORKFLOW)])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(root(), t2=0.0)
    proposal = DiffProposer(DiffOptions(surfaces=only_workflow()), ctx).propose(parent, archive, random.Random(0))
    assert proposal.files == {"workflow.py": NEW_WORKFLOW} and proposal.meta["applied"] == "whole-file"
    assert len(model.calls) == 1


CLAIM_ONLY = "```\nTARGET: t2 fails on empty input\nROOT CAUSE: no check for []\nFLIPS: t2\n```\n"


@pytest.mark.parametrize("make, replies, attempts, claim, fallback, reminder_names", [
    # the small model's reply that held only its claim (the reply the HumanEval run got), then the file
    (lambda ctx: ReflectiveProposer(ReflectiveOptions(surfaces=only_workflow()), ctx),
     [CLAIM_ONLY, fenced(NEW_WORKFLOW)],
     [("first reply", False), ("format retry 1", True)], ("t2 fails on empty input", ("t2",)), None, []),
    # the diff proposer's retry asks for blocks; a retry without any falls back to the whole file
    (lambda ctx: DiffProposer(DiffOptions(surfaces=only_workflow()), ctx),
     [CLAIM_ONLY, "TARGET: t2\nI would change the answer.", fenced(NEW_WORKFLOW)],
     [("first reply", False), ("format retry 1", False), ("whole-file fallback", True)], ("t2", ()),
     "package:rewrite_after_diff.md", ["<<<<<<< SEARCH", "no SEARCH/REPLACE block"]),
], ids=["reflective", "diff"])
def test_a_claim_only_reply_is_asked_again_with_the_file_and_the_format(
        tmp_path, make, replies, attempts, claim, fallback, reminder_names) -> None:
    model = ScriptedModel(replies)
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(root(), t2=0.0)
    proposer = make(ctx)
    proposal = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.files == {"workflow.py": NEW_WORKFLOW}
    assert proposer.asks == len(attempts) == len(model.calls)
    assert [(a["ask"], a["error"] is None) for a in proposal.meta["attempts"]] == attempts
    # the claim stated (fenced) in the first reply is the proposal's claim, unless a later reply states another
    assert (proposal.claim.target, proposal.claim.predicted_flips) == claim
    assert proposal.meta.get("fallback") == fallback
    retry = model.calls[1]["messages"]
    # the same conversation: the first prompt, the model's reply, then the reminder
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[1]["content"] == CLAIM_ONLY
    reminder = retry[2]["content"]
    assert "only the claim lines" in reminder and WORKFLOW in reminder and "```python" in reminder
    assert "The change you described: t2 fails on empty input" in reminder
    assert "do not write it again" in reminder and "TARGET:" not in reminder  # the edit alone is asked for
    assert all(name in reminder for name in reminder_names)


def test_a_claim_fenced_as_json_is_not_taken_as_the_file() -> None:
    reply = '```json\n{\n  "TARGET": "t1 repeats a guess",\n  "ROOT CAUSE": "no check",\n  "FLIPS": ["t1"]\n}\n```\n'
    assert extract_file(reply, "workflow.py").text is None
    assert "only the claim lines" in extract_file(reply, "workflow.py").error
    assert extract_file('```json\n{"default": 0.5}\n```\n', "harness.json").text == '{"default": 0.5}\n'


def test_reflective_retries_are_bounded_and_a_copy_of_the_parent_counts_as_unusable(tmp_path) -> None:
    model = ScriptedModel([CLAIM_ONLY, fenced(WORKFLOW), "no", "still no"])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(root(), t2=0.0)
    proposer = ReflectiveProposer(ReflectiveOptions(surfaces=only_workflow(), format_retries=2), ctx)
    skip = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(skip, Skip)
    assert len(model.calls) == 3 and proposer.asks == 3  # first ask + 2 retries, never a fourth
    assert [a["ask"] for a in skip.attempts] == ["first reply", "format retry 1", "format retry 2"]
    assert "format retry 1: the rewrite of workflow.py is identical" in skip.reason
    assert skip.claim == "t2 fails on empty input"
    # each reminder names the problem of the reply before it
    assert "identical to the parent" in model.calls[2]["messages"][-1]["content"]
    assert len(model.calls[2]["messages"]) == 5


def test_diff_format_retry_with_blocks_that_apply_needs_no_fallback(tmp_path) -> None:
    model = ScriptedModel([CLAIM_ONLY, diff_reply("    return {'answer': 'x'}\n", "    return {'answer': 'y'}\n")])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(root(), t2=0.0)
    proposal = DiffProposer(DiffOptions(surfaces=only_workflow()), ctx).propose(parent, archive, random.Random(0))
    assert proposal.files == {"workflow.py": NEW_WORKFLOW} and proposal.meta["applied"] is True
    assert "fallback" not in proposal.meta and len(model.calls) == 2


def test_diff_that_fails_every_ask_records_each_reason(tmp_path) -> None:
    model = ScriptedModel([CLAIM_ONLY, "no edit", "no file"])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    parent = archive.add(root(), t2=0.0)
    proposer = DiffProposer(DiffOptions(surfaces=only_workflow()), ctx)
    skip = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(skip, Skip)
    assert [a["ask"] for a in skip.attempts] == ["first reply", "format retry 1",
                                                                   "whole-file fallback"]
    assert proposer.asks == 3 and skip.claim == "t2 fails on empty input"


def test_failed_proposals_are_shown_to_later_proposals(tmp_path) -> None:
    model = ScriptedModel([CLAIM + fenced(NEW_WORKFLOW)])
    ctx = make_ctx(tmp_path, model)
    archive = Archive()
    archive.failed = [{"step": 0, "proposer": "diff", "claim": "speed it up",
                       "reason": "first reply: the reply holds no SEARCH/REPLACE block"}]
    parent = archive.add(root(), t2=0.0)
    ReflectiveProposer(ReflectiveOptions(surfaces=only_workflow()), ctx).propose(parent, archive, random.Random(0))
    prompt = model.calls[0]["messages"][0]["content"]
    assert "aimed at: speed it up; no usable change (diff): first reply: the reply holds no SEARCH" in prompt


# ------------------------------------------------------------------------------------ merge


def merge_archive() -> tuple[Archive, Candidate, Candidate, Candidate]:
    archive = Archive()
    base = archive.add(root(), t1=0.0, t2=0.0, t3=0.0)
    a = archive.add(Candidate.from_files("coder", {**base.files, "workflow.py": NEW_WORKFLOW}, base.id),
                    t1=1.0, t2=0.0, t3=0.0)
    b = archive.add(Candidate.from_files("coder", {**base.files, "prompts/system.md": "Be careful.\n"}, base.id),
                    t1=0.0, t2=1.0, t3=1.0)
    archive.add(Candidate.from_files("coder", {**base.files, "prompts/system.md": "Rejected.\n"}, base.id),
                "rejected", t1=1.0, t2=1.0, t3=1.0)
    return archive, base, a, b


def test_merge_takes_each_surface_from_the_parent_that_changed_it(tmp_path) -> None:
    archive, base, a, b = merge_archive()
    proposal = MergeProposer(MergeOptions(), make_ctx(tmp_path, None)).propose(a, archive, random.Random(0))
    assert proposal.parents == (a.id, b.id) and proposal.meta["ancestor"] == base.id
    assert proposal.files == {"prompts/system.md": "Be careful.\n"}  # a keeps its workflow.py
    assert proposal.claim.predicted_flips == ("t2", "t3")  # what b wins over a


def test_merge_when_both_changed_a_surface_takes_the_winner_or_asks_the_model(tmp_path) -> None:
    archive, base, a, _ = merge_archive()
    c = archive.add(Candidate.from_files("coder", {**base.files, "workflow.py": "def step(state):\n    return 2\n"},
                                         base.id), t1=0.0, t2=1.0, t3=1.0)
    archive.items = {k: v for k, v in archive.items.items() if v[0].files.get("prompts/system.md") == PROMPT}
    ctx = make_ctx(tmp_path, None)
    proposal = MergeProposer(MergeOptions(), ctx).propose(a, archive, random.Random(0))
    assert proposal.meta["both_changed"] == ["workflow.py"] and proposal.files == {"workflow.py": c.files["workflow.py"]}
    merged = "def step(state):\n    return 3\n"
    model = ScriptedModel(["TARGET: keep both\nFLIPS: 2, 3\n" + fenced(merged)])
    proposal = MergeProposer(MergeOptions(mode="llm"), make_ctx(tmp_path, model)).propose(a, archive, random.Random(0))
    assert proposal.files == {"workflow.py": merged} and proposal.claim.predicted_flips == ("t2", "t3")
    prompt = model.calls[0]["messages"][0]["content"]
    assert NEW_WORKFLOW in prompt and "return 2" in prompt and "t2, t3" in prompt


def test_merge_with_no_second_parent_is_none_with_a_reason(tmp_path) -> None:
    archive = Archive()
    parent = archive.add(root(), t1=0.0)
    proposer = MergeProposer(MergeOptions(), make_ctx(tmp_path, None))
    skip = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(skip, Skip)
    assert "no other 'accepted' candidate" in skip.reason


# ------------------------------------------------------------------------------------ agentic


class FakeRuntime:
    """A double of the tool-using runtime: reads a trace, tries a protected file, edits one."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        self.seen: list[str] = []

    def run(self, task: AgentTask) -> AgentOutcome:
        tools = task.tools
        self.seen.append(tools.read_trace("t2"))
        self.seen.append(task.instructions)
        try:
            tools.write_file("evolve.yaml", "hacked: true\n")
        except ToolError as exc:
            self.refused.append(str(exc))
        tools.write_file("workflow.py", tools.read_file("workflow.py").replace("'x'", "'y'"))
        return AgentOutcome("Done.\nTARGET: t2\nROOT CAUSE: wrong answer\nFLIPS: t2", [{"tool": "write_file"}])


def test_agentic_proposer_edits_files_through_tools_and_records_a_claim(tmp_path) -> None:
    runtime = FakeRuntime()
    ctx = make_ctx(tmp_path, None, agent_runtime=runtime)
    archive = Archive()
    parent = archive.add(root(), t1=1.0, t2=0.0)
    proposal = AgenticProposer(AgenticOptions(), ctx).propose(parent, archive, random.Random(0))
    assert proposal.files == {"workflow.py": NEW_WORKFLOW}
    assert proposal.claim.predicted_flips == ("t2",) and proposal.meta["tool_calls"] == 4
    assert "trace of t2" in runtime.seen[0] and "t2" in runtime.seen[1]
    assert runtime.refused and "not an editable surface" in runtime.refused[0]


def test_agentic_proposer_defaults_to_the_shipped_runtime_and_names_a_bad_one(tmp_path) -> None:
    runtime = AgenticProposer(AgenticOptions(), make_ctx(tmp_path, None)).runtime
    assert type(runtime).__module__ == "ratchet.runtime.proposer"  # tests/runtime/test_proposer.py runs it
    with pytest.raises(RatchetError, match="cannot load runtime 'nowhere:Nothing'"):
        AgenticProposer(AgenticOptions(runtime="nowhere:Nothing"), make_ctx(tmp_path, None))


def test_agentic_agent_that_changes_nothing_is_none(tmp_path) -> None:
    class Idle:
        def run(self, task: AgentTask) -> AgentOutcome:
            return AgentOutcome("I looked around.")

    proposer = AgenticProposer(AgenticOptions(), make_ctx(tmp_path, None, agent_runtime=Idle()))
    archive = Archive()
    skip = proposer.propose(archive.add(root(), t1=0.0), archive, random.Random(0))
    assert isinstance(skip, Skip)
    assert "changed no editable file" in skip.reason


class Idle:
    """The 0.5B on the runtime, as in the coding-agent run: it looked around and changed nothing."""

    def run(self, task: AgentTask) -> AgentOutcome:
        return AgentOutcome("The bug is line 2: it subtracts.")


def test_an_agent_that_changes_nothing_falls_back_to_a_whole_file_rewrite(tmp_path) -> None:
    """The fallback is a proposer of its own (here the reflective rewrite of one surface): one
    model call asking for a whole file is what a small model that cannot drive the tools can do."""
    model = ScriptedModel([CLAIM + fenced(NEW_WORKFLOW)])
    options = AgenticOptions(fallback={"name": "reflective", "options": {"surfaces": ["workflow.py"]}})
    proposer = AgenticProposer(options, make_ctx(tmp_path, model, agent_runtime=Idle()))
    archive = Archive()
    parent = archive.add(root(), t1=1.0, t2=0.0)
    proposal = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.files == {"workflow.py": NEW_WORKFLOW}
    assert proposal.proposer == "agentic/reflective" and proposal.meta["fallback"] == "reflective"
    assert proposal.meta["agent_reason"] == "the agent changed no editable file"
    assert proposal.claim.predicted_flips == ("t2",) and len(model.calls) == 1
    assert "trace of t2" in model.calls[0]["messages"][0]["content"]  # the rewrite is shown the failures


def test_when_the_fallback_fails_too_both_reasons_are_kept(tmp_path) -> None:
    model = ScriptedModel(["I would change the prompt.", "Still no file."])
    options = AgenticOptions(fallback={"name": "reflective", "options": {"surfaces": ["workflow.py"]}})
    proposer = AgenticProposer(options, make_ctx(tmp_path, model, agent_runtime=Idle()))
    archive = Archive()
    skip = proposer.propose(archive.add(root(), t1=0.0), archive, random.Random(0))
    assert isinstance(skip, Skip)
    assert skip.reason.startswith("the agent changed no editable file; whole-file fallback (reflective): ")
    assert "format retry 1" in skip.reason and len(model.calls) == 2


def test_the_fallback_must_be_another_proposer(tmp_path) -> None:
    with pytest.raises(RatchetError, match="fallback"):
        AgenticProposer(AgenticOptions(fallback={"name": "agentic"}), make_ctx(tmp_path, None, agent_runtime=Idle()))


# ------------------------------------------------------------------------------------ controls


def test_noop_and_cosmetic_controls(tmp_path) -> None:
    ctx = make_ctx(tmp_path, None)
    archive = Archive()
    parent = archive.add(root())
    noop = NoopProposer(ControlOptions(), ctx).propose(parent, archive, random.Random(0))
    assert noop.files == {} and noop.claim.predicted_flips == ()
    cosmetic = CosmeticProposer(ControlOptions(), ctx)
    changed = set()
    for seed in range(6):
        proposal = cosmetic.propose(parent, archive, random.Random(seed))
        [(path, text)] = proposal.files.items()
        changed.add(path)
        assert text != parent.files[path] and text.startswith(parent.files[path])
        if path.endswith(".py"):
            compile(text, path, "exec")  # still the same program
            assert text.splitlines()[-1].startswith("# cosmetic")
        else:
            assert text.splitlines()[-1].startswith("<!-- cosmetic")
    assert changed == {"workflow.py", "prompts/system.md"}


# ------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize("reply, target, cause, flips", [
    ("TARGET: empty list\nROOT CAUSE: index error\nFLIPS: t1, t2", "empty list", "index error", ("t1", "t2")),
    ("**Target:** empty list\n**Root cause:** index error\n**Predicted flips:** `t1` and [t2]",
     "empty list", "index error", ("t1", "t2")),
    ("- target - empty list\n- root_cause = index error\n- flips: t1;t2.", "empty list", "index error", ("t1", "t2")),
    ("1. Target failure: empty list\n2. Cause: index error\n3. Tasks to flip: none", "empty list", "index error", ()),
    ('Here: {"target": "empty list", "root cause": "index error", "predicted_flips": ["t1", 2]}',
     "empty list", "index error", ("t1", "t2")),
    ("### TARGET: empty list\nFLIPS: t1, t7, t1", "empty list", "", ("t1",)),
])
def test_claim_parsing_is_tolerant(reply, target, cause, flips) -> None:
    claim = parse_claim(reply, ["t1", "t2", "t3"])
    assert (claim.target, claim.root_cause, claim.predicted_flips) == (target, cause, flips)


def test_claim_parsing_returns_none_and_ignores_code() -> None:
    assert parse_claim("") is None
    assert parse_claim("I changed the prompt to be clearer.") is None
    assert parse_claim("```python\ntarget: int = 3\n```") is None
    assert parse_claim('{"not": "a claim"}') is None
    assert parse_claim("TARGET: x\nFLIPS: HumanEval/3, 4", ["HumanEval/3", "HumanEval/4"]).predicted_flips == (
        "HumanEval/3", "HumanEval/4")
    assert parse_claim("TARGET: x\nFLIPS: a, b").predicted_flips == ("a", "b")  # no known ids: kept as given


def test_file_extraction_and_blocks() -> None:
    reply = "TARGET: x\n```\nnot it\n```\n```python\ndef f():\n    return 1\n```"
    assert extract_file(reply, "w.py").text == "def f():\n    return 1\n"
    assert extract_file("TARGET: x\ndef f():\n    return 1\n", "w.py").text == "def f():\n    return 1\n"
    assert extract_file("```markdown\nBe brief.\n```", "p.md").text == "Be brief.\n"
    claim_only = extract_file("```markdown\nTARGET: test_failed\nROOT CAUSE: wrong step\nFLIPS: 100, 101\n```", "p.md")
    assert claim_only.text is None and "only the claim" in claim_only.error  # a fenced claim is not the file
    assert extract_file("```markdown\nGoal: pass the tests.\n```", "p.md").text == "Goal: pass the tests.\n"
    assert extract_file("no code here", "w.py").text is None
    text = "a\n  b  \nc\n"
    assert apply_blocks(text, parse_blocks("<<<<<<<< SEARCH\n  b\n========\nB\n>>>>>>>> REPLACE")) == ("a\nB\nc\n", None)
    two = parse_blocks("<<<<<<< SEARCH\na\n=======\nA\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nzz\n=======\nZ\n>>>>>>> REPLACE")
    new, error = apply_blocks(text, two)
    assert new is None and error.startswith("block 2")


PROMPT_WITH_EXAMPLE = ("Fix the bug.\nThe replies were:\n```tool\n{\"name\": \"edit\"}\n```\nThen the tests.\n"
                       "```tool\n{\"name\": \"bash\"}\n```\nWork the same way.\n")


@pytest.mark.parametrize("fence", ["markdown", "md", ""])
def test_a_markdown_file_with_fenced_examples_is_read_whole(fence) -> None:
    """The coding agent's prompt holds a worked example's ```tool blocks: the first bare fence
    inside closed the file's block, and two of a run's rewrites were the prompt cut there."""
    reply = f"TARGET: the agent repeats itself\n```{fence}\n{PROMPT_WITH_EXAMPLE}```\n"
    assert extract_file(reply, "system_prompt.md").text == PROMPT_WITH_EXAMPLE
    cut = extract_file(f"```{fence}\n{PROMPT_WITH_EXAMPLE}".rsplit("```", 1)[0], "system_prompt.md")
    assert cut.text is None and "never closed" in cut.error  # a reply cut off inside it is not the file
    # the answer format's placeholder copied as it stands is not the file (a run's prompt became that one line)
    placeholder = extract_file("TARGET: x\n```markdown\n...the whole file...\n```", "system_prompt.md")
    assert placeholder.text is None and "placeholder" in placeholder.error
    for copied in ("[...the whole file...]", "<the whole file>", "`... The whole file ...`"):  # the 1.5B's copies
        got = extract_file(f"```markdown\n{copied}\n```", "prompts/system.md")
        assert got.text is None and "placeholder" in got.error, copied
    for copied in ("# the whole file...", "<!-- the whole file -->", "// ...the whole file..."):  # as a comment
        got = extract_file(f"```python\n{copied}\n```", "workflow.py")
        assert got.text is None and "placeholder" in got.error, copied
    assert extract_file("```python\n# the whole file is one function\ndef f():\n    pass\n```", "w.py").text
    assert extract_file("```markdown\nWrite the whole file before you answer.\n```", "p.md").text  # a prompt that says it
    # a trace it was shown, pasted back as the file: clip's mark gives it away
    pasted = extract_file("```markdown\n" + clip("def f():\n" + "x" * 5000, 400) + "\n```", "prompts/system.md")
    assert pasted.text is None and "a trace it was shown" in pasted.error
    # a Python file's block still ends at its first bare fence
    assert extract_file("```python\nx = 1\n```\n```python\ny = 2\n```", "w.py").text == "x = 1\n"


def test_failures_shown_once_per_task_worst_seed_first(tmp_path) -> None:
    model = ScriptedModel([CLAIM + fenced(NEW_WORKFLOW)])
    archive = Archive()
    parent = archive.add(root())
    archive.by_split[(parent.id, "search")] = [
        TaskResult("t1", 0, 0.5, trace="t1 seed 0"), TaskResult("t1", 1, 0.0, trace="t1 seed 1"),
        TaskResult("t2", 0, 1.0, trace="t2 passes"), TaskResult("t3", 0, 0.25, trace="t3 seed 0"),
    ]
    ReflectiveProposer(ReflectiveOptions(surfaces=only_workflow(), max_traces=1), make_ctx(tmp_path, model)).propose(
        parent, archive, random.Random(0))
    prompt = model.calls[0]["messages"][0]["content"]
    assert "t1 seed 1" in prompt and "t1 seed 0" not in prompt and "t2 passes" not in prompt
    assert "t3 seed 0" not in prompt and "1 more failing tasks not shown" in prompt


def test_a_tool_call_block_is_never_taken_as_the_file() -> None:
    """A small model that has just run as an agent answers a rewrite with a ```tool block (the
    0.5B's `bash ls`); taken as the file, it would replace the harness's prompt with a tool call."""
    call = '```tool\n{"name": "bash", "arguments": {"command": "ls"}}\n```\n'
    got = extract_file(call, "prompts/system.md")
    assert got.text is None and "a tool call" in got.error
    assert extract_file('```\n{"name": "edit", "arguments": {"path": "a"}}\n```\n', "prompts/system.md").text is None
    assert extract_file(call + fenced(PROMPT, "markdown"), "prompts/system.md").text == PROMPT
    data = '```json\n{"name": "bash", "arguments": {}}\n```\n'  # a JSON surface may well look like one
    assert extract_file(data, "tools.json").text == '{"name": "bash", "arguments": {}}\n'


# ------------------------------------------------------------------------------------ autofix


SLIPS = "def propose_action(board):\n    return '[' + random.choice(['roll', 'hold']) + ']'\n"


def test_autofix_fixes_a_missing_import_and_leaves_bracketing_code_alone() -> None:
    parent = Candidate.from_files("x", {"harness.py": SLIPS, "notes.md": "random"})
    proposer = AutofixProposer(AutofixOptions(spelled={"roll": "[roll]", "hold": "[hold]"}))
    proposal = proposer.propose(parent, None, random.Random(0))
    # The code brackets the words itself: they are meant bare, so only the import is added.
    assert isinstance(proposal, Proposal) and list(proposal.files) == ["harness.py"]
    assert proposal.files["harness.py"].startswith("import random\n") and "'roll'" in proposal.files["harness.py"]
    assert proposal.claim.target == "harness.py: `import random` added" and proposal.parents == (parent.id,)


def test_autofix_spells_bare_actions_the_way_the_game_does_and_gives_up_once_nothing_is_left() -> None:
    bare = "import random\n\ndef propose_action(board):\n    return random.choice(['roll', 'hold'])\n"
    proposer = AutofixProposer(AutofixOptions(spelled={"roll": "[roll]", "hold": "[hold]"}))
    proposal = proposer.propose(Candidate.from_files("x", {"harness.py": bare}), None, random.Random(0))
    assert "['[roll]', '[hold]']" in proposal.files["harness.py"]
    again = Candidate.from_files("y", proposal.files)
    skip = proposer.propose(again, None, random.Random(1))
    assert isinstance(skip, Skip) and "nothing to fix" in skip.reason
    assert AutofixProposer.deterministic  # the loop then draws another proposer for that parent


def test_autofix_reads_the_spellings_from_a_games_rules() -> None:
    proposer = AutofixProposer(AutofixOptions(game="PigDice-v0"))
    assert proposer.spelled() == {"roll": "[roll]", "hold": "[hold]"}
