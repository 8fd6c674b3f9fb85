"""The engine's agentic proposer on the runtime, with the scripted model: it reads a trace, edits a
file with the runtime's tools, is refused a protected one by the policy, and submits its claim."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ratchet.contracts import Candidate, Failure, Proposal, RatchetError, TaskResult
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import Manifest
from ratchet.evolve.proposers.agentic import AgenticProposer
from ratchet.evolve.proposers.config import AgenticOptions
from ratchet.models.scripted import ScriptedModel
from ratchet.runtime.proposer import PROPOSER_CLOSING, RuntimeProposerAgent
from ratchet.store import read_jsonl

from .conftest import tool_reply

WORKFLOW = "def step(state):\n    return {'answer': 'x'}\n"
CLAIM = "TARGET: t2 gets the wrong answer\nROOT CAUSE: step returns 'x'\nFLIPS: t2"


class Archive:
    """The part of the engine's archive a proposer reads: one parent's per-task results."""

    def __init__(self, parent: Candidate) -> None:
        self.parent = parent
        self.rows = [TaskResult("t1", 0, 1.0, trace="t1 fine"),
                     TaskResult("t2", 0, 0.0, trace="t2: expected 'y', got 'x'",
                                failures=(Failure("test_failed", "t2 assertion failed", "t2"),))]

    def results(self, candidate_id: str, split: str) -> list[TaskResult]:
        return self.rows if candidate_id == self.parent.id else []

    def rejected(self, limit: int = 10) -> list:
        return []

    def unusable(self, limit: int | None = None) -> list:
        return []


class Run:
    def __init__(self, root: Path) -> None:
        self.dir = root
        self.records: list = []

    def append_jsonl(self, relpath: str, record: dict) -> None:
        self.records.append((relpath, record))


def _ctx(tmp_path: Path, replies: list[str]) -> EngineContext:
    manifest = Manifest(name="coder", editable=["workflow.py", "prompts/*.md", "agent/*.md", "agent/*.yaml"],
                        protected=["evolve.yaml"])
    return EngineContext(manifest, tmp_path / "ws", model=ScriptedModel(replies), run=Run(tmp_path / "run"))


def test_the_runtime_agent_proposes_an_edit_with_its_tools(tmp_path) -> None:
    replies = [
        tool_reply("read_trace", task_id="t2"),
        tool_reply("grep", pattern="answer"),
        tool_reply("write", path="evolve.yaml", content="hacked: true\n"),
        tool_reply("edit", path="workflow.py", old="'x'", new="'y'"),
        tool_reply("submit", summary=CLAIM),
    ]
    ctx = _ctx(tmp_path, replies)
    proposer = AgenticProposer(AgenticOptions(), ctx)
    assert isinstance(proposer.runtime, RuntimeProposerAgent)  # the default runtime, not a double
    parent = Candidate.from_files("coder", {"workflow.py": WORKFLOW, "evolve.yaml": "suite: x\n"})
    proposal = proposer.propose(parent, Archive(parent), random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.files == {"workflow.py": WORKFLOW.replace("'x'", "'y'")}
    assert proposal.claim.predicted_flips == ("t2",) and proposal.meta["claim_stated"]
    # The trace of the proposal stays in the engine run: the trace the agent read, the policy's
    # refusal of a protected file (logged with its rule), then the edit.
    (run_dir,) = (tmp_path / "run" / "proposer-agent").iterdir()
    tools = [r for r in read_jsonl(run_dir / "trace.jsonl") if r["type"] == "tool_call"]
    assert [t["name"] for t in tools] == ["read_trace", "grep", "write", "edit", "submit"]
    assert "expected 'y', got 'x'" in tools[0]["result"]
    assert tools[2]["denied_rule"] == "protected['evolve.yaml']" and not tools[2]["ok"]
    assert read_jsonl(run_dir / "denials.jsonl")[0]["rule"] == "protected['evolve.yaml']"
    assert len(ctx.model.calls) == 5  # every turn went through the run's (accounted) model


def test_a_harness_inside_the_candidate_runs_the_proposer_with_its_own_prompt(tmp_path) -> None:
    ctx = _ctx(tmp_path, [tool_reply("write_file", path="prompts/system.md", text="Be exact.\n"),
                          tool_reply("submit", summary=CLAIM)])
    harness = {"agent/system_prompt.md": "PARENT'S OWN PROPOSER PROMPT\n{tool_instructions}\n",
               "agent/settings.yaml": "protocol: text\ntools: [read, write_file, submit]\n",
               "agent/tools/submit.py": "raise SystemExit('candidate code must not run here')\n"}
    parent = Candidate.from_files("coder", {"workflow.py": WORKFLOW, "prompts/system.md": "Hi.\n", **harness})
    proposer = AgenticProposer(AgenticOptions(harness="agent", max_tool_calls=4), ctx)
    proposal = proposer.propose(parent, Archive(parent), random.Random(0))
    assert proposal.files == {"prompts/system.md": "Be exact.\n"}
    (run_dir,) = (tmp_path / "run" / "proposer-agent").iterdir()
    (first,) = [r for r in read_jsonl(run_dir / "trace.jsonl") if r["type"] == "model_call"][:1]
    prompt = ctx.model.calls[0]["messages"][0]["content"]
    assert prompt.startswith("PARENT'S OWN PROPOSER PROMPT")
    # Offered: the settings' list plus the engine's tools; the candidate's submit.py did not run.
    assert "- write_file(" in prompt and "- read(" in prompt and "- bash(" not in prompt and first["step"] == 1


def test_missing_model_or_harness_is_a_clear_error(tmp_path) -> None:
    parent = Candidate.from_files("coder", {"workflow.py": WORKFLOW})
    ctx = _ctx(tmp_path, [])
    with pytest.raises(RatchetError, match="no harness workspace 'nowhere'"):
        AgenticProposer(AgenticOptions(harness="nowhere"), ctx).propose(parent, Archive(parent), random.Random(0))
    ctx.model = None
    with pytest.raises(RatchetError, match="needs a model"):
        AgenticProposer(AgenticOptions(), ctx).propose(parent, Archive(parent), random.Random(0))


def test_the_proposer_on_the_coding_agents_own_harness_is_told_its_own_task_last(tmp_path) -> None:
    """In the coding-agent run the proposer's first message ended with the coding harness's
    closing line ("Find the wrong line in the code above and reply with the edit that fixes it."),
    and the 0.5B answered that line with the worked example's first reply. The harness's prompt
    and context policy stay the candidate's own; the line after the files is the proposer's."""
    example = Path(__file__).resolve().parents[2] / "examples" / "coding-agent"
    files = {p.relative_to(example).as_posix(): p.read_text() for p in example.rglob("*") if p.is_file()}
    parent = Candidate.from_files("coding-agent", files)
    manifest = Manifest(name="coding-agent", editable=["system_prompt.md", "settings.yaml", "context.yaml"],
                        protected=["evolve.yaml"])
    model = ScriptedModel([tool_reply("read_trace", task_id="t2"), tool_reply("submit", summary=CLAIM)])
    ctx = EngineContext(manifest, example, model=model, run=Run(tmp_path / "run"))
    AgenticProposer(AgenticOptions(harness=".", max_tool_calls=3), ctx).propose(parent, Archive(parent), random.Random(0))
    system, first = (m["content"] for m in model.calls[0]["messages"])
    assert system.startswith("You are a careful software engineer")  # the candidate's own prompt
    assert "Find the wrong line in the code above" not in first and "==> system_prompt.md <==" in first
    assert first.rstrip().endswith(PROPOSER_CLOSING)


def test_the_coding_agent_runs_first_proposal_replayed_ends_early_and_falls_back(tmp_path) -> None:
    """The 0.5B's replies in the committed coding-agent run (bench/results/evolve_coding_agent.json,
    proposer run 1): the worked example's first line with no call, then `bash ls` eleven times.
    Replayed on the runtime: the repeat guard ends the agent after its third `bash ls` (it spent
    all 12 calls before), and the whole-file fallback is asked and its rewrite proposed."""
    ls = "```tool\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n```"
    rewrite = f"{CLAIM}\n```markdown\nRead the failing test first.\n{{tool_instructions}}\n```\n"
    model = ScriptedModel(["The bug is line 2: it subtracts.", *[ls] * 3, rewrite, *[ls] * 8])
    ctx = _ctx(tmp_path, [])
    ctx.model = model
    options = AgenticOptions(max_tool_calls=12, fallback={"name": "reflective",
                                                          "options": {"surfaces": ["prompts/*.md"]}})
    parent = Candidate.from_files("coder", {"workflow.py": WORKFLOW, "prompts/system.md": "Hi.\n"})
    proposal = AgenticProposer(options, ctx).propose(parent, Archive(parent), random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.proposer == "agentic/reflective"
    assert proposal.files == {"prompts/system.md": "Read the failing test first.\n{tool_instructions}\n"}
    assert len(model.calls) == 5  # 1 + 3 agent turns (the third `bash ls` stopped it) + the rewrite
    (run_dir,) = (tmp_path / "run" / "proposer-agent").iterdir()
    tools = [r for r in read_jsonl(run_dir / "trace.jsonl") if r["type"] == "tool_call"]
    assert [t["name"] for t in tools] == ["bash"] * 3 and [t["ok"] for t in tools] == [True, False, False]
    assert "was called 3 times and gave the same result each time" in tools[-1]["result"]
