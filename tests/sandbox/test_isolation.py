"""Isolation mechanisms: the report, the command line, and the weaker fallbacks with their warning."""

from __future__ import annotations

import os
import socket
import warnings
from pathlib import Path

import pytest

from ratchet.sandbox import (
    HarnessCodeError,
    HarnessTimeout,
    IsolationUnavailable,
    Sandbox,
    SandboxConfig,
    SandboxIsolationWarning,
    isolation,
    isolation_report,
)

CODE = {
    "harness.py": (
        "import os\n"
        "def env():\n    return dict(os.environ)\n"
        "def loop():\n    while True:\n        pass\n"
        "def connect(port):\n    import socket\n"
        "    socket.create_connection(('127.0.0.1', port), timeout=1)\n    return 'connected'\n"
    )
}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(isolation, "_warned", set())


def test_report_names_the_mechanism_and_why():
    report = isolation_report()
    assert report["mechanism"] in ("bwrap", "unshare", "rlimits-only")
    assert report["reason"]
    assert report["environment_scrubbed"] is True
    if report["mechanism"] == "bwrap":
        assert report["filesystem_read_only"] and report["pid_namespace"] and report["network_isolated"]
    assert isolation_report(SandboxConfig(isolation="none"))["mechanism"] == "rlimits-only"


def test_bwrap_command_line_has_the_safety_flags(tmp_path):
    inside_prefix = str(Path(os.path.dirname(os.__file__)) / "json")  # a directory that is bound in
    config = SandboxConfig(hidden_paths=[tmp_path.parent, "/var/cache", inside_prefix])
    cmd = isolation.bwrap_command(
        config, worker="/tmp/x/worker/worker.py", code_dir="/tmp/x/code", scratch="/tmp/x/s"
    )
    joined = " ".join(cmd)
    for flag in (
        "--new-session",
        "--die-with-parent",
        "--unshare-net",
        "--unshare-pid",
        "--clearenv",
        "--remount-ro /",
        "--tmpfs /tmp",
        f"--tmpfs {inside_prefix}",
        "--bind /tmp/x/s /tmp/x/s",
        "--ro-bind /tmp/x/code /tmp/x/code",
        "--ro-bind /tmp/x/worker /tmp/x/worker",
    ):
        assert flag in joined, flag
    # The host root is never bound whole; paths that are not bound need no mask.
    assert "--ro-bind / /" not in joined and "/var/cache" not in joined
    assert "--unshare-user" not in cmd or isolation.os.geteuid() != 0
    with_net = isolation.bwrap_command(SandboxConfig(network=True), worker="/w", code_dir="/c", scratch="/s")
    assert "--unshare-net" not in with_net


def test_asking_for_missing_bwrap_is_an_error_and_auto_falls_back_loudly(monkeypatch):
    monkeypatch.setattr(isolation, "probe_bwrap", lambda: "bwrap is not installed (test)")
    with pytest.raises(IsolationUnavailable, match="not installed"):
        Sandbox(CODE, config=SandboxConfig(isolation="bwrap"))
    with pytest.warns(SandboxIsolationWarning, match="WEAKER"):
        mech = isolation.resolve("auto")
    assert mech.name in ("unshare", "none") and "not installed" in mech.reason


@pytest.mark.parametrize("mode", ["unshare", "none"])
def test_fallbacks_still_limit_time_and_scrub_the_environment(mode, monkeypatch):
    if mode == "unshare" and isolation.probe_unshare() is not None:
        pytest.skip(f"unshare unusable here: {isolation.probe_unshare()}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback-secret")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb = Sandbox(CODE, config=SandboxConfig(isolation=mode))
        try:
            env = sb.call("env")
            assert "OPENAI_API_KEY" not in env and env["PYTHONHASHSEED"] == "0"
            with pytest.raises(HarnessTimeout):
                sb.call("loop", timeout_s=0.3)
            assert sb.isolation == isolation.REPORT_NAMES[mode]
        finally:
            sb.close()
    assert any(issubclass(w.category, SandboxIsolationWarning) for w in caught)


def test_unshare_fallback_has_no_network():
    if isolation.probe_unshare() is not None:
        pytest.skip(f"unshare unusable here: {isolation.probe_unshare()}")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = SandboxConfig(isolation="unshare", blocked_imports=[])
            with Sandbox(CODE, config=config) as sb, pytest.raises(HarnessCodeError):
                sb.call("connect", server.getsockname()[1])
    finally:
        server.close()
