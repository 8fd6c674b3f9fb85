"""The slips a small model makes that need no model to fix: a module alias used but never
imported, and an action written without the brackets the game's actions have. Both are fixed in
one pass, since a program with both plays no legal move until both are fixed (which single-point
repair, one mutant at a time, cannot find)."""

from __future__ import annotations

import pytest
from fakes import PIG_RULES

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import run_on_engine
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.evolve.archive import Archive
from ratchet.envs.grammar import infer_grammar
from ratchet.evolve.proposers.mutation import fixed
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

# What the 0.5B wrote for Pig Dice at every call of a stuck search (h 0.5, code alone 0 legal).
SLIP = '''def propose_action(board: str) -> str:
    return ['roll', 'hold'][np.random.randint(2)]      # np never imported -> NameError every step
def is_legal_action(board, action):
    if not action in ['roll', 'hold']: return True      # bare words; the game wants '[roll]' / '[hold]'
    return False
'''
SPELLED = {"roll": "[roll]", "hold": "[hold]"}


def test_the_grammar_names_the_actions_made_of_words():
    assert infer_grammar(PIG_RULES).spelled() == SPELLED
    # Numbers and letters are not taken for actions: a bare "4" is as often a cell.
    assert infer_grammar("select the square number (0-8), e.g. '[4]'").spelled() == {}


def test_an_unimported_module_alias_gets_its_import():
    fix = fixed("'''Doc.'''\nfrom __future__ import annotations\ndef f(xs):\n    return random.choice(xs) + math.floor(1.5)\n")
    assert fix is not None and fix.change == "`import random` added; `import math` added"
    assert fix.code.splitlines()[:4] == ["'''Doc.'''", "from __future__ import annotations", "import random", "import math"]
    assert fixed(SLIP).change == "`import numpy as np` added"


def test_bare_action_words_get_the_games_brackets():
    fix = fixed(SLIP.replace("np.random.randint(2)", "0"), SPELLED)
    assert fix is not None and fix.change == "'hold' → '[hold]'; 'roll' → '[roll]'"
    assert "['[roll]', '[hold]'][0]" in fix.code and "# bare words" in fix.code  # only the strings change


def test_both_fixes_together_on_the_pig_dice_slip():
    fix = fixed(SLIP, SPELLED)
    assert fix is not None and fix.change == "`import numpy as np` added; 'hold' → '[hold]'; 'roll' → '[roll]'"
    assert fix.code.startswith("import numpy as np\n") and "not action in ['[roll]', '[hold]']" in fix.code
    assert fixed(fix.code, SPELLED) is None  # nothing is left to fix


def test_a_correct_program_is_left_unchanged():
    good = "import random\n\ndef propose_action(board):\n    return random.choice(['[roll]', '[hold]'])\n"
    assert fixed(good, SPELLED) is None
    assert fixed("def broken(:\n", SPELLED) is None


def test_what_has_another_reading_is_left_alone():
    # A name the program binds itself (an argument, an assignment, an import under another name).
    assert fixed("def f(np):\n    return np.zeros(2)\n") is None
    assert fixed("import numpy\nre = numpy\ndef f():\n    return re.x\n") is None
    assert fixed("from harnesslib import *\ndef f():\n    return math.pi\n") is None
    # A string that is not an action, and a program that handles the brackets itself.
    assert fixed("def f(board):\n    return 'rolled' in board or 'Roll' in board\n", SPELLED) is None
    assert fixed("def is_legal_action(board, action):\n    return action.strip('[]') in ('roll', 'hold')\n", SPELLED) is None
    assert fixed("def propose_action(board):\n    return '[' + 'roll' + ']'\n", SPELLED) is None
    assert fixed('def f():\n    """Say roll."""\n    return f"roll{1}"\n', SPELLED) is None


# The slip as the 0.5B wrote it in most replies of that search, its test the right way round:
# only both fixes together make it legal. (With the test inverted as above, both fixes give a
# program that rejects every action, and repair continues only from a program that scores higher.)
BOTH = SLIP.replace("if not action in ['roll', 'hold']: return True", "if action in ['roll', 'hold']: return True")
# Another search's slip: numpy imported, the words bare, so it rejects every labelled action.
BARE = 'import numpy as np\n\ndef propose_action(board):\n    return ["roll", "hold"][np.random.choice(2)]\n\ndef is_legal_action(board, action):\n    return action in ["roll", "hold"]\n'


def synthesize(tmp_path, code: str, **ideas):
    """PigDice on the engine (the real game), every refiner reply the same slip; the fitted rules off."""
    cfg = AutoHarnessConfig(env="PigDice-v0", model="scripted:", method="ratchet", eval_steps=30, iterations=6,
                            search_seeds=list(range(12)), heldout_seeds=[100], transitions_per_seed=20,
                            library_dir=str(tmp_path / "lib"),
                            # the reply is a whole harness: no one-function template to build it into
                            ideas={"samples_per_step": 1, "library_seed": False, "induce": False, "scaffold": False,
                                   **ideas})
    cfg.budget.max_calls = 3
    run = RunStore(tmp_path / "runs").create_run("autoharness", {}, "pig")
    model = ScriptedModel(["```python\n" + code + "```"], cycle=True)
    summary = run_on_engine(cfg, model, run, description=PIG_RULES, extra={"harness_runtime": InProcessHarness})
    archive = Archive(run)
    best = archive.get(summary["report"]["best"]["id"])
    return summary, archive, best, archive.score(best.id, "heldin")


@pytest.mark.parametrize("code", [BOTH, BARE], ids=["both", "bare"])
def test_the_engine_solves_the_pig_dice_slips_only_with_autofix(tmp_path, code):
    summary, archive, best, h = synthesize(tmp_path / "on", code)
    assert h == 1.0 and best.meta.get("proposer") == "autofix"
    parent = archive.get(best.parent_id)
    assert parent.meta.get("proposer") not in (None, "autofix") and archive.score(parent.id, "heldin") < 1.0  # the model's slip
    assert best.files["harness.py"] == fixed(parent.files["harness.py"], SPELLED).code
    off, _, _, h_off = synthesize(tmp_path / "off", code, autofix=False)  # off: three calls of the same slip
    assert h_off < 1.0 and off["model_calls"] == 3
