"""The shipped TextArena run config (examples/guess-the-number) loads, and ``ratchet evolve`` runs it
end to end with the scripted model: a scripted player that plays better under a better prompt makes
the planted prompt change a real improvement, which the gate keeps and the report shows on the
untouched test seeds; a proposer reply with no edit is retried and kept as a failed proposal."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import Engine
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "guess-the-number"
BETTER_PROMPT = "Play by binary search: guess the middle of the numbers still possible, as [n].\n"
CLAIM = "TARGET: GuessTheNumber-v0#0 repeats a guess\nROOT CAUSE: no strategy\nFLIPS: GuessTheNumber-v0#0\n"


def player(messages) -> str:
    """The scripted stand-in for the model: a proposer's request gets the planted prompt; a move
    request gets a binary-search guess when the system prompt asks for it, else always [10]."""
    if messages[0]["role"] != "system":  # a proposer's request
        return CLAIM + f"```markdown\n{BETTER_PROMPT}```\n"
    if "binary search" not in messages[0]["content"]:
        return "[10]"
    low, high = 1, 20
    for guess, hint in re.findall(r"\[Player\] \[(\d+)\]\s*\n+\[GAME\] The target number is (higher|lower)",
                                  messages[-1]["content"]):
        if hint == "higher":
            low = max(low, int(guess) + 1)
        else:
            high = min(high, int(guess) - 1)
    return f"[{(low + high) // 2}]"


def config(tmp_path: Path, proposer: int = 0, **overrides) -> EvolveConfig:
    raw = yaml.safe_load((EXAMPLE / "evolve.yaml").read_text())
    raw.update(workspace=str(EXAMPLE), model="scripted:", iterations=1, proposers=[raw["proposers"][proposer]],
               **overrides)
    return EvolveConfig.model_validate(raw)


def test_the_shipped_config_loads_with_its_splits_and_surfaces() -> None:
    raw = yaml.safe_load((EXAMPLE / "evolve.yaml").read_text())
    cfg = EvolveConfig.model_validate({**raw, "workspace": str(EXAMPLE)})
    assert cfg.suite.name == "textarena" and cfg.suite.options["games"] == ["GuessTheNumber-v0"]
    ids = cfg.splits.ids
    assert not set(ids["search"]) & set(ids["heldin"]) and not set(ids["heldin"]) & set(ids["test"])
    assert len(ids["heldin"]) == 8 and len(ids["test"]) == 8
    assert [p.options["surfaces"] for p in cfg.proposers] == [["prompts/system.md"], ["workflow.py"]]


def test_evolve_keeps_a_better_prompt_and_reports_it_on_the_test_seeds(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    summary = Engine(cfg, run, ScriptedModel(player)).execute()
    report = summary["report"]
    assert summary["state"] == "done" and summary["accepted"] == 2
    assert report["split"] == "test" and report["tasks"] == 8
    assert report["best"]["id"] != report["original"]["id"]
    assert report["best"]["mean"] == 1.0 > report["original"]["mean"]  # binary search guesses every number
    assert report["comparison"]["best_minus_original"]["low"] > 0
    assert report["proposals"] == {**report["proposals"], "total": 1, "accepted": 1, "failed": 0}


def test_a_move_function_reply_without_an_edit_is_a_recorded_failed_proposal(tmp_path: Path) -> None:
    cfg = config(tmp_path, proposer=1)

    def unhelpful(messages) -> str:
        return "[10]" if messages[0]["role"] == "system" else "```\nTARGET: t\nROOT CAUSE: c\n```"

    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    model = ScriptedModel(unhelpful)
    summary = Engine(cfg, run, model).execute()
    proposals = summary["report"]["proposals"]
    # the ask, one format retry, the whole-file fallback: three calls, all paid and recorded
    assert proposals["failed"] == 1 and proposals["failed_model_calls"] == 3 and proposals["total"] == 0
    [step] = proposals["failed_steps"]
    assert step["proposer"] == "diff" and "whole-file fallback" in step["reason"]
    asked = [c for c in model.calls if c["messages"][0]["role"] != "system"]
    assert len(asked) == 3 and "legal_move" in asked[1]["messages"][-1]["content"]
