"""Shared helpers: an agent over a scripted model in a temporary repository."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from ratchet.models.scripted import ScriptedModel
from ratchet.runtime import Agent, PermissionPolicy
from ratchet.runtime.protocols import ToolCall


def tool_reply(tool: str, **arguments) -> str:
    """A reply in the text protocol calling one tool."""
    return f"Next step.\n```tool\n{json.dumps({'name': tool, 'arguments': arguments})}\n```"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "repo"
    d.mkdir()
    (d / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (d / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    return d


@pytest.fixture
def make_agent(tmp_path: Path, workdir: Path):
    made: list[Agent] = []

    def make(responses=(), policy: PermissionPolicy | None = None, **kwargs) -> Agent:
        model = kwargs.pop("model", None) or ScriptedModel(list(responses))
        run_dir = kwargs.pop("run_dir", tmp_path / f"run{len(made)}")
        agent = Agent(model, workdir, run_dir, permissions=policy, **kwargs)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


def call(agent: Agent, tool: str, **arguments) -> str:
    """Run one tool call through the agent's hooks, policy and trace, as the loop does."""
    return agent.call_tool(ToolCall(tool, arguments))


def wait_for(predicate: Callable[[], object], timeout_s: float = 60.0) -> None:
    """Poll ``predicate`` until it is true; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting")


Page = Callable[[str, str, bytes], tuple[str, bytes]]


@pytest.fixture
def local_http():
    """``start(page)`` serves ``page(method, path, body) -> (content_type, bytes)`` on a free
    loopback port and returns the base URL; every request is kept in ``start.requests``."""
    servers: list[HTTPServer] = []

    def start(page: Page) -> str:
        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                start.requests.append((self.command, self.path, body))
                kind, data = page(self.command, self.path, body)
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer  # noqa: N815 (http.server's naming)

            def log_message(self, *args: object) -> None:
                pass

        server = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    start.requests = []
    yield start
    for server in servers:
        server.shutdown()
