"""The engine imports no configuration of itself: every module under ``src/ratchet/evolve`` is read
with ``ast`` (imports inside functions and ``TYPE_CHECKING`` blocks included) and none may import
``ratchet.autoharness``, ``ratchet.runtime``, ``ratchet.cli`` or ``ratchet.ui``; ``contracts.py``
imports no module of the project at all. A configuration names its parts by import path instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from layering import offending

from ratchet.contracts import RatchetError
from ratchet.evolve.components import resolve

SRC = Path(__file__).resolve().parents[2] / "src" / "ratchet"
FORBIDDEN_IN_EVOLVE = ("ratchet.autoharness", "ratchet.runtime", "ratchet.cli", "ratchet.ui")


def package_of(path: Path) -> str:
    return ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])


def test_the_checker_sees_every_kind_of_import() -> None:
    """A negative control: plain, from, relative and function-local imports are all flagged; an
    import of the engine itself is not."""
    source = ("import ratchet.runtime.agent\nfrom ratchet.autoharness import search\n"
              "from ..cli import main\ndef late():\n    from ratchet.ui import app\n"
              "from ratchet.evolve import loop\nfrom . import archive\n")
    lines = {line for line, _ in offending(source, "ratchet.evolve", FORBIDDEN_IN_EVOLVE)}
    assert lines == {1, 2, 3, 5}


@pytest.mark.parametrize("path", sorted((SRC / "evolve").rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_the_engine_imports_no_configuration(path: Path) -> None:
    assert offending(path.read_text(), package_of(path), FORBIDDEN_IN_EVOLVE) == []


def test_contracts_import_nothing_of_the_project() -> None:
    path = SRC / "contracts.py"
    assert offending(path.read_text(), package_of(path), ("ratchet",)) == []


@pytest.mark.parametrize(("kind", "name", "path"), [
    ("suite", "legality", "ratchet.autoharness.legality:LegalitySuite"),
    ("proposer", "induced_rules", "ratchet.autoharness.rules:InducedRulesProposer")])
def test_a_short_name_that_left_the_engine_is_refused_with_its_path(kind: str, name: str, path: str) -> None:
    with pytest.raises(RatchetError, match="named by its import path") as raised:
        resolve(kind, name)
    assert path in str(raised.value)
    assert resolve(kind, path).__module__ == path.partition(":")[0]
