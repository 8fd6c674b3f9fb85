"""The critic + refiner as an engine proposer, with the scripted model: a refined harness with a claim."""

from __future__ import annotations

import random

import pytest

from ratchet.autoharness.refine import HarnessRefiner
from ratchet.contracts import Candidate, Failure, Proposal, Proposer, RatchetError, Skip, TaskResult
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import Manifest
from ratchet.evolve.proposers.config import CriticRefinerOptions
from ratchet.evolve.proposers.critic import CriticRefinerProposer, PreviousReply
from ratchet.models.scripted import ScriptedModel

OLD = ("def propose_action(board):\n    return '[4]'\n\n"
       "def is_legal_action(board, action):\n    return True\n")
NEW_PROPOSE = "def propose_action(board):\n    return '[0]'\n"
BOARD = "[GAME] Current Board:\n 0 | 1 | 2\n---+---+---\n 3 | X | 5\n"


class Archive:
    """The parent's results on the search split: two tasks rejected by the env, one solved."""

    def __init__(self, parent: Candidate) -> None:
        rejected = lambda task: Failure("rejected_by_env", "the environment rejected it: cell 4 is occupied", task,  # noqa: E731
                                        {"board": BOARD, "action": "[4]", "verdict": True, "function": "both"})
        self.by_parent = {parent.id: [TaskResult("g1", 0, 0.0, failures=(rejected("g1"),)),
                                      TaskResult("g2", 0, 0.0, failures=(rejected("g2"),)), TaskResult("g3", 0, 1.0)]}

    def results(self, candidate_id: str, split: str) -> list[TaskResult]:
        return self.by_parent.get(candidate_id, []) if split == "search" else []

    def candidates(self, status: str | None = None) -> list[Candidate]:
        return []  # no earlier reply of this proposer: no note on the request

    def unusable(self, limit: int | None = None) -> list[dict]:
        return []


class Run:
    def __init__(self) -> None:
        self.skips: list[dict] = []

    def append_jsonl(self, relpath: str, record: dict) -> None:
        self.skips.append(record)


def proposer(tmp_path, replies: list[str], refiner: object | None = None) -> tuple[CriticRefinerProposer, ScriptedModel]:
    model = ScriptedModel(replies)
    ctx = EngineContext(Manifest(name="harness", editable=["harness.py"]), tmp_path, model=model, run=Run(),
                        extra={"refiner": refiner if refiner is not None else HarnessRefiner("TicTacToe-v0", "Tic Tac Toe rules")})
    return CriticRefinerProposer(CriticRefinerOptions(max_tokens=400), ctx), model


def test_it_proposes_a_refined_harness_with_a_claim(tmp_path) -> None:
    parent = Candidate.from_files("harness", {"harness.py": OLD})
    made, model = proposer(tmp_path, ["```python\n" + NEW_PROPOSE + "```"])
    assert isinstance(made, Proposer)
    proposal = made.propose(parent, Archive(parent), random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.parents == (parent.id,) and proposal.proposer == "critic_refiner"
    code = proposal.files["harness.py"]
    # The reply rewrote propose_action; is_legal_action is carried over from the parent.
    assert "return '[0]'" in code and "def is_legal_action" in code and "return '[4]'" not in code
    assert proposal.claim.predicted_flips == ("g1", "g2")
    assert proposal.claim.target == "2× rejected_by_env: the environment rejected it: cell N is occupied"
    # The refiner was shown the parent's code, the failed steps and the paper's rule (both functions).
    prompt = model.calls[0]["messages"][-1]["content"]
    assert "return '[4]'" in prompt and "action: [4]" in prompt and "Fix both functions" in prompt
    assert model.calls[0]["params"]["max_tokens"] == 400


def test_an_unusable_reply_is_no_proposal_with_its_reason(tmp_path) -> None:
    parent = Candidate.from_files("harness", {"harness.py": OLD})
    made, _ = proposer(tmp_path, ["I would check the cell first.", "```python\n" + OLD + "```"])
    skip = made.propose(parent, Archive(parent), random.Random(0))
    assert isinstance(skip, Skip)
    assert skip.reason == "no code in the reply" and made.ctx.run.skips[-1]["proposer"] == "critic_refiner"
    skip = made.propose(parent, Archive(parent), random.Random(0))  # the parent's code back
    assert isinstance(skip, Skip)
    assert skip.reason == "the refined harness.py is identical to the parent's"


def test_without_a_refiner_or_the_surface_it_gives_up(tmp_path) -> None:
    made, model = proposer(tmp_path, [])
    made.refiner = None
    parent = Candidate.from_files("harness", {"harness.py": OLD})
    skip = made.propose(parent, Archive(parent), random.Random(0))
    assert isinstance(skip, Skip) and "no refiner" in skip.reason
    made.refiner = HarnessRefiner("TicTacToe-v0")
    other = Candidate.from_files("harness", {"notes.md": "x"})
    skip = made.propose(other, Archive(other), random.Random(0))
    assert isinstance(skip, Skip) and "no harness.py" in skip.reason
    assert model.calls == []


def test_a_config_names_the_refiner_by_import_path(tmp_path) -> None:
    ctx = EngineContext(Manifest(name="harness", editable=["harness.py"]), tmp_path, model=ScriptedModel([]))
    named = CriticRefinerOptions(refiner="ratchet.autoharness.refine:HarnessRefiner", refiner_options={"game": "Nim-v0"})
    made = CriticRefinerProposer(named, ctx)
    assert isinstance(made.refiner, HarnessRefiner) and made.refiner.game == "Nim-v0"
    for bad in (CriticRefinerOptions(refiner="ratchet.autoharness.refine:NoSuchRefiner"),
                CriticRefinerOptions(refiner="ratchet.autoharness.refine:HarnessRefiner", refiner_options={"colour": "red"})):
        with pytest.raises(RatchetError, match="cannot build refiner"):
            CriticRefinerProposer(bad, ctx)


def test_a_reply_that_redefines_none_of_the_parents_functions_is_taken_as_written() -> None:
    """Completed from the parent, ``def propose`` / ``def legal`` would be the parent again under the
    same behaviour; taken as written, the legality suite scores it 0 naming the missing functions.
    A reply that rewrites one of the parent's helpers (a scaffold's legal_moves) is still completed."""
    refiner = HarnessRefiner("TicTacToe-v0")
    renamed = "def propose(board):\n    return '[4]'\n"
    code, why = refiner.new_code("```python\n" + renamed + "```", OLD)
    assert code == renamed and why == ""
    scaffolded = OLD + "\n\ndef legal_moves(board):\n    return []\n"
    code, _ = refiner.new_code("```python\ndef legal_moves(board):\n    return ['[0]']\n```", scaffolded)
    assert "return ['[0]']" in code and "def propose_action" in code and "def is_legal_action" in code


class Unusable(Archive):
    """The parent's results, and one earlier reply for it this proposer could not use."""

    def __init__(self, parent: Candidate) -> None:
        super().__init__(parent)
        self.parent_id = parent.id

    def unusable(self, limit: int | None = None) -> list[dict]:
        return [{"step": 1, "parent": self.parent_id, "proposer": "critic_refiner", "reason": "no request: too long",
                 "model_calls": 0, "claim": None},  # asked nothing: no reply to tell of
                {"step": 0, "parent": self.parent_id, "proposer": "critic_refiner",
                 "reason": "SyntaxError: expected ':' (line 1)", "model_calls": 1, "claim": None}]


@pytest.mark.parametrize("tell", [True, False])
def test_the_next_request_for_the_parent_says_what_was_wrong_with_the_last_reply(tmp_path, tell) -> None:
    parent = Candidate.from_files("harness", {"harness.py": OLD})
    model = ScriptedModel(["```python\n" + NEW_PROPOSE + "```"])
    ctx = EngineContext(Manifest(name="harness", editable=["harness.py"]), tmp_path, model=model, run=Run(),
                        extra={"refiner": HarnessRefiner("TicTacToe-v0", "Tic Tac Toe rules")})
    made = CriticRefinerProposer(CriticRefinerOptions(max_tokens=400, tell_previous_reply=tell), ctx)
    assert isinstance(made.propose(parent, Unusable(parent), random.Random(0)), Proposal)
    said = "Your previous reply to this request was unusable: SyntaxError: expected ':' (line 1)"
    assert (said in model.calls[0]["messages"][-1]["content"]) == tell
    other = Candidate.from_files("harness", {"harness.py": OLD.replace("[4]", "[2]")})
    assert PreviousReply.of(Unusable(parent), "critic_refiner", other.id, ("search",)) is None  # another parent's
    prefixed = PreviousReply(0, "no code").told([{"role": "user", "content": "ask"}, {"role": "assistant", "content": "def f("}])
    assert prefixed[-1] == {"role": "assistant", "content": "def f("} and "no code" in prefixed[0]["content"]
