"""bash in the sandbox (timeout, output bound, network, denied command) and the git tools."""

from __future__ import annotations

import socket
import subprocess
import threading

import pytest

from ratchet.runtime import AgentConfig, PermissionPolicy
from ratchet.sandbox import isolation_report
from ratchet.store import read_jsonl

from .conftest import call


def test_bash_runs_in_the_working_directory_and_sees_python(make_agent, workdir):
    agent = make_agent()
    out = call(agent, "bash", command="python -c 'import calc; print(calc.add(5, 3))' && pwd")
    # pwd is the working directory, shown as the model knows it (the real path is unique per run)
    assert out.splitlines()[:2] == ["2", "."] and out.endswith("[exit code 0]")
    assert call(agent, "bash", command="exit 3").endswith("[exit code 3]")
    call(agent, "bash", command="echo made > made.txt")
    assert (workdir / "made.txt").read_text() == "made\n"
    # A file the runtime wrote after the worker started is still writable by the command.
    call(agent, "write", path="later.txt", content="a\n")
    assert call(agent, "bash", command="echo b >> later.txt && cat later.txt").startswith("a\nb")


def test_pytests_warnings_about_its_own_configuration_are_not_in_the_output(make_agent, workdir):
    """A plugin's deprecation warning at configure time (pytest-asyncio's about an unset ini option)
    is about the runner, not the code: left out. The code's own warnings and failures stay."""
    (workdir / "conftest.py").write_text("import warnings\n\nimport pytest\n\n\ndef pytest_configure(config):\n"
                                         "    warnings.warn(pytest.PytestDeprecationWarning('runner noise'))\n")
    (workdir / "test_w.py").write_text("import warnings\n\n\ndef test_w():\n"
                                       "    warnings.warn(DeprecationWarning('code warning'))\n    assert False\n")
    out = call(make_agent(), "bash", command="python -m pytest -q -p no:cacheprovider")
    assert "runner noise" not in out and "code warning" in out and "1 failed" in out


def test_a_command_that_times_out_is_killed(make_agent):
    agent = make_agent(config=AgentConfig(bash_timeout_s=5))
    out = call(agent, "bash", command="echo started; sleep 30 & sleep 30; echo never", timeout_s=1)
    assert out.startswith("error: command timed out after 1 s and was killed")
    assert "started" in out and "never" not in out
    # The worker survives and the timeout asked for is capped by the configured one.
    assert call(agent, "bash", command="echo again").startswith("again")
    assert "after 5 s" in call(agent, "bash", command="sleep 30", timeout_s=100)


def test_output_is_bounded_to_its_tail(make_agent):
    agent = make_agent(config=AgentConfig(bash_output_kb=1))
    out = call(agent, "bash", command="for i in $(seq 1 5000); do echo line$i; done")
    assert out.startswith("[output was ") and "showing the last 1024]" in out
    assert "line5000" in out and "line1\n" not in out


@pytest.fixture
def host_server():
    """A TCP server on the host's loopback that answers 'hello'."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.sendall(b"hello")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


CONNECT = "python -c \"import socket; print(socket.create_connection(('127.0.0.1', {port}), 3).recv(5))\""


@pytest.mark.skipif(isolation_report()["mechanism"] != "bwrap", reason="needs bubblewrap")
def test_commands_cannot_reach_the_network_or_write_outside(make_agent, tmp_path, host_server):
    with socket.create_connection(("127.0.0.1", host_server), 3) as conn:  # control: the server answers
        assert conn.recv(5) == b"hello"
    agent = make_agent()
    out = call(agent, "bash", command=CONNECT.format(port=host_server) + f"; echo x > {tmp_path}/outside.txt")
    assert "b'hello'" not in out and "Error" in out
    assert not (tmp_path / "outside.txt").exists()
    open_agent = make_agent(policy=PermissionPolicy(network=True))  # network on: the same command gets through
    assert "b'hello'" in call(open_agent, "bash", command=CONNECT.format(port=host_server))


def test_denied_command_is_logged_with_its_rule(make_agent):
    agent = make_agent(policy=PermissionPolicy(allowed_commands=["python *", "ls*"], denied_commands=["*rm -rf*"]))
    assert "denied_commands['*rm -rf*']" in call(agent, "bash", command="ls && rm -rf .")
    assert "by allowed_commands" in call(agent, "bash", command="curl example.com")
    assert call(agent, "bash", command="ls").endswith("[exit code 0]")
    assert [d["rule"] for d in read_jsonl(agent.run_dir / "denials.jsonl")] == ["denied_commands['*rm -rf*']",
                                                                               "allowed_commands"]


def test_a_command_printing_binary_bytes_shows_them_escaped(make_agent, workdir):
    (workdir / "blob.bin").write_bytes(b"PK\x03\x04\x00\x00\x1b[31m")
    agent = make_agent()
    out = call(agent, "bash", command="cat blob.bin")
    assert out.startswith("[the output holds control bytes, shown as \\xNN]\nPK\\x03\\x04\\x00\\x00\\x1b[31m")
    assert "\x00" not in out and "\x1b" not in out
    assert call(agent, "bash", command="printf 'a\\tb\\n'") == "a\tb\n\n[exit code 0]"  # tabs, newlines stay


def test_git_tools_outside_a_repository_say_so(make_agent):
    agent = make_agent()
    assert call(agent, "git_status") == "error: git_status: the working directory is not a git repository"
    assert call(agent, "git_diff", path="calc.py") == "error: git_diff: the working directory is not a git repository"
    assert call(agent, "git_commit", message="x") == "error: git_commit: the working directory is not a git repository"


def test_git_status_diff_commit(make_agent, workdir):
    subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)
    agent = make_agent()
    assert "?? calc.py" in call(agent, "git_status")
    assert call(agent, "git_commit", message="start").endswith("start")
    call(agent, "edit", path="calc.py", old="a - b", new="a + b")
    diff = call(agent, "git_diff")
    assert "-    return a - b" in diff and "+    return a + b" in diff
    assert call(agent, "git_diff", staged=True) == "no changes"
    assert "fix add" in call(agent, "git_commit", message="fix add", paths=["calc.py"])
    assert "error: the commit message is empty" == call(agent, "git_commit", message=" ")
    assert call(agent, "git_status").startswith("## ")
    # The sandbox handed the tree to its uid; git still works on it.
    call(agent, "bash", command="echo more >> notes.txt")
    assert "notes.txt" in call(agent, "git_status")


@pytest.mark.skipif(isolation_report()["mechanism"] != "bwrap", reason="needs bubblewrap")
def test_commands_do_not_see_the_run_directory_or_hidden_paths(make_agent, tmp_path):
    secret = tmp_path / "evaluator"
    secret.mkdir()
    # A value no path can contain: the error messages name the paths, and a temporary directory's
    # number (pytest-420, say) would contain a short one.
    (secret / "answer.txt").write_text("ANSWER-QX7")
    agent = make_agent(policy=PermissionPolicy(hidden_paths=[str(secret)]))
    call(agent, "ls")  # writes the trace, so the run directory has a file to find
    assert (agent.run_dir / "trace.jsonl").exists() and (secret / "answer.txt").exists()
    out = call(agent, "bash", command=f"cat {secret}/answer.txt; ls {agent.run_dir}; echo done")
    assert "ANSWER-QX7" not in out and "trace.jsonl" not in out and "done" in out


@pytest.mark.skipif(isolation_report()["mechanism"] != "bwrap", reason="needs bubblewrap")
def test_readable_rules_bind_bash_too(make_agent, workdir):
    (workdir / "secrets").mkdir()
    (workdir / "secrets" / "key.txt").write_text("TOPSECRET\n")
    (workdir / "private.txt").write_text("HIDDENTEXT\n")
    (workdir / "src").mkdir()
    (workdir / "src" / "ok.py").write_text("VISIBLE = 1\n")
    (workdir / "src" / "token.env").write_text("SRCSECRET\n")
    policy = PermissionPolicy(readable=["calc.py", "notes.txt", "src/*.py"])
    agent = make_agent(policy=policy)
    # Control: the file tools refuse the same paths, and a readable file reads through bash.
    assert call(agent, "read", path="private.txt").startswith("error: permission denied by readable")
    assert "return a - b" in call(agent, "bash", command="cat calc.py")
    out = call(agent, "bash", command="cat private.txt secrets/key.txt src/token.env; ls secrets; cat src/ok.py")
    assert "HIDDENTEXT" not in out and "TOPSECRET" not in out and "SRCSECRET" not in out
    assert "VISIBLE = 1" in out
    assert call(agent, "bash", command="ls -A secrets") == "\n[exit code 0]"  # an empty view
    # A file made after the worker started is hidden from the next command as well, and the
    # files themselves are untouched on the host.
    (workdir / "later.key").write_text("LATERSECRET\n")
    assert "LATERSECRET" not in call(agent, "bash", command="cat later.key")
    assert (workdir / "later.key").read_text() == "LATERSECRET\n"
    assert (workdir / "secrets" / "key.txt").read_text() == "TOPSECRET\n"
    # Negative control: the default policy (readable everywhere) shows them to bash.
    open_agent = make_agent()
    assert "LATERSECRET" in call(open_agent, "bash", command="cat later.key")


@pytest.mark.filterwarnings("ignore")
def test_readable_rules_refuse_bash_without_bubblewrap(make_agent, workdir, monkeypatch):
    from ratchet.sandbox import isolation

    (workdir / "private.txt").write_text("HIDDENTEXT\n")
    monkeypatch.setattr(isolation, "probe_bwrap", lambda: "bwrap is not installed (test)")
    agent = make_agent(policy=PermissionPolicy(readable=["calc.py"]))
    out = call(agent, "bash", command="cat private.txt")
    assert out.startswith("error: permission denied by readable") and "HIDDENTEXT" not in out
    assert read_jsonl(agent.run_dir / "denials.jsonl")[-1]["rule"] == "readable"


def test_a_second_sandbox_on_the_tree_does_not_take_the_first_ones_working_directory(workdir):
    """A sub-agent's shell on the parent's tree, made after the parent's: its sandbox hands the
    directory to its own uid, and the parent's next command must still write there (pytest
    makes its temporary files in the cwd when the sandbox's /tmp is not writable)."""
    from ratchet.runtime.shell import Shell

    first, second = Shell(workdir, network=False, hidden=[]), Shell(workdir, network=False, hidden=[])
    try:
        assert first.run("touch one && echo ok", 30, 4096)["output"].strip() == "ok"
        assert second.run("touch two && echo ok", 30, 4096)["output"].strip() == "ok"
        done = first.run("touch three && python -c 'import tempfile; print(tempfile.gettempdir())'", 30, 4096)
        assert done["returncode"] == 0, done["output"]
    finally:
        first.close()
        second.close()
