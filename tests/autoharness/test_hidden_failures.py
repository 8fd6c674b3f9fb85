"""``hide_failure_types``: failures of a hidden type never reach the refiner's request (its failed
steps, error summary, counterexamples, the previous reply's problem, the function it is asked to
fix, the repeat note), while the evaluator still scores them; a parent whose every failure is hidden
gets a request that says so; a name that is no type fails at load, naming the types."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fakes import CRASHING, GOOD, LOOSE, fenced
from pydantic import ValidationError
from test_engine_ideas import Archive, harness, proposer
from test_engine_search import synthesize

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.envs.harness.failure_types import FailureType, of_kind
from ratchet.autoharness.proposer import REPEAT_NOTE
from ratchet.autoharness.engine import FRESH_ROOT, HARNESS_PROPOSER, engine_config
from ratchet.contracts import Failure, Proposal
from ratchet.evolve.archive import Archive as RunArchive
from ratchet.evolve.proposers.critic import NO_EVIDENCE_NOTE
from ratchet.models import ScriptedModel

#: Every reply of both searches, in turn: a harness that accepts every move, one that raises, the right one.
REPLIES = [fenced(LOOSE), fenced(CRASHING), fenced(GOOD)]


def requests(model: ScriptedModel) -> list[str]:
    return [" ".join(m["content"] for m in call["messages"]) for call in model.calls]


def failures_of(run, types: set[FailureType]) -> list[Failure]:
    """Every failure the search's evaluations recorded whose kind is of one of ``types``."""
    archive = RunArchive(run)
    return [f for c in archive.candidates() for split in ("search", "heldin") for r in archive.results(c.id, split)
            for f in r.failures if of_kind(f.kind) in types]


def leaked(texts: list[str], failures: list[Failure]) -> set[str]:
    """The failures' messages (their last line, as the summary quotes them) found in any request."""
    lines = {f.message.strip().splitlines()[-1] for f in failures if f.message.strip()}
    return {line for line in lines if any(line in text for text in texts)}


@pytest.mark.parametrize("hidden", [FailureType.ILLEGAL_MOVE, FailureType.CODE_ERROR])
def test_a_hidden_type_leaves_every_request_and_is_still_scored(tmp_path: Path, hidden: FailureType) -> None:
    shown_model, hidden_model = ScriptedModel(REPLIES), ScriptedModel(REPLIES)
    shown_summary, shown_run = synthesize(tmp_path / "shown", shown_model, iterations=3)
    hidden_summary, hidden_run = synthesize(tmp_path / "hidden", hidden_model, iterations=3, hide_failure_types=[hidden.value])
    # The evaluator measured the same: the same candidates, the same scores, the same stop.
    scores = lambda run: [(c["score"], c["status"]) for c in run.candidates()]  # noqa: E731
    assert scores(hidden_run) == scores(shown_run) and hidden_summary["state"] == shown_summary["state"] == "done"
    recorded = failures_of(hidden_run, {hidden})
    assert recorded, f"the search recorded {hidden} failures (scored, kept in the archive)"
    # Negative control: without the setting these failures are in the requests; with it, none is.
    assert leaked(requests(shown_model), failures_of(shown_run, {hidden}))
    assert leaked(requests(hidden_model), recorded) == set()
    if hidden == FailureType.CODE_ERROR:  # the crash's traceback, and the previous reply's 0 that it explains
        assert any("IndexError" in text for text in requests(shown_model))
        assert not any("IndexError" in text or "Traceback" in text or "previous reply" in text
                       for text in requests(hidden_model))
    else:
        # The starting harness's every failure is an illegal move: its request says none is shown,
        # asks for both functions (no failure points at one) and shows no failed step.
        first_shown, first_hidden = requests(shown_model)[0], requests(hidden_model)[0]
        assert "Failed steps" in first_shown and "Fix both functions so these steps succeed" in first_shown
        assert "Failed steps" not in first_hidden and "Error types" not in first_hidden
        assert NO_EVIDENCE_NOTE.strip() in first_hidden and "Make both functions right for this game" in first_hidden
        assert NO_EVIDENCE_NOTE.strip() not in first_shown


def test_only_the_hidden_types_leave_the_pool(tmp_path: Path) -> None:
    """A parent with an illegal move and a crash, illegal moves hidden: the crash is shown, alone,
    and picks the function to fix; no note, since a failure is shown."""
    crash = Failure("code_error", "IndexError: list index out of range", "TicTacToe-v0#0",
                    detail={"function": "propose_action", "board": "x"})
    archive = Archive()
    parent = archive.add(harness(LOOSE), "accepted", failures=(Failure("rejected_by_env", "cell 1 is occupied",
                                                                       "TicTacToe-v0#0", detail={"verdict": True, "function": "both"}),
                                                               crash))
    model = ScriptedModel([fenced(GOOD)])
    made = proposer(tmp_path, model, hide_failure_types=["illegal_move"])
    proposal = made.propose(parent, archive, random.Random(0))
    assert isinstance(proposal, Proposal) and proposal.claim.target.startswith("1× code_error")
    text = requests(model)[0]
    assert "IndexError" in text and "cell 1 is occupied" not in text and "Fix propose_action" in text
    assert NO_EVIDENCE_NOTE.strip() not in text


def test_a_hidden_no_change_drops_the_repeat_note_not_the_retry(tmp_path: Path) -> None:
    repeat = fenced("# the same program, a comment added\n" + LOOSE)
    archive = Archive()
    parent = archive.add(harness(LOOSE), "accepted")
    for hide, noted in (([], True), (["no_change"], False)):
        model = ScriptedModel([repeat, fenced(GOOD)])
        made = proposer(tmp_path, model, hotter_retry=0.3, samples=1, temperature=0.5, hide_failure_types=hide)
        assert isinstance(made.propose(parent, archive, random.Random(0)), Proposal)
        assert [c["params"]["temperature"] for c in model.calls] == [0.5, pytest.approx(0.8)]  # asked again, hotter
        assert (REPEAT_NOTE.strip() in requests(model)[1]) == noted


def test_the_scaffold_shows_no_counterexample_while_illegal_moves_are_hidden(tmp_path: Path) -> None:
    """The scaffold's counterexamples are wrong legal lists (``illegal_move``): none asked for while
    that type is hidden, two otherwise; every proposer that asks the model gets the types."""
    def critic(hidden: list[str]) -> dict:
        cfg = AutoHarnessConfig(hide_failure_types=hidden, ideas={"fresh_roots": True})
        proposers = engine_config(cfg, tmp_path).proposers
        asking = [p.options for p in proposers if p.name in (HARNESS_PROPOSER, FRESH_ROOT)]
        assert len(asking) == 2 and all(o["hide_failure_types"] == hidden for o in asking)
        return asking[0]["refiner_options"]

    assert critic(["illegal_move"])["counterexamples"] == 0
    assert critic(["code_error"])["counterexamples"] == critic([])["counterexamples"] == 2


def test_a_name_that_is_no_failure_type_fails_at_load_naming_the_types() -> None:
    with pytest.raises(ValidationError, match="hide_failure_types") as raised:
        AutoHarnessConfig(hide_failure_types=["illegal_move", "illegal"])
    assert "'illegal' is no failure type" in str(raised.value)
    assert all(t.value in str(raised.value) for t in FailureType)
    assert AutoHarnessConfig(hide_failure_types=["code_error"]).hide_failure_types == [FailureType.CODE_ERROR]
