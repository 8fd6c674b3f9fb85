"""Disk bounds of trajectories: a file past its size is closed as a numbered segment; readers and
session erasure see every segment."""

from __future__ import annotations

from pathlib import Path

from ratchet.store import RunStore
from ratchet.store.writers import ROTATE_BYTES, TrajectoryWriter, trajectory_segments

MESSAGES = [{"role": "user", "content": "x" * 200}, {"role": "assistant", "content": "y" * 200}]


def test_a_trajectory_rotates_past_its_size_and_reads_back_whole(tmp_path: Path) -> None:
    run = RunStore(tmp_path / "runs").create_run("serve", {}, name="rotate")
    path = run.dir / "trajectories" / "chat.jsonl"
    writer = TrajectoryWriter(path, "chat", rotate_bytes=4000, on_session=run._index_session)
    for turn in range(60):
        writer.write(MESSAGES, turn=turn, session_id=f"s-{turn % 3}")
    segments = trajectory_segments(path)
    assert len(segments) > 5 and segments[-1] == path
    record_size = max(len(line) + 1 for line in path.read_text().splitlines())
    assert all(p.stat().st_size < 4000 + record_size for p in segments)  # no file grows past a record over
    assert [r["turn"] for r in run.read_trajectory("chat")] == list(range(60))  # every record, in order

    assert run.delete_session_data("s-1") == 20  # erasure reaches the rotated segments too
    assert {r["session_id"] for r in run.read_trajectory("chat")} == {"s-0", "s-2"}
    assert not any("s-1" in p.read_text() for p in trajectory_segments(path))


def test_the_default_writer_rotates_at_the_documented_size(tmp_path: Path) -> None:
    run = RunStore(tmp_path / "runs").create_run("serve", {}, name="default")
    writer = run.trajectory_writer("chat")
    assert writer.rotate_bytes == ROTATE_BYTES == 64 * 1024 * 1024
    writer.write(MESSAGES)
    assert trajectory_segments(writer.path) == [writer.path]  # nothing rotated below the size


def test_rebuilding_the_index_maps_rotated_segments_back_to_their_trajectory(tmp_path: Path) -> None:
    run = RunStore(tmp_path / "runs").create_run("serve", {}, name="rebuild")
    writer = TrajectoryWriter(run.dir / "trajectories" / "chat.jsonl", "chat", rotate_bytes=4000,
                              on_session=run._index_session)
    for turn in range(30):
        writer.write(MESSAGES, turn=turn, session_id=f"s-{turn % 3}")
    assert len(trajectory_segments(writer.path)) > 2
    sql = "SELECT session_id, trajectory, records FROM sessions WHERE run_id = ? ORDER BY session_id, trajectory"
    live = run.index.query(sql, (run.id,))
    assert [r["trajectory"] for r in live] == ["chat"] * 3 and sum(r["records"] for r in live) == 30

    run.reindex()
    assert run.index.query(sql, (run.id,)) == live  # the same rows: no "chat.00001" trajectories
