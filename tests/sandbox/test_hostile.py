"""Hostile candidates: each is contained with the right error, and the run goes on."""

from __future__ import annotations

import builtins
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import ratchet.sandbox.sandbox as sandbox_module
from ratchet.sandbox import (
    HarnessCodeError,
    HarnessCrashed,
    HarnessImportError,
    HarnessMemoryError,
    HarnessOutputError,
    HarnessTimeout,
    Sandbox,
)
from ratchet.sandbox.isolation import interpreter_prefixes


def _uid_processes(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
            count += int(uid_line.split()[1]) == uid
    return count


# -- time -------------------------------------------------------------------------------------


def test_infinite_loop_times_out_with_the_looping_line(make, run_continues):
    sb = make(
        """
        def propose_action(board):
            n = 0
            while True:
                n += 1
        """
    )
    with pytest.raises(HarnessTimeout) as info:
        sb.call("propose_action", "board", timeout_s=0.5)
    assert info.value.limit == "wall"
    tail = info.value.traceback_tail
    assert 'File "harness.py", line 4' in tail or 'File "harness.py", line 5' in tail
    assert "TimeoutError: still running after 0.5 s" in tail
    assert "Timeout" in info.value.feedback()
    run_continues(sb)


def test_loop_that_swallows_the_timeout_is_killed(make, run_continues):
    sb = make(
        """
        def propose_action(board):
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    pass
        """,
        kill_grace_s=0.3,
    )
    pid = sb.start() and sb.worker_pid
    with pytest.raises(HarnessTimeout, match="killed"):
        sb.call("propose_action", "board", timeout_s=0.3)
    assert sb.stats["kills"] == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    run_continues(sb)


def test_cpu_budget_kills_with_sigxcpu(make, run_continues):
    sb = make(
        """
        def spin():
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    pass
        """,
        cpu_seconds=1,
    )
    with pytest.raises(HarnessTimeout) as info:
        sb.call("spin", timeout_s=20)
    assert info.value.limit == "cpu"
    run_continues(sb)


# -- processes --------------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap_only")
def test_fork_bomb_is_bounded_and_every_child_ends(make, run_continues):
    sb = make(
        """
        import os
        def propose_action(board):
            while True:
                try:
                    os.fork()
                except OSError:
                    pass

        def count_forks():
            import time
            made = 0
            try:
                while made < 1000:
                    if os.fork() == 0:
                        time.sleep(60)
                        os._exit(0)
                    made += 1
            except OSError as exc:
                return [made, exc.errno]
            return [made, 0]
        """,
        max_processes=8,
    )
    if sb.start() and sb.worker_uid is None:
        pytest.skip("RLIMIT_NPROC needs a uid of its own, which only a root parent can give the worker")
    made, errno = sb.call("count_forks")
    assert made < 8 and errno == 11  # EAGAIN from RLIMIT_NPROC
    uid = sb.worker_uid
    with pytest.raises(HarnessTimeout):
        sb.call("propose_action", "board", timeout_s=1.0)
    assert _uid_processes(uid) == 0  # the worker forked, so it was recycled with all its children
    run_continues(sb)
    sb.close()
    assert _uid_processes(uid) == 0


def test_killing_its_parent_fails_and_the_test_process_survives(make, run_continues):
    sb = make(
        """
        import os, signal
        def kill_parent():
            os.kill(os.getppid(), signal.SIGKILL)
            return "still here"
        def kill_everything():
            os.kill(-1, signal.SIGKILL)
            return "still here"
        def kill_itself():
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    # In the PID namespace the parent is bubblewrap's init, owned by root: the signal is refused
    # (or, without bubblewrap, the test process is root-owned and the worker is not).
    with pytest.raises(HarnessCodeError, match="PermissionError|ProcessLookupError"):
        sb.call("kill_parent")
    # kill(-1) reaches every process the code may signal except itself: none, in its namespace.
    with pytest.raises(HarnessCodeError, match="ProcessLookupError|PermissionError"):
        sb.call("kill_everything")
    with pytest.raises(HarnessCrashed, match="SIGKILL"):
        sb.call("kill_itself")
    run_continues(sb)


def test_exit_and_hard_exit(make, run_continues):
    sb = make(
        """
        import os, sys
        def soft():
            sys.exit(0)
        def hard():
            os._exit(3)
        """
    )
    with pytest.raises(HarnessCodeError, match="exit"):
        sb.call("soft")
    with pytest.raises(HarnessCrashed, match="status 3"):
        sb.call("hard")
    run_continues(sb)


# -- memory and output ------------------------------------------------------------------------


def test_memory_bomb(make, run_continues):
    sb = make(
        """
        def one_block():
            return len(bytearray(8 * 1024 ** 3))
        def grow():
            chunks = []
            while True:
                chunks.append("x" * 10_000_000)
        """,
        memory_mb=256,
    )
    with pytest.raises(HarnessMemoryError):
        sb.call("one_block")
    with pytest.raises(HarnessMemoryError):
        sb.call("grow", timeout_s=10)
    assert "Memory limit exceeded" in HarnessMemoryError("x").feedback()
    run_continues(sb)


def test_huge_output(make, run_continues):
    sb = make(
        """
        import os
        def shout():
            for _ in range(100):
                print("x" * 100_000)
            return "done"
        def huge_result():
            return "y" * 10_000_000
        def raw_stdout():
            for _ in range(50):
                os.write(1, b"z" * 1_000_000)
            return "done"
        def raw_stderr():
            for _ in range(50):
                os.write(2, b"z" * 1_000_000)
            return "done"
        def big_file():
            with open("big.bin", "wb") as fh:
                fh.write(b"0" * (8 * 1024 * 1024))
        """,
        max_output_kb=64,
        max_file_mb=4,
    )
    with pytest.raises(HarnessOutputError, match="printed"):
        sb.call("shout")
    with pytest.raises(HarnessOutputError, match="bytes"):
        sb.call("huge_result")
    assert sb.call("raw_stdout") == "done"  # fd 1 is /dev/null: the protocol is not on it
    with pytest.raises(HarnessCodeError, match="File too large"):
        sb.call("raw_stderr")  # fd 2 is a file the parent reads on crashes, bounded by RLIMIT_FSIZE
    with pytest.raises(HarnessCodeError, match="File too large"):
        sb.call("big_file")
    run_continues(sb)


# -- network, secrets, files ------------------------------------------------------------------


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.5)
    yield server
    server.close()


def test_network_module_is_refused(make, listener, run_continues):
    sb = make(
        """
        def connect(port):
            import socket
            socket.create_connection(("127.0.0.1", port), timeout=1)
        """
    )
    with pytest.raises(HarnessImportError, match="socket"):
        sb.call("connect", listener.getsockname()[1])
    with pytest.raises(socket.timeout):
        listener.accept()
    run_continues(sb)


def test_network_namespace_blocks_connect_even_with_socket_allowed(make, listener, run_continues):
    sb = make(
        """
        import socket
        def connect(port):
            socket.create_connection(("127.0.0.1", port), timeout=1)
            return "connected"
        """,
        blocked_imports=[],
    )
    if sb.isolation == "rlimits-only":
        pytest.skip("no network namespace without bwrap or unshare")
    with pytest.raises(HarnessCodeError, match="ConnectionRefused|unreachable|Errno"):
        sb.call("connect", listener.getsockname()[1])
    with pytest.raises(socket.timeout):
        listener.accept()
    run_continues(sb)


def test_environment_has_no_api_keys(make, monkeypatch, run_continues):
    secret = "sk-ratchet-test-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    sb = make(
        """
        import os
        def harvest():
            found = [repr(dict(os.environ))]
            for entry in os.listdir("/proc"):
                if entry.isdigit() or entry == "self":
                    try:
                        with open(f"/proc/{entry}/environ", "rb") as fh:
                            found.append(fh.read().decode(errors="replace"))
                    except OSError as exc:
                        found.append(f"{entry}: {exc}")
            return found
        """
    )
    found = sb.call("harvest")
    assert len(found) >= 2 and found[1]  # it did read its own environ...
    assert not any(secret in text or "OPENAI_API_KEY" in text for text in found)  # ...with no key
    run_continues(sb)


@pytest.mark.usefixtures("bwrap_only")
def test_writing_outside_scratch_fails(make, run_continues):
    sb = make(
        """
        import os
        def write(path):
            with open(path, "w") as fh:
                fh.write("pwned")
            return "written"
        """
    )
    assert sb.call("write", "inside.txt") == "written"
    assert (sb.scratch_dir / "inside.txt").read_text() == "pwned"
    for target in [
        "/etc/ratchet-pwned",
        "/var/tmp/ratchet-pwned",
        "/tmp/ratchet-pwned",
        str(Path(sandbox_module.__file__).with_name("pwned.py")),
    ]:
        # A checkout under /tmp is not visible at all inside the sandbox (its /tmp is a fresh
        # tmpfs), so the write fails with "No such file" there instead of "Read-only".
        with pytest.raises(HarnessCodeError, match="Read-only|Permission denied|No such file"):
            sb.call("write", target)
        assert not Path(target).exists()
    run_continues(sb)


@pytest.mark.usefixtures("bwrap_only")
def test_evaluator_files_cannot_be_deleted_or_altered(make, run_continues):
    evaluator = Path(tempfile.mkdtemp(prefix="ratchet-evaluator-", dir="/var/tmp"))
    try:
        evaluator.chmod(0o755)
        judge = evaluator / "judge.py"
        judge.write_text("SCORE = 0\n")
        before = judge.stat()
        attack = """
            import os, shutil
            def delete(path):
                os.remove(path)
            def alter(path):
                with open(path, "a") as fh:
                    fh.write("SCORE = 1\\n")
            def rename(path):
                os.rename(path, path + ".bak")
            def rmtree(path):
                shutil.rmtree(path)
            def peek(path):
                return open(path).read()
        """
        # Bound in read-only (as an import path): readable, never writable.
        visible = make(attack, extra_import_paths=[evaluator])
        assert visible.call("peek", str(judge)) == "SCORE = 0\n"
        for fn in ("delete", "alter", "rename"):
            with pytest.raises(HarnessCodeError, match="Read-only|Permission denied"):
                visible.call(fn, str(judge))
        with pytest.raises(HarnessCodeError):
            visible.call("rmtree", str(evaluator))
        # Not bound in: it does not exist inside the sandbox at all.
        absent = make(attack)
        for fn in ("peek", "delete", "alter", "rename"):
            with pytest.raises(HarnessCodeError, match="No such file"):
                absent.call(fn, str(judge))
        after = judge.stat()
        assert judge.read_text() == "SCORE = 0\n"
        assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)
        run_continues(visible)
    finally:
        judge.unlink(missing_ok=True)
        evaluator.rmdir()


@pytest.mark.usefixtures("bwrap_only")
def test_home_and_its_caches_are_hidden(make, run_continues):
    sb = make(
        """
        import os
        def look(path):
            return os.listdir(path)
        """
    )
    home = Path.home()
    # Only the directories leading to the interpreter, when it lives under the home, stay visible.
    needed = {
        Path(p).relative_to(home).parts[0]
        for p in interpreter_prefixes(sys.executable)
        if Path(p).is_relative_to(home)
    }
    assert set(os.listdir(home)) - needed  # the host's home has more...
    assert set(sb.call("look", str(home))) == needed  # ...than the sandbox sees
    if (home / ".cache").exists():
        with pytest.raises(HarnessCodeError, match="No such file"):
            sb.call("look", str(home / ".cache"))
    run_continues(sb)


# -- lying about results ----------------------------------------------------------------------


def test_replacing_builtins_cannot_fake_results(make, run_continues):
    original_isinstance, original_type = builtins.isinstance, builtins.type
    sb = make(
        """
        import builtins, json
        builtins.type = lambda *args: str
        builtins.isinstance = lambda *args: True
        json.dumps = lambda *args, **kwargs: '"legal"'
        json.JSONEncoder.encode = lambda self, value: '"legal"'

        class AlwaysEqual(str):
            def __eq__(self, other):
                return True
            def __hash__(self):
                return 0

        def is_legal_action(board, action):
            return AlwaysEqual("yes")
        """
    )
    with pytest.raises(HarnessOutputError, match="AlwaysEqual"):
        sb.call("is_legal_action", "board", "e2e4")
    assert builtins.isinstance is original_isinstance and builtins.type is original_type
    run_continues(sb)


def test_patching_the_worker_itself_still_yields_only_plain_data(make, run_continues):
    sb = make(
        """
        import sys
        worker = sys.modules["__main__"]
        for name in list(vars(worker)):
            if name.startswith("_check") or name == "_encode_ok":
                setattr(worker, name, lambda *args, **kwargs: None)
        worker._check_plain = lambda value: None

        class AlwaysEqual(str):
            def __eq__(self, other):
                return True
            def __hash__(self):
                return 0

        def is_legal_action(board, action):
            return AlwaysEqual("yes")
        """
    )
    try:
        value = sb.call("is_legal_action", "board", "e2e4")
    except (HarnessOutputError, HarnessCrashed, HarnessCodeError):
        value = None
    if value is not None:
        assert type(value) is str and value == "yes" and value != "no"
    # This candidate breaks its own worker at every load: it keeps failing, cleanly, and the run
    # goes on with other candidates.
    with pytest.raises((HarnessOutputError, HarnessCrashed, HarnessCodeError)):
        sb.call("ping")
    with Sandbox({"harness.py": "def ping():\n    return 'pong'\n"}) as fresh:
        assert fresh.call("ping") == "pong"


@pytest.mark.parametrize(
    "expr",
    [
        "{1, 2}",
        "(1, 2)",
        "{1: 'a'}",
        "object()",
        "lambda: 1",
        "type('Int', (int,), {'__eq__': lambda s, o: True})(1)",
        "[1, [2, {'k': b'bytes'}]]",
        "(lambda l: (l.append(l), l)[1])([])",
    ],
)
def test_non_plain_results_are_refused(make, expr, run_continues):
    sb = make(f"def f():\n    return {expr}\n")
    with pytest.raises(HarnessOutputError):
        sb.call("f")
    run_continues(sb)


def test_forged_protocol_bytes_are_contained(make, run_continues):
    sb = make(
        """
        import os
        def forge():
            for fd in range(3, 20):
                try:
                    os.write(fd, b"\\xff\\xff\\xff\\xffgarbage")
                except OSError:
                    pass
            return "ok"
        """
    )
    try:
        result = sb.call("forge")
    except (HarnessCrashed, HarnessOutputError):
        result = None
    assert result in (None, "ok")
    run_continues(sb)


def test_threads_left_running_do_not_break_later_calls(make, run_continues):
    sb = make(
        """
        import threading, time
        def spawn():
            threading.Thread(target=lambda: time.sleep(30), daemon=True).start()
            return "spawned"
        """
    )
    assert sb.call("spawn") == "spawned"
    run_continues(sb)


@pytest.fixture(scope="module", autouse=True)
def threads_at_start() -> int:
    """Threads alive before this module's first test (other suites in the same
    process may have left their own; only what the hostile suite adds counts here)."""
    return threading.active_count()


def test_hostile_suite_does_not_leak_threads(threads_at_start):
    assert threading.active_count() - threads_at_start < 18


def test_endless_recursion_is_reported_at_its_line_before_the_deadline(make, run_continues):
    """A recursion without end raises RecursionError 1,000 frames deep; the worker turns it into
    feedback within the call's deadline, with the line where the recursion starts and the line
    that repeats, instead of being killed for lateness with no line at all."""
    sb = make(
        """
        def deeper(n):
            return deeper(n + 1) + 1

        def propose_action(board):
            return deeper(0)
        """
    )
    started = time.monotonic()
    with pytest.raises(HarnessCodeError) as info:
        sb.call("propose_action", "board", timeout_s=2.0)
    assert time.monotonic() - started < 2.0
    tail = info.value.traceback_tail
    assert "RecursionError" in str(info.value) and "RecursionError" in tail
    assert 'File "harness.py", line 6, in propose_action' in tail  # where it starts
    assert 'File "harness.py", line 3, in deeper' in tail  # what repeats
    assert "[Previous line repeated" in tail and len(tail.splitlines()) <= 15
    run_continues(sb)
