"""A run continued away from the store: the worker's scratch copy, the driver writing the result."""

from __future__ import annotations

from pathlib import Path

from ratchet.executors import LocalExecutor
from ratchet.store import RunStore
from ratchet.store.transfer import RunJob, continue_runs, directory_files, run_job


def bump(root: Path, run) -> int:
    """Work done on a worker: reads a folder shipped beside the store, writes the run, drops a file."""
    count = int((run.read_json("count.json") or {}).get("n", 0)) + int((root / "extra" / "step.txt").read_text())
    run.write_json("count.json", {"n": count})
    run.path("stale.txt").unlink()
    run.append_jsonl("log.jsonl", {"n": count})
    return count


def test_a_run_job_works_on_a_scratch_copy_and_the_driver_writes_the_result(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    runs = [store.create_run("test", {}) for _ in range(2)]
    for run in runs:
        run.write_json("count.json", {"n": 1})
        run.path("stale.txt").write_text("gone after the job")
    jobs = [RunJob(r.id, directory_files(r.dir), bump, {"extra": {"step.txt": b"2"}}) for r in runs]

    alone = run_job(jobs[0])  # what a worker does: the store itself is not touched
    assert alone.value == 3 and "stale.txt" not in alone.files and store.open_run(runs[0].id).read_json("count.json") == {"n": 1}

    with LocalExecutor(2) as pool:
        results = list(continue_runs(pool, jobs, store))
    assert sorted(r.value for r in results) == [3, 3]
    for run in runs:
        kept = store.open_run(run.id)
        assert kept.read_json("count.json") == {"n": 3} and kept.read_jsonl("log.jsonl") == [{"n": 3}]
        assert not kept.path("stale.txt").exists()  # the run holds exactly what came back
