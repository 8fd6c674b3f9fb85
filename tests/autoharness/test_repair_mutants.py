"""Single-point AST repair without the model (the ``repair`` idea's mutants and the engine's mutation
proposer), and the compact doctest examples of long boards. (On the engine: the repair idea's
screened mutants, test_screened_mutation.py; novelty's repeats and restarts after a stall,
test_engine_ideas.py.)"""

from __future__ import annotations

import random

from ratchet.evolve.proposers.mutation import MutationProposer, MutationOptions, mutants, normalized
from ratchet.contracts import Candidate, Proposal, Skip

TAKEN = "def legal_moves(cells):\n    return [c for c in cells if c in ('X', 'O')]\n"


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


def test_long_board_examples_are_written_compactly_and_mean_the_same_list():
    from ratchet.autoharness.prompts import scaffold_request
    from ratchet.envs.harness.views import compact_list
    from ratchet.envs.harness.views import CellsView

    rng = random.Random(3)
    for _ in range(200):
        values = [rng.choice(".XO") for _ in range(rng.randint(0, 50))]
        assert eval(compact_list(values)) == values  # noqa: S307 - the doctest argument must be the same list
    board = [str(c) for c in range(7)] + ["."] * 42
    request = scaffold_request([((board,), ["[col 0]"])], CellsView())
    assert "['.'] * 42" in request and "'.', '.', '.', '.'" not in request
