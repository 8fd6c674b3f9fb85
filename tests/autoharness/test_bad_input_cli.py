"""Bad input to ``ratchet autoharness`` (unknown game, unknown or missing model, a run directory it
cannot write, a full disk): a one-screen error naming the fix and a documented exit code, never a
traceback. Each case runs the real command in a fresh process."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ratchet.cli import EXIT_BAD_INPUT, EXIT_HOST_REFUSED

ENTRY = "import sys\nfrom ratchet.cli import main\nsys.argv = ['ratchet', *sys.argv[1:]]\nmain()\n"
#: Every write of the run store's atomic writer fails with ``errno`` once ``after`` writes went through.
FULL = (
    "import errno, os\nimport ratchet.store.files as files\n"
    "real, count = files.write_bytes_atomic, [0]\n"
    "def refused(path, data):\n"
    "    count[0] += 1\n"
    "    if count[0] > int(os.environ['WRITES_BEFORE_FULL']):\n"
    "        raise OSError(int(os.environ['WRITE_ERRNO']), os.strerror(int(os.environ['WRITE_ERRNO'])), str(path))\n"
    "    return real(path, data)\n"
    "files.write_bytes_atomic = refused\n"
)
QUICK = ["--model", "scripted:", "--method", "faithful", "--iterations", "1", "--protocol", "none",
         "--set", "eval_steps=5", "--set", "search_seeds=[0]", "--set", "heldout_seeds=[9]"]


def _ratchet(tmp_path: Path, *args: str, prelude: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", prelude + ENTRY, *args], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=environ)


def _assert_clear(done: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "error:" in done.stderr and "hint:" in done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr[-2000:])


def test_unknown_env_id(tmp_path):
    done = _ratchet(tmp_path, "autoharness", "--env", "NoSuchGame-v0", *QUICK, "--store", str(tmp_path / "runs"),
                    "--set", f"library_dir={tmp_path / 'lib'}")
    _assert_clear(done, EXIT_BAD_INPUT, "NoSuchGame-v0", "ratchet envs list")


def test_unknown_model_spec(tmp_path):
    done = _ratchet(tmp_path, "autoharness", "--model", "nosuch:thing", "--store", str(tmp_path / "runs"))
    _assert_clear(done, EXIT_BAD_INPUT, "nosuch:thing", "accepted forms")


def test_missing_model_files(tmp_path):
    missing_file = _ratchet(tmp_path, "autoharness", "--model", f"local:{tmp_path / 'nope.gguf'}",
                            "--store", str(tmp_path / "runs"))
    _assert_clear(missing_file, EXIT_BAD_INPUT, "nope.gguf", "check the path")
    not_pulled = _ratchet(tmp_path, "autoharness", "--model", "local:qwen2.5-coder-0.5b", "--store", str(tmp_path / "runs"),
                          env={"RATCHET_CACHE_DIR": str(tmp_path / "empty-cache")})
    _assert_clear(not_pulled, EXIT_BAD_INPUT, "is absent", "ratchet models pull qwen2.5-coder-0.5b")


def test_a_run_directory_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = _ratchet(tmp_path, "autoharness", *QUICK, "--store", str(blocker / "runs"))
    _assert_clear(done, EXIT_HOST_REFUSED, "a-file", "not a directory", "--store")


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS])
def test_a_run_directory_that_refuses_writes(tmp_path, code):
    # As root, permission bits do not stop a write; the store's writer is made to refuse instead.
    done = _ratchet(tmp_path, "autoharness", *QUICK, "--store", str(tmp_path / "runs"), prelude=FULL,
                    env={"WRITES_BEFORE_FULL": "0", "WRITE_ERRNO": str(code)})
    _assert_clear(done, EXIT_HOST_REFUSED, "could not write", "writable directory")


def test_a_full_disk_mid_run_is_a_clear_error_and_the_run_resumes(tmp_path):
    store = tmp_path / "runs"
    options = [*QUICK, "--store", str(store), "--set", f"library_dir={tmp_path / 'lib'}"]
    full = _ratchet(tmp_path, "autoharness", *options, prelude=FULL,
                    env={"WRITES_BEFORE_FULL": "4", "WRITE_ERRNO": str(errno.ENOSPC)})
    _assert_clear(full, EXIT_HOST_REFUSED, "the disk is full", "free some space", "--resume")
    run_ids = [p.name for p in store.iterdir() if (p / "run.json").exists()]
    assert len(run_ids) == 1
    resumed = _ratchet(tmp_path, "autoharness", *options, "--resume", run_ids[0])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (store / run_ids[0] / "report.json").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a /proc file system, where nothing can be made")
@pytest.mark.parametrize("command", [
    ["autoharness", *QUICK, "--store"],
    ["play", "--env", "TicTacToe-v0", "--episodes", "1", "--run-dir"],
    ["evolve", "run", "evolve.yaml", "--root"],
    ["agent", "run", "--model", "scripted:", "--limit", "1", "--store"],
], ids=["autoharness", "play", "evolve", "agent"])
def test_a_store_where_nothing_can_be_made_is_one_error_naming_it(tmp_path, command):
    """Every command opens its store the same way, so each says the same: the path and the fix,
    exit 3, and no traceback, whatever name the flag was given."""
    (tmp_path / "evolve.yaml").write_text("workspace: .\nsuite: {name: noisy}\n")
    (tmp_path / "manifest.yaml").write_text("name: w\neditable: [p.txt]\n")
    (tmp_path / "p.txt").write_text("x\n")
    done = _ratchet(tmp_path, *command, "/proc/ratchet-runs")
    _assert_clear(done, EXIT_HOST_REFUSED, "/proc/ratchet-runs", "--store")
    assert [line for line in done.stderr.splitlines() if line.startswith("error:")] == [
        "error: cannot use /proc/ratchet-runs as the run store: no directory can be made under /proc"]


def test_a_run_that_fails_after_it_was_made_is_marked_failed_with_why(tmp_path):
    """The model file is checked once the run exists: the run is then marked failed with the
    reason, in its status and in the index, instead of staying 'running' for good."""
    from ratchet.store import RunStore

    store = tmp_path / "runs"
    done = _ratchet(tmp_path, "autoharness", *QUICK[2:], "--model", f"local:{tmp_path / 'nope.gguf'}",
                    "--store", str(store))
    _assert_clear(done, EXIT_BAD_INPUT, "nope.gguf")
    [row] = RunStore(store).list_runs()
    assert row["status"] == "failed"
    status = RunStore(store).open_run(row["id"]).status()
    assert status["status"] == "failed" and "nope.gguf" in status["summary"]["error"]


def test_a_suite_whose_model_does_not_load_marks_its_batch_run_failed(tmp_path):
    from ratchet.store import RunStore

    store = tmp_path / "runs"
    done = _ratchet(tmp_path, "autoharness", "--suite", "autoharness-40", "--protocol", "none",
                    "--model", f"local:{tmp_path / 'nope.gguf'}", "--store", str(store))
    _assert_clear(done, EXIT_BAD_INPUT, "nope.gguf")
    [row] = RunStore(store).list_runs()
    assert row["kind"] == "autoharness-batch" and row["status"] == "failed"
    assert "nope.gguf" in RunStore(store).open_run(row["id"]).status()["summary"]["error"]
