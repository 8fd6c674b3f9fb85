"""Shared fixtures: sandboxes that are always closed, and a check that a run goes on."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from ratchet.sandbox import Sandbox, SandboxConfig, isolation_report

PING = '\n\ndef ping():\n    return "pong"\n'


def code(text: str) -> dict[str, str]:
    """A one-file candidate whose harness.py is ``text`` plus a harmless ``ping``."""
    return {"harness.py": textwrap.dedent(text) + PING}


@pytest.fixture
def make() -> Iterator:
    made: list[Sandbox] = []

    def _make(text: str, **config: object) -> Sandbox:
        sb = Sandbox(code(text), config=SandboxConfig(**config))
        made.append(sb)
        return sb

    yield _make
    for sb in made:
        sb.close()


def assert_run_continues(sb: Sandbox) -> None:
    """The same Sandbox answers again (restarting its worker if needed) and a fresh one works."""
    assert sb.call("ping") == "pong"
    with Sandbox(code("x = 1")) as fresh:
        assert fresh.call("ping") == "pong"


@pytest.fixture
def run_continues():
    """``run_continues(sb)`` asserts the run goes on after a hostile call."""
    return assert_run_continues


@pytest.fixture
def bwrap_only() -> None:
    """Skip unless bubblewrap isolation works here (scripts/setup.sh installs it)."""
    if isolation_report().get("mechanism") != "bwrap":
        pytest.skip("bubblewrap is not usable on this machine")
