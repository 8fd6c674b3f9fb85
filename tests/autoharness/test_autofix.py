"""The slips a small model makes that need no model to fix: a module alias used but never
imported, and an action written without the brackets the game's actions have. Both are fixed in
one pass, since a program with both plays no legal move until both are fixed (which single-point
repair, one mutant at a time, cannot find)."""

from __future__ import annotations

from fakes import PIG_RULES, FakePigDice, MemoryRun

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.envs.grammar import infer_grammar
from ratchet.evolve.proposers.mutation import fixed
from ratchet.models import ScriptedModel

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


def config(**ideas) -> AutoHarnessConfig:
    cfg = AutoHarnessConfig(env="PigDice-v0", method="ratchet", eval_envs=3, eval_steps=30, iterations=2, search_seeds=[0, 1, 2],
                            heldout_seeds=[100, 101], transitions_per_seed=20,
                            ideas={"samples_per_step": 1, "library_seed": False, "induce": False, **ideas})
    cfg.budget.max_calls = 3
    return cfg


def search(cfg, run, code: str) -> Synthesis:
    return Synthesis(cfg, ScriptedModel(["```python\n" + code + "```"], cycle=True), run, lambda: FakePigDice(), InProcessHarness,
                     hint_env_factory=lambda: FakePigDice(hints=True), description=PIG_RULES)


def judged(run) -> dict[str, float]:
    """Each judged candidate's origin ("model" for a sample) and its h."""
    state = run.ckpt["autoharness"]
    return {str(run.cands[h["candidate"]].meta.get("origin", "model")): h["h"] for h in state["history"] if h["h"] is not None}


def test_the_search_solves_the_pig_dice_slips_only_with_autofix():
    both = "autofix: `import numpy as np` added; 'hold' → '[hold]'; 'roll' → '[roll]'"
    run = MemoryRun()
    result = search(config(), run, BOTH).run_search()
    assert result.best_h == 1.0 and result.calls == 1
    h = judged(run)
    assert (h["model"], h[both]) == (0.0, 1.0)
    assert fixed(BOTH, SPELLED).code == run.ckpt["autoharness"]["codes"][result.best_id]
    run = MemoryRun()
    result = search(config(), run, BARE).run_search()
    h = judged(run)
    assert result.best_h == 1.0 and h["model"] < 1.0 and h["autofix: 'hold' → '[hold]'; 'roll' → '[roll]'"] == 1.0
    for code in (BOTH, BARE):  # off: three calls of the same slip, never a legal move
        off = search(config(autofix=False), MemoryRun(), code).run_search()
        assert off.best_h < 1.0 and off.calls == 3
