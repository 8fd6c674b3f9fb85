"""The dedicated search's decompose idea as the engine's refiner (``refine.DecomposeRefiner``), on
real TicTacToe-v0 with the scripted model: the first request asks for the parser with the env's own
boards as examples, a reply's part is built in with the other part kept verbatim, ``screen`` ranks
the parts' accuracy, a game without a plain board is refused, and the engine's critic_refiner
proposes through it (examples/autoharness-engine/evolve-decompose.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fakes import BAD_PARSER, BAD_RULE, GOOD_PARSER, GOOD_RULE, fenced

from ratchet.autoharness.decompose import MISSING, RULE, assemble, split
from ratchet.autoharness.refine import DecomposeRefiner
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.contracts import RatchetError
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

pytest.importorskip("textarena")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoharness-engine"
STARTING = (EXAMPLE / "harness.py").read_text()  # not decomposed: propose_action and is_legal_action


def refiner() -> DecomposeRefiner:
    r = DecomposeRefiner("TicTacToe-v0")
    r.runtime_factory = InProcessHarness  # the shipped one is the sandbox (the engine run below uses it)
    return r


def test_the_first_request_asks_for_the_parser_with_the_envs_own_boards_as_examples() -> None:
    r = refiner()
    request = r.request(STARTING, [], [])[-1]["content"]
    assert r.target == "parse_board" and "This attempt is wrong" not in request
    lines = [line.strip() for line in request.splitlines()]
    asked = [i for i, line in enumerate(lines) if line.startswith(">>> parse_board(")]
    truths = [repr(s.truth) for s in r.decomposer.states]
    # three explored observations, each followed by the board the env kept there, one with an X at least
    assert len(asked) == 3 and all("Current Board" in lines[i] and lines[i + 1] in truths for i in asked)
    assert any("'X'" in lines[i + 1] for i in asked)


@pytest.mark.parametrize("parent, reply, target, kept", [
    ((BAD_PARSER, GOOD_RULE), GOOD_PARSER, "parse_board", GOOD_RULE),
    ((GOOD_PARSER, BAD_RULE), GOOD_RULE, "legal_moves", GOOD_PARSER),
])
def test_the_failing_part_is_asked_for_and_the_other_kept_verbatim(parent, reply, target, kept) -> None:
    r, code = refiner(), assemble(*parent)
    r.request(code, [], [])
    assert r.target == target
    new, why = r.new_code(fenced(reply), code)
    assert why == "" and set(split(new)) == {reply, kept}
    assert "def propose_action" in new and "def is_legal_action" in new
    # a reply that writes the other part only is unusable
    assert r.new_code(fenced(kept), code) == (None, f"the reply defines no {target}")


def test_screen_ranks_a_right_harness_above_wrong_ones() -> None:
    r = refiner()
    right, half, wrong = (r.screen(assemble(*parts)) for parts in
                          ((GOOD_PARSER, GOOD_RULE), (BAD_PARSER, GOOD_RULE), (BAD_PARSER, BAD_RULE)))
    assert right == 1.0 and half == 0.5 and 0.0 <= wrong < 0.5
    assert r.screen(STARTING) == 0.0  # not decomposed: no part to check


def test_a_game_whose_env_keeps_no_plain_board_is_refused_at_the_first_request(monkeypatch) -> None:
    from ratchet.envs.textarena_env import TextArenaEnv

    monkeypatch.setattr(TextArenaEnv, "board_state", lambda self: None)  # as for Chess's chess.Board
    with pytest.raises(RatchetError, match="TicTacToe-v0.*no plain board") as raised:
        refiner().request(STARTING, [], [])
    assert "ScaffoldRefiner or HarnessRefiner" in str(raised.value.hint)


def test_on_the_engine_the_best_screened_parser_is_proposed(tmp_path: Path) -> None:
    """evolve-decompose.yaml with samples=2: the starting harness gets the parser request, the two
    replies are screened in the sandbox and the right parser is the child, though sampled second."""
    raw = yaml.safe_load((EXAMPLE / "evolve-decompose.yaml").read_text())
    raw["proposers"][0]["options"]["samples"] = 2
    raw.update(workspace=str(EXAMPLE), model="scripted:", iterations=1)
    cfg = EvolveConfig.model_validate(raw)
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    model = ScriptedModel([fenced(BAD_PARSER), fenced(GOOD_PARSER)])
    Engine(cfg, run, model, extra={"harness_runtime": InProcessHarness}).execute()
    assert len(model.calls) == 2 and ">>> parse_board(" in model.calls[0]["messages"][-1]["content"]
    step = next(e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step")
    child = run.get_candidate(step["child"]).files["harness.py"]
    assert split(child) == (GOOD_PARSER, MISSING[RULE])  # the rule is asked for next
    assert run.get_candidate(step["child"]).meta["proposal"]["screened"] == [0.0, 0.5]  # the rule not written yet scores 0
