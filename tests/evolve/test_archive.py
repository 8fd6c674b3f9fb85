"""The archive over the run store: lineage, children (a merge counts for both parents), results and
decisions read back from disk, rejected candidates newest first with their reasons, claim checks."""

from __future__ import annotations

from pathlib import Path

from ratchet.contracts import Candidate, Decision, TaskResult
from ratchet.evolve.archive import Archive, claim_check
from ratchet.store import RunStore


def cand(text: str, parent: str | None = None, **meta) -> Candidate:
    return Candidate.from_files("k", {"a.txt": text}, parent, **meta)


def test_lineage_children_results_and_rejections_survive_a_reopen(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    run = store.create_run("evolve", {})
    archive = Archive(run)
    root, a, b = cand("root"), None, None
    archive.add(root, "accepted")
    a = cand("a", root.id)
    archive.add(a, "accepted")
    b = cand("b", a.id)
    merged = cand("m", a.id, parents=[a.id, root.id])
    for c, why in ((b, "held-in gain +0.010 does not clear the noise band"), (merged, "static check: x is protected")):
        archive.add(c)
        archive.record_decision(c.id, Decision(False, why, {"heldin_gain": 0.01}))
        archive.set_status(c.id, "rejected")
    archive.record_results(a.id, "heldin", [TaskResult("t1", 0, 1.0), TaskResult("t1", 1, 0.0), TaskResult("t2", 0, 1.0)])

    again = Archive(store.open_run(run.id))  # everything comes back from disk
    assert [c.id for c in again.candidates("accepted")] == [root.id, a.id]
    assert again.lineage(b.id) == [root.id, a.id, b.id]
    assert set(again.children(a.id)) == {b.id, merged.id} and again.children(root.id) == [a.id, merged.id]
    assert again.score(a.id, "heldin") == 2 / 3 and again.results(a.id, "heldin")[1] == TaskResult("t1", 1, 0.0)
    assert again.score(root.id, "heldin") is None
    rejected = again.rejected()
    assert [c.id for c, _ in rejected] == [merged.id, b.id] and rejected[0][1].reason.startswith("static check")
    assert again.rejected(limit=1) == rejected[:1]
    assert run.evaluations(a.id)[0]["per_task"] == {"t1": 0.5, "t2": 1.0}  # an Evaluation row in the store too


def test_claim_check_counts_predicted_and_actual_flips_on_common_tasks() -> None:
    child = cand("c", "p", proposer="reflective", claim={"predicted_flips": ["t1", "t2", "elsewhere"]})
    check = claim_check(child, {"t1": 0.0, "t2": 0.0, "t3": 0.0, "t4": 1.0}, {"t1": 1.0, "t2": 0.0, "t3": 0.5, "t4": 0.0})
    assert check == {"predicted": ["t1", "t2"], "actual": ["t1", "t3"], "hit": ["t1"], "proposer": "reflective"}


def test_a_candidate_cut_off_inside_add_is_not_in_the_archive_until_added_again(tmp_path: Path) -> None:
    # A kill inside add_candidate leaves the files and status.json, not meta.json (written last):
    # the resumed step must see no candidate, add it again and go on (it once failed with
    # "run ... has no candidate ..." when it decided the half-written child).
    store = RunStore(tmp_path)
    run = store.create_run("evolve", {})
    root = cand("root")
    Archive(run).add(root, "accepted")
    child = cand("child", root.id, step=1)
    Archive(run).add(child, "evaluating")
    (run.dir / "candidates" / child.id / "meta.json").unlink()  # and its index row, written after it
    run.index.execute("DELETE FROM candidates WHERE run_id = ? AND id = ?", (run.id, child.id))

    resumed = Archive(store.open_run(run.id))
    assert not run.has_candidate(child.id)
    assert resumed.status(child.id) is None and resumed.as_of(1).status(child.id) is None
    assert [c.id for c in resumed.candidates()] == [root.id]
    resumed.add(child, "evaluating")
    resumed.set_status(child.id, "rejected", 0.5)
    assert resumed.status(child.id) == "rejected" and resumed.get(child.id).files == child.files
