"""The dedicated search's remaining ideas as options of the engine's AutoHarness components, each
with the scripted model: the helper library and the few-shot example in the refiner's request, the
short examples, aliases and body prefix of the one-function request, plain explanations of wrong
legal lists, the grammar, novelty's hotter retry, requests cut to the context window, and fresh
roots and restarts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fakes import GOOD, LOOSE, FakeTicTacToe, fenced
from windowed import SmallWindow

from ratchet.envs.harness.diagnoses import INVERTED
from ratchet.envs.harness.dense import LegalLists
from ratchet.autoharness.engine import HARNESS_REFINER, write_workspace
from ratchet.autoharness.proposer import REPEAT_NOTE, FreshRootProposer, HarnessRefinerProposer
from ratchet.autoharness.refine import HarnessRefiner, ScaffoldRefiner
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.contracts import Candidate, Failure, Proposal, RatchetError, Skip, TaskResult
from ratchet.envs.answers import CODE_BLOCK_GRAMMAR
from ratchet.envs.explore import harvest
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.models import ScriptedModel

BOARD = "[GAME] Tic Tac Toe.\nCurrent Board:\n 0 | X | 2\n---+---+---\n 3 | 4 | O\n---+---+---\n 6 | 7 | 8"
REJECTED = Failure("rejected_by_env", "the environment rejected it: cell 1 is occupied", "TicTacToe-v0#0",
                   detail={"board": BOARD, "action": "[1]", "verdict": True, "function": "both"})


class Archive:
    """An ArchiveView over a list: candidates with statuses and their search results."""

    def __init__(self) -> None:
        self.items: list[tuple[Candidate, str]] = []
        self.by_id: dict[str, list[TaskResult]] = {}

    def add(self, candidate: Candidate, status: str, failures: tuple[Failure, ...] = (REJECTED,)) -> Candidate:
        self.items.append((candidate, status))
        self.by_id[candidate.id] = [TaskResult("TicTacToe-v0#0", 0, 0.5, "", failures)]
        return candidate

    def candidates(self, status=None):
        return [c for c, s in self.items if status is None or s == status]

    def results(self, candidate_id, split):
        return self.by_id.get(candidate_id, [])

    def score(self, candidate_id, split):
        return None

    def children(self, candidate_id):
        return []

    def rejected(self, limit=10):
        return []

    def unusable(self, limit=None):
        return []


def harness(code: str) -> Candidate:
    return Candidate.from_files("autoharness.harness", {"harness.py": code})


def proposer(tmp_path: Path, model, cls=HarnessRefinerProposer, **options):
    ws = write_workspace(tmp_path / "ws")
    ctx = EngineContext(load_manifest(ws), ws, model=model)
    spec = {"refiner": HARNESS_REFINER, "refiner_options": {"game": "TicTacToe-v0"}, "max_tokens": 300, **options}
    return cls(cls.Options(**spec), ctx)


# ------------------------------------------------------------------- the refiners' requests

def test_the_helper_library_and_the_few_shot_example_are_refiner_options() -> None:
    plain = HarnessRefiner("TicTacToe-v0").request(LOOSE, [REJECTED], [REJECTED])[-1]["content"]
    both = HarnessRefiner("TicTacToe-v0", helper_library=True, few_shot=True).request(LOOSE, [REJECTED], [REJECTED])[-1]["content"]
    assert "harnesslib API" not in plain and "Connect Four" not in plain
    assert "harnesslib API" in both and "On it, harnesslib gives" in both and "Connect Four" in both


def test_short_examples_and_the_body_prefix_only_where_the_one_function_request_is_long() -> None:
    pytest.importorskip("textarena")
    root = "def propose_action(board):\n    return '[0]'\n\ndef is_legal_action(board, action):\n    return True\n"

    def asked(game: str, **kw):
        return ScaffoldRefiner(game, seeds=[0, 1], transitions_per_seed=30, **kw).request(root, [], [])

    long_plain, long_short = asked("GuessTheNumber-v0"), asked("GuessTheNumber-v0", short_examples=True)
    assert long_plain[-1]["content"].count(">>> legal_moves") == 3 and long_short[-1]["content"].count(">>> legal_moves") == 2
    assert len(long_short[-1]["content"]) < len(long_plain[-1]["content"]) / 2
    # long_only: the prefix for the long request, the whole function asked for on Tic Tac Toe's short one
    assert asked("GuessTheNumber-v0", body_only=True, long_only=True)[-1]["role"] == "assistant"
    assert asked("TicTacToe-v0", body_only=True, long_only=True)[-1]["role"] == "user"
    assert asked("TicTacToe-v0", short_examples=True)[-1]["content"].count(">>> legal_moves") == 3


def test_aliases_go_into_the_template_the_reply_is_built_into() -> None:
    pytest.importorskip("textarena")
    body = "```python\ndef legal_moves(cells):\n    return ['[up]']\n```"
    blank = "def propose_action(board):\n    return '[0]'\n\ndef is_legal_action(board, action):\n    return True\n"
    with_aliases = ScaffoldRefiner("FrozenLake-v0", seeds=[0, 1], transitions_per_seed=30, aliases=True)
    without = ScaffoldRefiner("FrozenLake-v0", seeds=[0, 1], transitions_per_seed=30)
    code, _ = with_aliases.new_code(body, blank)
    plain, _ = without.new_code(body, blank)
    assert "ALIASES = {}" in plain and "ALIASES = {}" not in code and "ALIASES = {" in code


def test_explain_failures_names_an_inverted_condition_before_the_wrong_states() -> None:
    transitions = harvest(FakeTicTacToe, lambda: FakeTicTacToe(hints=True), [0, 1, 2], 30, random.Random(0))
    inverted = GOOD.replace("if c.isdigit()", "if not c.isdigit()") + '''
def legal_actions(board):
    return ["[" + c + "]" for c in free(board)]
'''
    runtime = InProcessHarness({"harness.py": inverted})
    told = LegalLists(transitions, explain=True).check(runtime, inverted)[1]
    plain = LegalLists(transitions).check(runtime, inverted)[1]
    assert told[0].kind == INVERTED and not any(f.kind == INVERTED for f in plain)
    assert told[1:] == plain


# ------------------------------------------------------------------- how the model is asked

def test_a_repeated_sample_does_not_use_up_one_of_the_step_s_samples(tmp_path: Path) -> None:
    repeat = fenced("# the same program, a comment added\n" + LOOSE)
    archive = Archive()
    parent = archive.add(harness(LOOSE), "accepted")
    # One sample a step: the repeat is asked again, hotter, and the step still gets its sample.
    model = ScriptedModel([repeat, fenced(GOOD)])
    proposal = proposer(tmp_path, model, hotter_retry=0.3, samples=1, temperature=0.5).propose(parent, archive, random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.files["harness.py"].strip() == GOOD.strip()
    assert [c["params"]["temperature"] for c in model.calls] == [0.5, pytest.approx(0.8)]
    # Up to `samples` repeats a step: past them a repeat is an unusable sample (no endless asking).
    model = ScriptedModel([repeat, repeat, repeat, fenced(GOOD)])
    skipped = proposer(tmp_path, model, hotter_retry=0.3, samples=1, temperature=0.5).propose(parent, archive, random.Random(0))
    assert isinstance(skipped, Skip) and "repeat of a program already tried" in skipped.reason and len(model.calls) == 2
    # Without the retry a repeat uses up the sample: the step asks once.
    model = ScriptedModel([repeat, fenced(GOOD)])
    plain = proposer(tmp_path, model, samples=1, temperature=0.5).propose(parent, archive, random.Random(0))
    assert len(model.calls) == 1 and isinstance(plain, Proposal) and plain.files["harness.py"] != GOOD


def test_the_grammar_and_novelty_s_hotter_retry(tmp_path: Path) -> None:
    repeat = fenced("# the same program, a comment added\n" + LOOSE)
    model = ScriptedModel([repeat, fenced(GOOD)])
    archive = Archive()
    parent = archive.add(harness(LOOSE), "accepted")
    asking = proposer(tmp_path, model, grammar=True, hotter_retry=0.3, samples=2, temperature=0.5)
    proposal = asking.propose(parent, archive, random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.files["harness.py"].strip() == GOOD.strip()
    first, second = model.calls
    assert first["params"]["grammar"] == second["params"]["grammar"] == CODE_BLOCK_GRAMMAR
    assert first["params"]["temperature"] == 0.5 and second["params"]["temperature"] == pytest.approx(0.8)
    assert REPEAT_NOTE not in first["messages"][-1]["content"] and second["messages"][-1]["content"].endswith(REPEAT_NOTE)
    # without the retry the commented copy is a proposal (the engine's static.novelty drops it), asked with no grammar
    model = ScriptedModel([repeat, fenced(GOOD)])
    copied = proposer(tmp_path, model, samples=2, temperature=0.5).propose(parent, archive, random.Random(0))
    assert isinstance(copied, Proposal) and "a comment added" in copied.files["harness.py"]
    assert [c["params"]["temperature"] for c in model.calls] == [0.5] and model.calls[0]["params"].get("grammar") is None


def test_requests_are_cut_to_the_context_window_and_a_window_too_small_is_a_clear_error(tmp_path: Path) -> None:
    archive = Archive()
    parent = archive.add(harness(LOOSE), "accepted", failures=tuple(REJECTED for _ in range(5)))
    wide = SmallWindow([fenced(GOOD)], 100_000)
    proposer(tmp_path, wide).propose(parent, archive, random.Random(0))
    whole = wide.count_tokens(wide.calls[0]["messages"])
    narrow = SmallWindow([fenced(GOOD)], whole + 300 - 100)
    assert isinstance(proposer(tmp_path, narrow).propose(parent, archive, random.Random(0)), Proposal)
    cut = narrow.calls[0]["messages"]
    assert narrow.count_tokens(cut) + 300 <= narrow.context_tokens and "Current code:" in cut[-1]["content"]
    assert cut[-1]["content"].count("Failure ") < wide.calls[0]["messages"][-1]["content"].count("Failure ")
    with pytest.raises(RatchetError, match=r"shortest request is \d+ tokens, and scripted reads 400"):
        proposer(tmp_path, SmallWindow([fenced(GOOD)], 400)).propose(parent, archive, random.Random(0))


def test_a_fresh_root_refines_the_starting_harness_and_a_restart_waits_for_a_stall(tmp_path: Path) -> None:
    archive = Archive()
    archive.add(harness(LOOSE), "accepted")  # the starting harness: the run's first candidate
    later = GOOD.replace("random.choice(free(board))", "free(board)[0]")
    parent = archive.add(harness(later), "accepted", failures=())
    model = ScriptedModel([fenced(GOOD)], cycle=True)
    fresh = proposer(tmp_path, model, cls=FreshRootProposer).propose(parent, archive, random.Random(0))
    assert isinstance(fresh, Proposal) and fresh.parents == (parent.id,) and fresh.meta["fresh_root"]
    # the request was about the root's code and failures, not the parent's
    asked = model.calls[0]["messages"][-1]["content"]
    assert "random.randint(0, 8)" in asked and "cell 1 is occupied" in asked and "free(board)[0]" not in asked
    restart = proposer(tmp_path, model, cls=FreshRootProposer, after_stall=2)
    assert isinstance(restart.propose(parent, archive, random.Random(0)), Skip)
    for k in range(2):
        archive.add(harness(LOOSE + f"\n# try {k}\n"), "rejected")
    assert isinstance(restart.propose(parent, archive, random.Random(0)), Proposal)


def test_a_restart_asks_from_other_example_states_than_the_first_request(tmp_path: Path) -> None:
    pytest.importorskip("textarena")
    from ratchet.autoharness.engine import BLANK_HARNESS, SCAFFOLD_REFINER

    archive = Archive()
    root = archive.add(harness(BLANK_HARNESS), "accepted")
    options = {"refiner": SCAFFOLD_REFINER, "refiner_options": {"game": "TicTacToe-v0", "seeds": [0, 1], "transitions_per_seed": 30}}

    def request(cls) -> str:
        model = ScriptedModel(["no code"], cycle=True)
        proposer(tmp_path, model, cls=cls, **options).propose(root, archive, random.Random(0))
        return model.calls[0]["messages"][-1]["content"]

    first = request(HarnessRefinerProposer)
    restart = request(FreshRootProposer)
    assert "legal_moves" in first and restart != first  # the same request, other example boards
    assert request(FreshRootProposer) == restart  # drawn from the archive's count: a resumed run asks the same
    archive.add(Candidate.from_files("autoharness.harness", {"harness.py": LOOSE}, proposal={"fresh_root": True}), "rejected")
    second = request(FreshRootProposer)
    assert second not in (first, restart)


def test_the_shipped_example_of_the_search_s_ideas_builds() -> None:
    """examples/autoharness-engine/evolve-search-ideas.yaml: every component it names resolves and
    its options validate (a negative control for the names and option keys)."""
    import yaml

    from ratchet.evolve.components import build
    from ratchet.evolve.config import EvolveConfig

    example = Path(__file__).parents[2] / "examples" / "autoharness-engine"
    cfg = EvolveConfig.model_validate(yaml.safe_load((example / "evolve-search-ideas.yaml").read_text()))
    ctx = EngineContext(load_manifest(example), example)
    built = [build("proposer", spec, ctx) for spec in cfg.proposers]
    assert [p.name for p in built] == ["induced_rules", "harness_refiner", "fresh_root", "autofix", "mutation"]
    assert built[2].options.after_stall == 2 and built[2].options.hotter_retry == 0.3
    suite = build("suite", cfg.suite, ctx)
    assert suite.options.dense == ["transitions", "legal_actions"] and suite.options.explain_failures
