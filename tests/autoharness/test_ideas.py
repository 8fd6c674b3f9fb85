"""The ratchet method's ideas on the engine: every switch of ``RatchetIdeas`` is an option of one of
the engine configuration's components (``engine_config``) or of the starting workspace
(``library_seed``), switching one changes what the engine runs, the faithful method ignores them,
and each is named in the docs' table of ideas on the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratchet.autoharness.config import AutoHarnessConfig, RatchetIdeas
from ratchet.autoharness.engine import engine_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "autoharness.md"
#: Chosen outside ``engine_config``: the starting workspace (``engine.starting_harness``, test_engine_config.py).
WORKSPACE_IDEAS = {"library_seed"}


def flipped(name: str) -> object:
    default = RatchetIdeas.model_fields[name].default
    return (not default) if isinstance(default, bool) else 1


def built(method: str = "ratchet", **ideas: object) -> dict:
    cfg = AutoHarnessConfig(method=method, model="scripted:", ideas=ideas)
    return engine_config(cfg, Path("/tmp/workspace"), "Tic Tac Toe").model_dump(mode="json")


@pytest.mark.parametrize("name", sorted(set(RatchetIdeas.model_fields) - WORKSPACE_IDEAS))
def test_every_idea_is_an_option_of_the_engine_configuration(name: str) -> None:
    # some ideas act only beside another (body_prefix, short_examples, aliases, whole_fallback:
    # options of the scaffold's refiner, on by default), so each is flipped from the defaults
    assert built(**{name: flipped(name)}) != built(), name


@pytest.mark.parametrize("name", sorted(RatchetIdeas.model_fields))
def test_the_faithful_method_ignores_every_idea(name: str) -> None:
    assert built("faithful", **{name: flipped(name)}) == built("faithful")


def test_every_idea_is_in_the_docs_table_of_the_engine() -> None:
    text = DOC.read_text()
    table = text[text.index("| idea | on the engine |"):]
    table = table[: table.index("\n\n")]
    for name in RatchetIdeas.model_fields:
        assert f"`{name}`" in table, name
