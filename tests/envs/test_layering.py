"""The games know nothing of what is built on them: no module under ``src/ratchet/envs`` (its
``harness`` package included: a harness's runtime, checks, views and the held-out protocol) imports
``ratchet.autoharness``, ``ratchet.evolve``, ``ratchet.cli`` or ``ratchet.ui``. Every import is read
with ``ast``, those inside functions and ``TYPE_CHECKING`` blocks too, relative ones made absolute."""

from __future__ import annotations

from pathlib import Path

import pytest
from layering import offending

SRC = Path(__file__).resolve().parents[2] / "src" / "ratchet"
FORBIDDEN_IN_ENVS = ("ratchet.autoharness", "ratchet.evolve", "ratchet.cli", "ratchet.ui")


def package_of(path: Path) -> str:
    return ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])


def test_the_checker_flags_every_kind_of_import() -> None:
    """A negative control: plain, from, relative (from ``envs.harness``, two levels up) and
    function-local imports of what is built on the games are flagged; envs' own imports are not."""
    source = ("import ratchet.autoharness.legality\nfrom ratchet.evolve.gate import not_worse\n"
              "from ...autoharness import refine\ndef late():\n    from ratchet.ui import app\n"
              "from ratchet.envs import measure\nfrom . import runtime\nfrom ratchet.sandbox import Sandbox\n")
    lines = {line for line, _ in offending(source, "ratchet.envs.harness", FORBIDDEN_IN_ENVS)}
    assert lines == {1, 2, 3, 5}


MODULES = sorted((SRC / "envs").rglob("*.py"))


def test_the_harness_package_is_among_the_modules_read() -> None:
    assert SRC / "envs" / "harness" / "protocol.py" in MODULES and len(MODULES) > 20


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_envs_import_nothing_built_on_them(path: Path) -> None:
    assert offending(path.read_text(), package_of(path), FORBIDDEN_IN_ENVS) == []
