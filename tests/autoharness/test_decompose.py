"""Decomposition (ideas.decompose): a board parser and a rule, each checked against the env's ground
truth, each fed back and refined on its own; scripted model, TicTacToe stand-in, in-process code."""

from __future__ import annotations

import random
import re

from fakes import BAD_PARSER, BAD_RULE, GOOD_PARSER, GOOD_RULE, PARTIAL_PARSER, RULES, FakeTicTacToe, MemoryRun, fenced

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.decompose import MISSING, PARSER, RULE, Decomposer, assemble, split
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.contracts import Failure
from ratchet.autoharness.search import Synthesis
from ratchet.envs.explore import harvest
from ratchet.models import ScriptedModel


class BoardTicTacToe(FakeTicTacToe):
    """The stand-in with the ground truth a TextArena TicTacToe keeps: rows of '', 'X', 'O'."""

    def board_state(self):
        return [[self.cells[3 * r + c] for c in range(3)] for r in range(3)]


def config(**ideas) -> AutoHarnessConfig:
    # Repair off: these tests follow which part decompose asks the model for next; a model-free
    # mutant (a string test turned into `.isdigit()`, say) can solve the scripted game first.
    base = {"samples_per_step": 1, "library_seed": False, "induce": False, "decompose": True, "repair": False}
    base.update(ideas)
    return AutoHarnessConfig(method="ratchet", eval_envs=3, eval_steps=30, iterations=6, search_seeds=[0, 1, 2],
                             heldout_seeds=[100, 101], transitions_per_seed=30, ideas=base)


def synthesis(cfg, model, run=None, env=BoardTicTacToe) -> Synthesis:
    return Synthesis(cfg, model, run or MemoryRun(), lambda: env(), InProcessHarness,
                     hint_env_factory=lambda: env(hints=True), description=RULES.format(p=0))


def prepared() -> Decomposer:
    transitions = harvest(lambda: BoardTicTacToe(), lambda: BoardTicTacToe(hints=True), [0, 1, 2], per_seed=30)
    d = Decomposer()
    d.prepare(lambda: BoardTicTacToe(), transitions)
    return d


def prompt_of(model, i):
    return model.calls[i]["messages"][-1]["content"]


def test_states_carry_the_envs_own_board_and_its_legal_list():
    d = prepared()
    assert d.active and d.reason is None and len(d.states) >= 10
    for s in d.states:
        free = [f"[{3 * r + c}]" for r in range(3) for c in range(3) if s.truth[r][c] == ""]
        assert sorted(s.listed) == sorted(free) and s.labelled
        assert "Current Board" in s.board
    assert any(any("X" in row for row in s.truth) for s in d.states)  # mid-game states, not only the empty board
    assert len({s.board for s in d.states}) == len(d.states)  # a position reached from several seeds is checked once


def test_each_part_is_checked_on_its_own():
    d = prepared()

    def check(parser, rule):
        return d.check(InProcessHarness({"harness.py": assemble(parser, rule)}), assemble(parser, rule))

    metrics, failures = check(BAD_PARSER, GOOD_RULE)
    assert metrics == {"parse_accuracy": 0.0, "rule_accuracy": 1.0}  # the rule is judged on the true board
    assert failures and all(f.detail["part"] == PARSER and f.kind == "wrong_parse" for f in failures)
    assert "but the board is" in failures[0].message and "instead of ''" in failures[0].message

    metrics, failures = check(GOOD_PARSER, BAD_RULE)
    assert metrics["parse_accuracy"] == 1.0 and metrics["rule_accuracy"] < 1.0
    assert failures and all(f.detail["part"] == RULE and f.kind == "wrong_rule" for f in failures)
    assert "but the legal actions in this state are" in failures[0].message

    metrics, failures = check(GOOD_PARSER, MISSING[RULE])
    assert metrics["rule_accuracy"] == 0.0 and "NotImplementedError" in failures[-1].message
    assert check(GOOD_PARSER, GOOD_RULE) == ({"parse_accuracy": 1.0, "rule_accuracy": 1.0}, [])
    assert d.check(InProcessHarness({"harness.py": "x = 1"}), "x = 1") == ({}, [])  # not decomposed: no part checks


def test_a_bad_parser_with_a_good_rule_gets_parser_feedback_and_vice_versa():
    d = prepared()
    for parser, rule, target, other in [(BAD_PARSER, GOOD_RULE, PARSER, RULE), (GOOD_PARSER, BAD_RULE, RULE, PARSER)]:
        code = assemble(parser, rule)
        metrics, pool = d.check(InProcessHarness({"harness.py": code}), code)
        asked, shown, messages = d.request(game="TicTacToe-v0", description=RULES.format(p=0), code=code, pool=pool,
                                           metrics=metrics, rng=random.Random(0), limit=5)
        text = messages[-1]["content"]
        assert asked == target and shown and all(f.detail["part"] == target for f in shown)
        assert f"def {target}(" in text and f"def {other}(" not in text  # only the failing part is shown and asked for
        assert (parser if target == PARSER else rule).strip().splitlines()[-1].strip() in text  # its wrong attempt
        assert ("parse_board returned" if target == PARSER else "legal_moves returned") in text
        # The reply replaces only the part asked for; the other is kept verbatim.
        fixed = d.new_code(code, fenced(GOOD_PARSER if target == PARSER else GOOD_RULE), asked)
        assert split(fixed) == (GOOD_PARSER, GOOD_RULE)


def refiner(parsers, rules):
    """A scripted refiner that answers each part's request with that part's next reply (the last
    one again when they run out): which node the Thompson draw refines is the search's choice."""
    left = {PARSER: list(parsers), RULE: list(rules)}

    def respond(messages):
        part = PARSER if "def parse_board(observation):" in messages[-1]["content"] else RULE
        replies = left[part]
        return fenced(replies.pop(0) if len(replies) > 1 else replies[0])

    return ScriptedModel(respond)


def solved_from(run, parser, rule):
    """The candidate that solved the search and the parent it was refined from."""
    by_code = {c.files["harness.py"]: c for c in run.cands.values()}
    child = by_code[assemble(GOOD_PARSER, GOOD_RULE)]
    parent = run.cands[child.parent_id]
    assert parent.files["harness.py"] == assemble(parser, rule)
    return child, child.meta["prompt"][-1]["content"]


def test_search_refines_the_parser_when_only_the_parser_fails():
    # Root: a parser that loses X (rule not written) -> the rule is asked for -> with a good rule the
    # parser is the only failing part -> the parser alone is asked for, with its own failures.
    model = refiner([PARTIAL_PARSER, GOOD_PARSER], [GOOD_RULE])
    run = MemoryRun()
    result = synthesis(config(), model, run).run_search()
    assert result.best_h == 1.0 and split(result.best_code) == (GOOD_PARSER, GOOD_RULE)
    first = prompt_of(model, 0)
    assert "def parse_board(observation):" in first and "legal_moves" not in first  # the root asks for the parser
    # Read from the examples, not written for this game: what the library gives, how cells are renamed.
    assert re.search(r"Cells shown as '\d', '\d', '\d', … are '' in the board\.", first)
    assert ">>> parse_grid(current_board(" in first
    second = prompt_of(model, 1)
    assert "def legal_moves(state):" in second and "This attempt is wrong" not in second  # a part not written yet: asked afresh
    child, prompt = solved_from(run, PARTIAL_PARSER, GOOD_RULE)
    assert child.meta["refine"] == PARSER
    assert 'c == "O"' in prompt and "parse_board returned" in prompt and "but the board is" in prompt
    attempt = prompt.split("This attempt is wrong:", 1)[1].split("What went wrong", 1)[0]
    assert "parse_grid(current_board(observation))" in attempt and '"""' not in attempt  # the attempt, without its docstring
    assert "def legal_moves" not in prompt and "legal_moves returned" not in prompt
    assert all(Failure.from_record(f).detail["part"] == PARSER for f in child.meta["failures_shown"])


def test_search_refines_the_rule_when_only_the_rule_fails():
    model = refiner([GOOD_PARSER], [BAD_RULE, GOOD_RULE])
    run = MemoryRun()
    result = synthesis(config(), model, run).run_search()
    assert result.best_h == 1.0
    child, prompt = solved_from(run, GOOD_PARSER, BAD_RULE)
    assert child.meta["refine"] == RULE
    assert "def legal_moves(state):" in prompt and "range(9)" in prompt and "legal_moves returned" in prompt
    assert "def parse_board" not in prompt and "parse_board returned" not in prompt
    assert all(Failure.from_record(f).detail["part"] == RULE for f in child.meta["failures_shown"])
    parent_eval = next(e for e in run.evals if e.candidate_id == child.parent_id)
    assert parent_eval.metrics["parse_accuracy"] == 1.0 and parent_eval.metrics["rule_accuracy"] < 1.0


def test_the_rule_is_asked_for_while_the_parser_is_still_wrong():
    # A parser wrong on every state does not hold the rule back: the parts are checked apart.
    model = refiner([BAD_PARSER, GOOD_PARSER], [GOOD_RULE])
    run = MemoryRun()
    result = synthesis(config(), model, run).run_search()
    assert "def legal_moves(state):" in prompt_of(model, 1)
    by_code = {c.files["harness.py"]: c for c in run.cands.values()}
    bad_parser_good_rule = by_code[assemble(BAD_PARSER, GOOD_RULE)]
    scores = next(e for e in run.evals if e.candidate_id == bad_parser_good_rule.id)
    assert scores.metrics["parse_accuracy"] == 0.0 and scores.metrics["rule_accuracy"] == 1.0 and scores.score > 0.0
    assert result.best_h == 1.0 and split(result.best_code) == (GOOD_PARSER, GOOD_RULE)


def test_a_correct_decomposed_harness_reaches_h_one_with_every_idea_on():
    model = ScriptedModel([fenced(GOOD_PARSER), fenced(GOOD_RULE)])
    result = synthesis(config(samples_per_step=1, transitions=True, scaffold=True, helper_library=True), model).run_search()
    assert result.best_h == 1.0 and result.calls == 2
    # Each part's doctests are whole observations that small models copy out first: twice the room.
    assert [c["params"]["max_tokens"] for c in model.calls] == [2 * config().max_new_tokens] * 2
    best = InProcessHarness({"harness.py": result.best_code})
    board = BoardTicTacToe().reset(0).text
    assert best.call("is_legal_action", board, "[4]") and best.call("propose_action", board) in [f"[{i}]" for i in range(9)]


def test_without_ground_truth_the_search_says_why_and_falls_back():
    model = ScriptedModel([fenced(GOOD_RULE)])
    run = MemoryRun()
    cfg = config(scaffold=True)
    cfg.budget.max_calls = 1
    search = synthesis(cfg, model, run, env=FakeTicTacToe)  # this stand-in exposes no board
    search.run_search()
    saved = run.ckpt["autoharness"]["decompose"]
    assert saved["active"] is False and "exposes no plain board state" in saved["reason"]
    assert "def legal_moves(cells):" in prompt_of(model, 0)  # the undecomposed scaffold request


def test_faithful_method_ignores_decompose():
    cfg = config()
    cfg.method = "faithful"
    cfg.budget.max_calls = 1
    model = ScriptedModel([fenced(GOOD_PARSER)])
    search = synthesis(cfg, model)
    search.run_search()
    assert search.decomposer is None and "Write these Python functions" in prompt_of(model, 0)


def test_resumed_search_keeps_the_ground_truth():
    cfg = config()
    cfg.budget.max_calls = 1
    run = MemoryRun()
    first = synthesis(cfg, ScriptedModel([fenced(PARTIAL_PARSER)]), run)
    first.run_search()
    again = synthesis(cfg, ScriptedModel([]), run)
    assert again._load() and again.decomposer.active
    assert [s.board for s in again.decomposer.states] == [s.board for s in first.decomposer.states]


def test_textarena_tictactoe_exposes_its_board_as_ground_truth():
    from ratchet.envs import env_factory_for

    env, hints = env_factory_for("TicTacToe-v0"), env_factory_for("TicTacToe-v0", hints=True)
    transitions = harvest(env, hints, [0], per_seed=20)
    d = Decomposer()
    d.prepare(env, transitions)
    assert d.active, d.reason
    code = assemble(GOOD_PARSER, GOOD_RULE)
    assert d.check(InProcessHarness({"harness.py": code}), code) == ({"parse_accuracy": 1.0, "rule_accuracy": 1.0}, [])
