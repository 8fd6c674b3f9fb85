"""The loop end to end on the synthetic suite with in-test proposers: a real improvement is kept,
a bad edit is rejected with its reason (and shown to later proposals), the budget stops the run,
approval holds a candidate, a changed grader or a pass-everything grader stops the run."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from doubles import FILE, RecordingProposer, config, make_workspace

from ratchet.contracts import RatchetError
from ratchet.evolve.approval import approve, reject
from ratchet.evolve.archive import Archive
from ratchet.evolve.canary import CanaryFailed
from ratchet.evolve.loop import APPROVALS, Engine
from ratchet.evolve.workspace import PinMismatch
from ratchet.models import ScriptedModel
from ratchet.store import RunStore


def engine(tmp_path: Path, cfg, model=None) -> tuple[Engine, object]:
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    return Engine(cfg, run, model), run


def cfg_report_cap(eng: Engine) -> int:
    return eng.config.report.max_best_of_n


def test_a_planted_improvement_is_kept_and_reported_on_the_untouched_test_split(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.3)
    eng, run = engine(tmp_path, config(ws, options={"gain": 0.5}, iterations=2))
    summary = eng.execute()
    report = summary["report"]
    assert run.status()["status"] == "done" and summary["accepted"] == 2  # the original and the planted child
    best = eng.archive.get(report["best"]["id"])
    assert json.loads(best.files[FILE])["default"] == pytest.approx(0.8) and best.parent_id == report["original"]["id"]
    assert report["split"] == "test" and report["split_untouched"]
    assert report["comparison"]["best_minus_original"]["low"] > 0  # the CI excludes no gain
    best_of_n = report["original_best_of_n"]
    assert 1 < best_of_n["attempts"] <= cfg_report_cap(eng) and best_of_n["n"] == report["tasks"]
    assert best_of_n["budget_unit"] == "task evaluations"
    claims = report["claims"]["planted"]
    assert claims["predicted"] > 0 and 0 < claims["precision"] <= 1 and 0 < claims["recall"] <= 1
    assert run.read_json("evolve/report.json")["best"]["id"] == best.id


def test_the_run_stops_once_the_best_reaches_stop_at_score(tmp_path: Path) -> None:
    """AutoHarness's stop at h = 1.0: the first step's child plays every held-in task (p = 1.0),
    so of five steps one is taken; without the setting all five are (the control)."""
    ws = make_workspace(tmp_path, p=0.2)
    for stop, taken in ((1.0, 1), (None, 5)):
        eng, run = engine(tmp_path / str(stop), config(ws, options={"gain": 0.8}, iterations=5, stop_at_score=stop))
        summary = eng.execute()
        steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
        assert summary["state"] == "done" and len(steps) == taken
        assert summary["report"]["best"]["mean"] == 1.0


@pytest.mark.parametrize("selector", ["greedy", "dgm", "thompson", "pareto", "islands"])
def test_every_selector_drives_the_loop(tmp_path: Path, selector: str) -> None:
    ws = make_workspace(tmp_path, p=0.2)
    eng, run = engine(tmp_path, config(ws, options={"gain": 0.3}, iterations=3, selector={"name": selector}))
    summary = eng.execute()
    assert summary["accepted"] >= 2 and summary["report"]["best"]["mean"] > summary["report"]["original"]["mean"]
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert len(steps) == 3 and all(eng.archive.status(e["child"]) for e in steps if "child" in e)


def test_a_protected_edit_is_rejected_and_shown_to_the_next_proposal(tmp_path: Path) -> None:
    RecordingProposer.shown = []
    ws = make_workspace(tmp_path, p=0.4)
    eng, run = engine(tmp_path, config(ws, "doubles:RecordingProposer", iterations=2))
    eng.execute()
    rejected = eng.archive.rejected()
    assert len(rejected) == 1 and "grader/settings.json is protected" in rejected[0][1].reason
    assert RecordingProposer.shown[0] == [] and "is protected" in RecordingProposer.shown[1][0]
    assert (ws / "grader" / "settings.json").read_text() == json.dumps({"tasks": 40})  # never written


def test_the_budget_stops_the_run_and_it_still_reports(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.3)
    model = ScriptedModel(["0.6", "0.7", "0.8", "0.9"])
    eng, run = engine(tmp_path, config(ws, "doubles:ModelProposer", iterations=4, budget={"max_calls": 2}), model)
    summary = eng.execute()
    assert run.status()["status"] == "budget_exhausted" and summary["state"] == "budget_exhausted"
    assert len(model.calls) == 2 and run.llm_totals()["calls"] == 2
    assert "max_calls=2" in summary["report"]["stop_reason"]
    eng2, run2 = engine(tmp_path / "evals", config(ws, iterations=4, max_task_evals=100))
    assert eng2.execute()["state"] == "budget_exhausted" and eng2.spend.raw_spend()[0] >= 100


def test_approval_holds_a_candidate_until_approved_then_resumes(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.1)  # 0.1 -> 0.5 -> 0.9: both steps clear the gate
    cfg = config(ws, options={"gain": 0.4}, iterations=2, approval={"required": True, "wait": "end"})
    eng, run = engine(tmp_path, cfg)
    summary = eng.execute()
    assert summary["state"] == "waiting" and run.status()["status"] == "waiting"
    [held] = summary["waiting_for"]
    assert eng.archive.status(held) == "waiting" and run.load_checkpoint("evolve")["step"] == 1
    again = Engine(cfg, run).execute()  # resumed without an approval: still waiting, nothing new evaluated
    assert again["state"] == "waiting" and again["task_evals"] == summary["task_evals"]
    run.append_jsonl(APPROVALS, {"candidate": held})
    final = Engine(cfg, run).execute()
    [second] = final["waiting_for"]  # the second step's child, bred from the approved one, is held in turn
    resumed = Engine(cfg, run)
    assert resumed.archive.status(held) == "accepted" and resumed.archive.get(second).parent_id == held
    run.append_jsonl(APPROVALS, {"candidate": second})
    assert resumed.execute()["state"] == "done" and run.status()["status"] == "done"


def test_a_rejected_candidate_is_never_a_parent_and_later_proposals_see_why(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.1)
    cfg = config(ws, options={"gain": 0.4}, iterations=2, approval={"required": True, "wait": "end"})
    eng, run = engine(tmp_path, cfg)
    [held] = eng.execute()["waiting_for"]
    verdict = reject(run, held, "  not this way  ")
    assert verdict.verdict == "rejected" and verdict.reason == "not this way" and not verdict.run_running
    with pytest.raises(RatchetError, match="already rejected"):
        approve(run, held)
    resumed = Engine(cfg, run)
    assert resumed.execute()["state"] == "done"
    root = resumed.archive.candidates()[0].id
    # Step 2 starts from the original again (the rejected one is no parent) and makes the same change: known.
    last = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"][-1]
    assert last["parent"] == root and last["status"] == "duplicate" and "as rejected" in last["reason"]
    assert resumed.archive.status(held) == "rejected"
    [(cand, decision)] = resumed.archive.rejected()
    assert cand.id == held and decision.reason.startswith("rejected by a person: not this way (the gate had accepted it:")
    assert decision.numbers and not decision.accepted
    with pytest.raises(RatchetError, match="not waiting for approval"):
        approve(run, root)
    assert [e["kind"] for e in run.read_jsonl("evolve/events.jsonl")].count("rejected_by_person") == 1


def test_approval_by_polling_releases_the_waiting_loop(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.3)
    cfg = config(ws, options={"gain": 0.5}, iterations=1, approval={"required": True, "wait": "poll", "poll_s": 0.05})
    eng, run = engine(tmp_path, cfg)

    def approve_when_waiting() -> None:
        while not eng.archive.candidates("waiting"):
            time.sleep(0.02)
        run.append_jsonl(APPROVALS, {"candidate": eng.archive.candidates("waiting")[0].id})

    threading.Thread(target=approve_when_waiting, daemon=True).start()
    summary = eng.execute()
    assert summary["state"] == "done" and summary["accepted"] == 2
    assert [e["kind"] for e in run.read_jsonl("evolve/events.jsonl")].count("approved") == 1


def test_a_changed_protected_file_stops_the_run(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.3)
    eng, run = engine(tmp_path, config(ws, "doubles:GraderTamperer", iterations=3))
    with pytest.raises(PinMismatch, match="grader/settings.json changed"):
        eng.execute()
    assert run.status()["status"] == "failed" and "not the one this run started with" in run.status()["summary"]["error"]
    assert run.load_checkpoint("evolve")["step"] == 1  # the tampering step finished; the next one never started


def test_a_canary_catches_a_grader_that_passes_everything(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    cfg = config(ws, suite={"name": "doubles:PassEverythingSuite", "options": {"tasks": 40}})
    eng, run = engine(tmp_path, cfg)
    with pytest.raises(CanaryFailed, match="always-wrong.*gave 1.000"):
        eng.execute()
    assert run.status()["status"] == "failed" and not run.candidates()  # nothing was evaluated
    honest, _ = engine(tmp_path / "honest", config(ws, iterations=0))
    assert honest.execute()["state"] == "done"


def test_components_fail_clearly_on_a_bad_name_a_missing_module_or_bad_options(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    with pytest.raises(RatchetError, match="(?s)unknown selector .best.*greedy"):
        engine(tmp_path, config(ws, selector={"name": "best"}))
    with pytest.raises(RatchetError, match="is not available: module nowhere is missing"):
        engine(tmp_path / "b", config(ws, "nowhere:Proposer"))
    with pytest.raises(RatchetError, match="(?s)gate .paired. options.*alpha"):
        engine(tmp_path / "c", config(ws, gate={"name": "paired", "options": {"alpha": 2}}))
    with pytest.raises(RatchetError, match="task ids the suite does not have: nope"):
        engine(tmp_path / "d", config(ws, splits={"guard": ["nope"]}))


def test_a_failing_proposer_costs_its_step_and_an_early_budget_stop_reports_nothing(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    eng, run = engine(tmp_path, config(ws, "doubles:ModelProposer", iterations=2),
                      ScriptedModel(["not a number"], cycle=True))
    with pytest.raises(ValueError):  # a bug in a proposer is not swallowed
        eng.execute()
    eng, run = engine(tmp_path / "b", config(ws, "doubles:ModelProposer", iterations=2), ScriptedModel([]))
    summary = eng.execute()  # the scripted model raises RatchetError: out of responses
    errors = [e for e in run.read_jsonl("evolve/events.jsonl") if e.get("status") == "proposer_error"]
    assert len(errors) == 2 and "ran out of responses" in errors[0]["reason"] and summary["state"] == "done"
    early, run = engine(tmp_path / "c", config(ws, max_task_evals=5))
    assert early.execute()["state"] == "budget_exhausted" and run.read_json("evolve/report.json") is None


def test_a_path_that_leaves_the_workspace_is_rejected_without_being_stored(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    eng, run = engine(tmp_path, config(ws, "doubles:FilesProposer", {"files": {"../../escape.py": "x = 1\n"}}, iterations=1))
    assert eng.execute()["state"] == "done"
    [step] = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert step["status"] == "rejected" and "must be relative and stay inside" in step["reason"]
    assert len(run.candidates()) == 1 and not (tmp_path / "escape.py").exists()



def test_a_step_that_makes_no_candidate_reports_the_runs_best_score_not_zero(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.6)
    eng, run = engine(tmp_path, config(ws, "noop", iterations=1))
    eng.execute()
    [step] = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    original = eng.archive.score(eng.archive.candidates("accepted")[0].id, "heldin")
    assert step["status"] == "rejected" and "child" not in step and original > 0
    assert step["best"] == original  # the progress line's "best" after this step


def test_a_report_made_again_sizes_best_of_n_by_the_search_alone(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.5)
    cfg = config(ws, options={"gain": 0.3}, iterations=1, report={"max_best_of_n": 1000})
    eng, run = engine(tmp_path, cfg)
    first = eng.execute()["report"]["original_best_of_n"]
    search = first["search_spend"]
    assert first["budget_unit"] == "task evaluations" and 1 < first["attempts"] == first["uncapped_attempts"]
    # Resuming the finished run makes the report again: the first report's evaluations are not search.
    again = Engine(cfg, run, None).execute()["report"]["original_best_of_n"]
    assert again == first
    # Resumed for one more step: its spend is the search's, both steps, without the reports'.
    longer = cfg.model_copy(update={"iterations": 2})
    more = Engine(longer, run, None)
    report = more.execute()["report"]["original_best_of_n"]
    spend = run.read_json("evolve/report_spend.json")
    assert spend["step"] == 2 and spend["measured_evals"] > 0
    assert report["search_spend"] == spend["at_evals"] - spend["measured_evals"] > search


def test_a_finished_reports_evaluations_do_not_count_against_a_resumed_search_budget(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.5)
    cfg = config(ws, options={"gain": 0.3}, iterations=1)
    # What two steps of search evaluate, measured on a twin run made in one go.
    twin, _ = engine(tmp_path / "twin", cfg.model_copy(update={"iterations": 2}))
    two_steps = twin.execute()["report"]["original_best_of_n"]["search_spend"]
    eng, run = engine(tmp_path, cfg)
    eng.execute()
    # Resumed for the second step with exactly that budget: the first report's evaluations are
    # not search, so the run finishes as the twin did instead of stopping on the budget.
    longer = cfg.model_copy(update={"iterations": 2, "max_task_evals": two_steps})
    summary = Engine(longer, run, None).execute()
    assert summary["state"] == "done", summary
    assert summary["report"]["original_best_of_n"]["search_spend"] == two_steps

class _Cut(Exception):
    """Stands for a SIGKILL between a step's writes and its checkpoint."""


def test_a_step_cut_off_before_its_checkpoint_reruns_to_what_the_uninterrupted_run_decided(tmp_path, monkeypatch):
    # The model proposer's prompt lists the rejected candidates: a rerun step that saw its own
    # first attempt would ask another prompt, pay a new reply and grow a different archive.
    ws = make_workspace(tmp_path, p=0.2)
    paid: list[str] = []

    def respond(messages) -> str:
        paid.append(messages[-1]["content"])
        return str(0.2 + sum(map(ord, messages[-1]["content"])) % 70 / 100)

    def kept(run) -> set:
        return {(c["id"], c["parent_id"], c["status"]) for c in run.candidates()}

    cfg = config(ws, "doubles:ModelProposer", iterations=6)
    reference, reference_run = engine(tmp_path / "ref", cfg, ScriptedModel(respond))
    reference.execute()
    reference_calls, expected = len(paid), kept(reference_run)
    assert any(status == "rejected" for *_, status in expected)  # else the prompts never change

    checkpoint = Engine._checkpoint
    for cut in range(1, 7):
        paid.clear()

        def cut_after(self, state, cut=cut):
            if state["step"] == cut:
                raise _Cut
            checkpoint(self, state)

        monkeypatch.setattr(Engine, "_checkpoint", cut_after)
        eng, run = engine(tmp_path / f"cut{cut}", cfg, ScriptedModel(respond))
        with pytest.raises(_Cut):
            eng.execute()
        monkeypatch.setattr(Engine, "_checkpoint", checkpoint)
        Engine(cfg, run, ScriptedModel(respond)).execute()
        assert kept(run) == expected, f"cut after step {cut}"
        assert len(paid) == reference_calls, f"cut after step {cut}: a reply paid twice"


def test_a_rerun_step_is_tested_at_the_alpha_of_its_first_attempt(tmp_path, monkeypatch):
    # Alpha spending tests the k-th paired test of a run at alpha / 2^k. The child here improves all
    # 6 held-in tasks: p = 1/64, accepted by the 1st test (alpha 0.025) and refused by a 2nd one
    # (0.0125). A kill after the step's decision, before its checkpoint: the rerun step must not
    # count its own first decision as an earlier test.
    ws = make_workspace(tmp_path, p=0.0, tasks=24)
    cfg = config(ws, options={"gain": 1.0}, iterations=1, suite={"name": "noisy", "options": {"tasks": 24}},
                 gate={"name": "paired", "options": {"correction": "spending", "alpha": 0.05}})

    def child_decision(run) -> dict:
        [child] = [c for c in run.candidates() if c["parent_id"]]
        return {"status": child["status"], **run.read_json(f"evolve/decisions/{child['id']}.json")["numbers"]}

    reference, reference_run = engine(tmp_path / "ref", cfg)
    reference.execute()
    expected = child_decision(reference_run)
    assert expected["status"] == "accepted" and expected["test_index"] == 1
    assert expected["alpha"] / 2 < expected["p_value"] <= expected["alpha"]  # a 2nd test would refuse it

    checkpoint = Engine._checkpoint

    def cut_after_step_0(self, state):
        if state["step"] == 1:
            raise _Cut
        checkpoint(self, state)

    monkeypatch.setattr(Engine, "_checkpoint", cut_after_step_0)
    eng, run = engine(tmp_path / "cut", cfg)
    with pytest.raises(_Cut):
        eng.execute()
    assert child_decision(run)["status"] == "accepted"  # decided before the kill
    monkeypatch.setattr(Engine, "_checkpoint", checkpoint)
    Engine(cfg, run).execute()
    assert child_decision(run) == expected


CLAIM_ONLY = "```\nTARGET: t3 fails\nROOT CAUSE: the default is too low\nFLIPS: t3\n```\n"


def test_a_reply_without_an_edit_is_retried_paid_and_kept_as_a_failed_proposal(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    cfg = config(ws, "reflective", {"surfaces": [FILE]}, iterations=2)
    model = ScriptedModel([CLAIM_ONLY, "I cannot."], cycle=True)
    eng, run = engine(tmp_path, cfg, model)
    summary = eng.execute()
    assert summary["state"] == "done" and summary["model_calls"] == 4  # each step: the ask and one retry
    failed = eng.archive.unusable()
    assert [f["step"] for f in failed] == [1, 0] and all(f["model_calls"] == 2 for f in failed)
    assert failed[0]["proposer"] == "reflective" and failed[0]["claim"] == "t3 fails"
    assert "first reply: the reply's block holds only the claim lines" in failed[0]["reason"]
    assert [a["ask"] for a in failed[0]["attempts"]] == ["first reply", "format retry 1"]
    # the second step's proposal is shown the first one's failure
    second_prompt = model.calls[2]["messages"][0]["content"]
    assert "aimed at: t3 fails; no usable change (reflective): first reply" in second_prompt
    proposals = summary["report"]["proposals"]
    assert proposals["failed"] == 2 and proposals["failed_model_calls"] == 4 and proposals["total"] == 0
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert [(e["status"], e["model_calls"]) for e in steps] == [("no_proposal", 2), ("no_proposal", 2)]


def test_the_budget_stops_a_run_inside_a_format_retry(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    cfg = config(ws, "reflective", {"surfaces": [FILE]}, iterations=3, budget={"max_calls": 3})
    eng, run = engine(tmp_path, cfg, ScriptedModel([CLAIM_ONLY, "I cannot."], cycle=True))
    summary = eng.execute()
    assert summary["state"] == "budget_exhausted" and summary["model_calls"] == 3
    assert [f["step"] for f in eng.archive.unusable()] == [0]  # step 1 was stopped at its retry


@pytest.mark.parametrize("propose", [False, True])
def test_each_step_counts_the_model_calls_its_proposal_made(tmp_path: Path, propose: bool) -> None:
    """A proposer whose agent calls the model itself (the agentic one on the runtime) is counted
    like one that asks through ModelProposer.ask: the step table showed 0 for 12 calls."""
    ws = make_workspace(tmp_path)
    model = ScriptedModel(["ok"], cycle=True)
    eng, run = engine(tmp_path, config(ws, "doubles:AgentLikeProposer", {"calls": 3, "propose": propose},
                                       iterations=2), model)
    eng.execute()
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert [e["model_calls"] for e in steps] == [3, 3] and len(model.calls) == 6
    if not propose:
        assert [f["model_calls"] for f in eng.archive.unusable()] == [3, 3]


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_deterministic_proposer_that_gave_up_on_a_parent_is_not_drawn_for_it_again(tmp_path: Path, deterministic: bool) -> None:
    """Drawn at 100 to 1, a proposer that gives up would take nearly every step; one that
    declares itself deterministic is drawn again only once the archive gains a candidate."""
    ws = make_workspace(tmp_path, p=0.2)
    proposers = [{"name": "doubles:GivesUpProposer", "weight": 100, "options": {"deterministic": deterministic}},
                 {"name": "doubles:PlantedProposer", "weight": 1, "options": {"gain": 0.3}}]
    eng, run = engine(tmp_path, config(ws, iterations=4, proposers=proposers))
    eng.execute()
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    drawn = [e["proposer"] for e in steps]
    if deterministic:
        assert drawn == ["gives_up", "planted", "gives_up", "planted"]
        assert steps[1]["parent"] == steps[0]["parent"] and steps[3]["parent"] == steps[2]["parent"] != steps[0]["parent"]
    else:
        assert drawn.count("gives_up") >= 3  # the waste the declaration avoids


@pytest.mark.parametrize("exhausted", [True, False])
def test_an_exhausted_skip_does_not_use_up_the_runs_steps(tmp_path: Path, exhausted: bool) -> None:
    """A deterministic proposer that says it has nothing to propose (``Skip.exhausted``) leaves the
    run's steps to the others, here the one that asks the model: the calls are spent, not the steps."""
    ws = make_workspace(tmp_path, p=0.2)
    proposers = [{"name": "doubles:GivesUpProposer", "weight": 100, "options": {"exhausted": exhausted}},
                 {"name": "doubles:ModelProposer", "weight": 1}]
    model = ScriptedModel([str(0.2 + i / 100) for i in range(1, 20)])
    eng, run = engine(tmp_path, config(ws, iterations=4, proposers=proposers), model)
    summary = eng.execute()
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    counted = [e["proposer"] for e in steps if e.get("counted", True)]
    if exhausted:
        assert counted == ["model"] * 4 and summary["model_calls"] == 4 == len(model.calls)
        assert {e["proposer"] for e in steps if e.get("counted") is False} == {"gives_up"}
    else:
        assert counted.count("gives_up") >= 2 and summary["model_calls"] <= 2  # half the steps lost


def test_an_exhausted_proposer_left_alone_still_ends_the_run(tmp_path: Path) -> None:
    """Once it gave up on every parent there is nothing else to draw: its steps count again, so the
    run ends at ``iterations`` instead of looping."""
    ws = make_workspace(tmp_path, p=0.2)
    proposers = [{"name": "doubles:GivesUpProposer", "options": {"exhausted": True}}]
    eng, run = engine(tmp_path, config(ws, iterations=3, proposers=proposers))
    assert eng.execute()["state"] == "done"
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    assert len(steps) == 4 and [e.get("counted", True) for e in steps] == [False, True, True, True]


@pytest.mark.parametrize("schedule", ["weighted", "round_robin"])
def test_round_robin_asks_the_proposers_in_turn_whatever_their_weights(tmp_path: Path, schedule: str) -> None:
    """Weighted at 100 to 1 the first proposer takes nearly every step; in turn each gets its share,
    and a proposer the loop skips for this parent (a deterministic one that gave up) passes its turn on."""
    ws = make_workspace(tmp_path, p=0.2)
    proposers = [{"name": "doubles:PlantedProposer", "weight": 100, "options": {"gain": 0.0}},
                 {"name": "doubles:GivesUpProposer", "weight": 1, "options": {"deterministic": True}},
                 {"name": "noop", "weight": 1}]
    eng, run = engine(tmp_path, config(ws, iterations=6, proposers=proposers, proposer_schedule=schedule))
    eng.execute()
    drawn = [e["proposer"] for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    if schedule == "round_robin":  # step 4: gives_up already gave up on this parent, so noop goes
        assert drawn == ["planted", "gives_up", "noop", "planted", "noop", "noop"]
    else:
        assert drawn.count("planted") >= 5


def test_a_proposer_model_answers_the_proposers_and_its_replies_replay_on_resume(tmp_path: Path) -> None:
    """``proposer_model`` (a larger model proposing for a small one): the proposers ask it, not the
    run's model; its calls count against the one budget and have their own journal, so a step
    rerun after a kill replays its proposal instead of asking again."""
    from ratchet.evolve.cache import PROPOSER_REPLIES, REPLIES
    from ratchet.evolve.loop import CHECKPOINT

    ws = make_workspace(tmp_path, p=0.3)
    cfg = config(ws, "doubles:ModelProposer", iterations=1)
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    main, proposing = ScriptedModel([]), ScriptedModel(["0.6", "0.9"])
    summary = Engine(cfg, run, main, proposer_model=proposing).execute()
    assert len(proposing.calls) == 1 and main.calls == [] and summary["model_calls"] == 1
    assert len(run.read_jsonl(PROPOSER_REPLIES)) == 1 and run.read_jsonl(REPLIES) == []
    after_step_0 = run.load_checkpoint(CHECKPOINT)
    longer = cfg.model_copy(update={"iterations": 2})
    Engine(longer, run, main, proposer_model=proposing).execute()
    assert len(proposing.calls) == 2
    decided = {c.id: c.meta.get("step") for c in Archive(run).candidates()}
    run.checkpoint(CHECKPOINT, after_step_0)  # killed after step 1's proposal, before its checkpoint
    silent = ScriptedModel([])  # any new question would raise: out of responses
    summary = Engine(longer, run, main, proposer_model=silent).execute()
    assert silent.calls == [] and summary["replayed_replies"] == 1
    assert {c.id: c.meta.get("step") for c in Archive(run).candidates()} == decided


@pytest.mark.parametrize("novelty", [True, False])
def test_with_novelty_a_reformatted_program_is_a_duplicate_and_never_evaluated(tmp_path: Path, novelty: bool) -> None:
    ws = make_workspace(tmp_path, extra={"policy.py": "def f(x):\n    return x\n", "notes/a.md": "Be brief.\n"})
    cfg = config(ws, "cosmetic", {"surfaces": ["policy.py"]}, static={"load_entry": False, "novelty": novelty})
    eng, run = engine(tmp_path, cfg)
    eng.execute()
    steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
    root = eng.archive.candidates()[0].id
    if novelty:  # a comment added to a Python file: the same program, refused before any evaluation
        assert [e["status"] for e in steps] == ["duplicate"] * 3 and len(eng.archive.candidates()) == 1
        assert all(f"the same program as {root} (accepted)" in e["reason"] for e in steps)
    else:
        assert [e["status"] for e in steps] == ["rejected"] * 3 and len(eng.archive.candidates()) == 4
    # a prompt's white space can change a model's reply: a Markdown file counts byte for byte
    md = config(ws, "cosmetic", {"surfaces": ["notes/*.md"]}, static={"load_entry": False, "novelty": True}, iterations=1)
    eng, run = engine(tmp_path / "md", md)
    eng.execute()
    assert [e["status"] for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"] == ["rejected"]


def heldin_evals(run, eng: Engine) -> dict[str, int]:
    """candidate id -> how many held-in evaluations were paid for it."""
    from ratchet.evolve.cache import EVALS

    heldin = {t.id for t in eng.splits["heldin"]}
    counts: dict[str, int] = {}
    for r in run.read_jsonl(EVALS):
        if r["task_id"] in heldin:
            counts[r["candidate"]] = counts.get(r["candidate"], 0) + 1
    return counts


def test_futility_stops_a_child_that_can_no_longer_pass_and_changes_no_decision(tmp_path: Path) -> None:
    """A child as bad as its parent (p = 0 re-indented) is stopped after a few held-in tasks;
    every decision is the one the full evaluation makes, a planted improvement still kept."""
    outcomes, archives = {}, {}
    for futility in (False, True):
        for name, options in (("same", {"cosmetic": True}), ("better", {"gain": 0.9})):
            ws = make_workspace(tmp_path / f"{name}-{futility}", p=0.0)
            cfg = config(ws, options=options, iterations=2, futility={"enabled": futility})
            eng, run = engine(tmp_path / f"{name}-{futility}", cfg)
            eng.execute()
            steps = [e for e in run.read_jsonl("evolve/events.jsonl") if e["kind"] == "step"]
            outcomes[(name, futility)] = ([e["status"] for e in steps], heldin_evals(run, eng), steps)
            archives[(name, futility)] = eng.archive
    full = 10 * 3  # 10 held-in tasks x 3 seeds
    for name in ("same", "better"):
        assert outcomes[(name, True)][0] == outcomes[(name, False)][0]
    assert outcomes[("better", True)][0][0] == "accepted"
    same_statuses, same_evals, same_steps = outcomes[("same", True)]
    children = [c for c, n in same_evals.items() if n < full]  # the original ran them all
    assert same_statuses == ["rejected", "rejected"] and len(children) == 2
    assert all("futility: after" in e["reason"] for e in same_steps)
    # a stopped child has no held-in score (a mean over a prefix ranks it wrongly), its results kept
    archive = archives[("same", True)]
    assert all(archive.score(c, "heldin") is None and archive.results(c, "heldin") for c in children)
    assert archive.score(archive.candidates()[0].id, "heldin") is not None
    # without futility every child ran every held-in task on every seed
    assert all(n == full for n in outcomes[("same", False)][1].values())
