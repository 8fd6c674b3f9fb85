"""Search-side means against a small model's stuck searches: a repeated program is not judged
again (and the next sample is asked differently), single-point AST repair without the model, and
restarts after a stall. Each is a component that can be switched off on its own."""

from __future__ import annotations

import random

from fakes import RULES, FakeTicTacToe, MemoryRun

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.evolve.proposers.mutation import MutationProposer, MutationOptions, mutants, normalized
from ratchet.contracts import Candidate, Proposal, Skip
from ratchet.models import ScriptedModel

FREE = "def legal_moves(cells):\n    return ['[' + c + ']' for c in cells if c not in ('X', 'O')]\n"
TAKEN = "def legal_moves(cells):\n    return [c for c in cells if c in ('X', 'O')]\n"
FIXED = "def legal_moves(cells):\n    return ['[0]', '[2]']\n"


def reply(body: str, comment: str = "") -> str:
    return "```python\n" + comment + body + "```"


def config(iterations: int = 4, max_calls: int = 40, **ideas) -> AutoHarnessConfig:
    cfg = AutoHarnessConfig(method="ratchet", eval_envs=3, eval_steps=30, iterations=iterations, search_seeds=[0, 1, 2],
                            heldout_seeds=[100, 101], transitions_per_seed=30,
                            ideas={"samples_per_step": 2, "library_seed": False, "induce": False, **ideas})
    cfg.budget.max_calls = max_calls
    return cfg


def search(cfg, model, run=None) -> Synthesis:
    return Synthesis(cfg, model, run or MemoryRun(), lambda: FakeTicTacToe(), InProcessHarness,
                     hint_env_factory=lambda: FakeTicTacToe(hints=True), description=RULES.format(p=0))


# ------------------------------------------------------------------ mutation (the general proposer)


def test_mutants_include_the_fix_of_an_inverted_condition_and_nothing_twice():
    found = mutants(TAKEN)
    codes = [normalized(m.code) for m in found]
    assert normalized(TAKEN.replace(" in (", " not in (")) in codes
    assert len(codes) == len(set(codes)) and normalized(TAKEN) not in codes
    assert any("`in` → `not in`" in m.change for m in found)
    # Off by one, a negated condition, a swapped name; only inside the named functions.
    code = "def f(xs):\n    if len(xs) < 3:\n        return xs[0]\n    return xs\n\ndef g():\n    return 1\n"
    changes = {m.change for m in mutants(code, functions=["f"])}
    assert {"line 2: `<` → `>=`", "line 2: `<` → `<=`", "line 2: condition negated", "line 2: 3 → 4", "line 3: 0 → -1"} <= changes
    assert not any("line 7" in c for c in changes)
    assert mutants("def broken(:\n") == []
    assert len(mutants(code, limit=3, rng=random.Random(1))) == 3


def test_the_mutation_proposer_changes_one_python_surface():
    parent = Candidate.from_files("x", {"a.py": TAKEN, "notes.md": "text"})
    proposal = MutationProposer(MutationOptions()).propose(parent, None, random.Random(0))
    assert isinstance(proposal, Proposal) and list(proposal.files) == ["a.py"] and proposal.files["a.py"] != TAKEN
    assert proposal.parents == (parent.id,) and proposal.claim.target.startswith("a.py: line")
    only_text = Candidate.from_files("x", {"notes.md": "text"})
    proposer = MutationProposer(MutationOptions())
    skip = proposer.propose(only_text, None, random.Random(0))
    assert isinstance(skip, Skip) and skip.reason


# ------------------------------------------------------------------ novelty


def test_a_repeated_program_is_not_judged_and_the_next_sample_is_asked_differently():
    # The second reply is the first one again, with a comment: the same program.
    model = ScriptedModel([reply(TAKEN), reply(TAKEN, "# again\n"), reply(FREE)])
    run = MemoryRun()
    result = search(config(repair=False), model, run).run_search()
    assert result.best_h == 1.0 and result.calls == 3
    statuses = [h["status"] for h in run.ckpt["autoharness"]["history"]]
    assert statuses == ["evaluated", "repeat", "evaluated"]
    third = model.calls[2]
    assert "already tried" in third["messages"][-1]["content"] and "already tried" not in model.calls[1]["messages"][-1]["content"]
    assert third["params"]["temperature"] > model.calls[1]["params"]["temperature"]
    # Off: the copy is judged like a new program and uses up the refinement's second sample.
    run_off = MemoryRun()
    off = search(config(repair=False, novelty=False, iterations=0), ScriptedModel([reply(TAKEN), reply(TAKEN, "# again\n")]), run_off).run_search()
    assert off.best_h < 1.0 and [h["status"] for h in run_off.ckpt["autoharness"]["history"]] == ["evaluated", "evaluated"]


def test_repeats_are_bounded_per_refinement():
    model = ScriptedModel([reply(TAKEN)], cycle=True)
    run = MemoryRun()
    result = search(config(repair=False, iterations=1), model, run).run_search()
    history = run.ckpt["autoharness"]["history"]
    # Root: 1 judged + 2 repeats (the bound) + 1 judged copy; the refinement likewise.
    assert [h["status"] for h in history[:4]] == ["evaluated", "repeat", "repeat", "evaluated"]
    assert result.calls == 8 and result.best_h < 1.0


# ------------------------------------------------------------------ repair


def test_repair_fixes_an_inverted_condition_without_a_model_call():
    run = MemoryRun()
    result = search(config(max_calls=1, samples_per_step=1), ScriptedModel([reply(TAKEN)]), run).run_search()
    assert result.best_h == 1.0 and result.calls == 1
    repaired = [c for c in run.cands.values() if str(c.meta.get("origin", "")).startswith("repair:")]
    assert repaired and any("`in` → `not in`" in c.meta["origin"] for c in repaired)
    assert [h["status"] for h in run.ckpt["autoharness"]["history"]][0] == "evaluated"
    # Off: the same single call leaves the search at the inverted program.
    off = search(config(max_calls=1, samples_per_step=1, repair=False), ScriptedModel([reply(TAKEN)])).run_search()
    assert off.best_h < 1.0


def test_repair_replaces_a_guess_at_the_empty_cell_by_a_character_class():
    # What the 0.5B wrote at the search seeds where TicTacToe plateaued (h 0.60): free cells are
    # taken to be blank, but the board numbers them.
    blank = "def legal_moves(cells):\n    return ['[' + c + ']' for c in cells if c != ' ']\n"
    assert any(m.change == "line 2: `c != ' '` → `c.isdigit()`" for m in mutants(blank))
    run = MemoryRun()
    result = search(config(max_calls=1, samples_per_step=1), ScriptedModel([reply(blank)]), run).run_search()
    assert result.best_h == 1.0 and result.calls == 1
    assert any("isdigit" in str(c.meta.get("origin", "")) for c in run.cands.values())


def test_repair_offers_nothing_for_a_hard_coded_answer_it_cannot_fix():
    run = MemoryRun()
    done = search(config(max_calls=1, samples_per_step=1), ScriptedModel([reply(FIXED)]), run).run_search()
    assert done.best_h < 1.0  # no single-point mutant of a constant list is the game's rule
    # ...and none beat it on the dense checks, so none cost a rollout.
    assert done.nodes == 1 and not any(h["status"] == "repair" for h in run.ckpt["autoharness"]["history"])


# ------------------------------------------------------------------ restarts


def test_a_stalled_search_restarts_from_a_fresh_root():
    roots = iter([reply(FIXED), reply(FREE)])

    def respond(messages):
        if "This attempt is wrong" in messages[-1]["content"] or "Score of the current code" in messages[-1]["content"]:
            return reply(FIXED.replace("[2]", "[1]"))
        return next(roots)

    run = MemoryRun()
    cfg = config(iterations=5, samples_per_step=1, repair=False, novelty=False, restarts=True)
    result = search(cfg, ScriptedModel(respond), run).run_search()
    assert result.best_h == 1.0
    roots_made = sorted(c.meta["iteration"] for c in run.cands.values() if c.parent_id is None)
    assert roots_made[0] == 0 and roots_made[1] >= 3  # after two refinements without progress
    assert run.ckpt["autoharness"]["restarts"] == 1


def test_long_board_examples_are_written_compactly_and_mean_the_same_list():
    from ratchet.autoharness.prompts import compact_list, scaffold_request
    from ratchet.autoharness.views import CellsView

    rng = random.Random(3)
    for _ in range(200):
        values = [rng.choice(".XO") for _ in range(rng.randint(0, 50))]
        assert eval(compact_list(values)) == values  # noqa: S307 - the doctest argument must be the same list
    board = [str(c) for c in range(7)] + ["."] * 42
    request = scaffold_request([((board,), ["[col 0]"])], CellsView())
    assert "['.'] * 42" in request and "'.', '.', '.', '.'" not in request
