"""Workspace snapshots and the static checks: only declared surfaces change, protected files never,
every file parses, the entry loads (in the sandbox); protected files are hash-pinned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from doubles import FILE, make_workspace

from ratchet.contracts import Claim, Proposal
from ratchet.evolve.config import StaticCheckConfig
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.workspace import PinMismatch, StaticCheck, apply, materialize, pins, snapshot, verify_pins


def _proposal(parent_id: str, files: dict[str, str]) -> Proposal:
    return Proposal(files, Claim("test"), "test", (parent_id,))


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path, extra={"notes/a.md": "note\n", "README.txt": "not a surface\n"})


def test_snapshot_holds_only_editable_files_and_materialize_restores_the_workspace(ws: Path, tmp_path: Path) -> None:
    manifest = load_manifest(ws)
    root = snapshot(ws, manifest)
    assert sorted(root.files) == [FILE, "notes/a.md"]
    assert root.kind == "noisy" and root.parent_id is None
    assert snapshot(ws, manifest).id == root.id  # content-addressed
    child = apply(root, _proposal(root.id, {FILE: json.dumps({"default": 0.9})}))
    out = materialize(child, ws, tmp_path / "out")
    assert json.loads((out / FILE).read_text()) == {"default": 0.9}
    assert (out / "grader" / "settings.json").read_text() == (ws / "grader" / "settings.json").read_text()
    assert (out / "README.txt").exists() and (out / "manifest.yaml").exists()
    assert child.parent_id == root.id and child.meta["claim"]["target"] == "test"


@pytest.mark.parametrize(("files", "rule"), [
    ({"grader/settings.json": "{}"}, "protected"),
    ({"manifest.yaml": "name: x\neditable: ['**']\n"}, "protected"),
    ({"README.txt": "changed\n"}, "editable"),
    ({"secret/new.json": "{}"}, "editable"),
    ({FILE: '{"default": 0.9'}, "parse"),
    ({"workflow.py": "def f(:\n"}, "parse"),
    ({"../outside.py": "x = 1\n"}, "path"),
])
def test_static_check_rejects_with_the_rule_broken(ws: Path, files: dict[str, str], rule: str) -> None:
    manifest = load_manifest(ws)
    root = snapshot(ws, manifest)
    failures = StaticCheck(manifest, StaticCheckConfig(load_entry=False)).check(root, _proposal(root.id, files))
    assert [f.detail["rule"] for f in failures] == [rule]
    assert all(f.kind == "static_check" and f.message for f in failures)


def test_static_check_rejects_no_change_and_accepts_a_valid_edit(ws: Path) -> None:
    manifest = load_manifest(ws)
    root = snapshot(ws, manifest)
    check = StaticCheck(manifest, StaticCheckConfig(load_entry=False))
    assert "changes nothing" in check.check(root, _proposal(root.id, {FILE: root.files[FILE]}))[0].message
    assert check.check(root, _proposal(root.id, {FILE: '{"default": 0.7}', "notes/b.md": "new\n"})) == []


def test_the_entry_must_load_in_the_sandbox(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, extra={"workflow.py": "def step(state):\n    return {}\n"})
    (ws / "manifest.yaml").write_text("name: coder\neditable: ['*.py', 'harness.json']\nentry: workflow.py\n")
    manifest = load_manifest(ws)
    root = snapshot(ws, manifest)
    check = StaticCheck(manifest)
    broken = check.check(root, _proposal(root.id, {"workflow.py": "raise RuntimeError('at import')\n"}))
    assert [f.detail["rule"] for f in broken] == ["load"] and "at import" in broken[0].message
    assert check.check(root, _proposal(root.id, {"workflow.py": "def step(state):\n    return {'answer': 1}\n"})) == []


def test_pins_name_the_changed_protected_file_and_the_fingerprint(ws: Path) -> None:
    manifest = load_manifest(ws)
    pinned = pins(ws, manifest, "fp1")
    assert set(pinned["protected"]) == {"grader/settings.json", "manifest.yaml"}
    verify_pins(pinned, pins(ws, manifest, "fp1"))
    (ws / "grader" / "settings.json").write_text('{"tasks": 1}')
    with pytest.raises(PinMismatch, match="grader/settings.json changed"):
        verify_pins(pinned, pins(ws, manifest, "fp1"))
    (ws / "grader" / "settings.json").unlink()
    with pytest.raises(PinMismatch, match="was removed.*fingerprint changed"):
        verify_pins(pinned, pins(ws, manifest, "fp2"))
