"""The ``choices`` proposer: declared alternatives of a workspace's YAML settings, no model."""

from __future__ import annotations

import random

import pytest
import yaml

from ratchet.contracts import Candidate, Proposal, Proposer, Skip
from ratchet.evolve.components import build
from ratchet.evolve.config import ComponentSpec
from ratchet.evolve.proposers.choices import ChoicesProposer, set_key
from ratchet.evolve.proposers.config import ChoicesOptions

from doubles import Archive

CONTEXT = """# What enters the prompt.
# The opening gathers what a small model would guess at.
opening:
  - {kind: file_tree, max_entries: 200}

  - {kind: task_files, max_chars: 6000}
# compaction
strategy: compact_oldest
keep_last: 6
"""
SETTINGS = "protocol: text\nmiddleware:\n- kind: repeat_guard\n  stop_after: 2\ntemperature: 0.0\n"


def root() -> Candidate:
    return Candidate.from_files("agent", {"context.yaml": CONTEXT, "settings.yaml": SETTINGS, "system_prompt.md": "hi\n"})


def test_set_key_replaces_only_the_keys_block_and_keeps_the_comments() -> None:
    opening = [{"kind": "file_tree", "max_entries": 200}, {"kind": "test_output"}]
    text = set_key(CONTEXT, "opening", opening)
    assert yaml.safe_load(text) == {**yaml.safe_load(CONTEXT), "opening": opening}
    assert text.startswith("# What enters the prompt.\n# The opening gathers") and "# compaction\nstrategy:" in text
    # a block at column 0 ("- kind") and a scalar; a missing key is appended
    assert yaml.safe_load(set_key(SETTINGS, "middleware", []))["middleware"] == []
    assert yaml.safe_load(set_key(SETTINGS, "middleware", []))["temperature"] == 0.0
    assert yaml.safe_load(set_key(SETTINGS, "temperature", 0.4)) == {**yaml.safe_load(SETTINGS), "temperature": 0.4}
    assert yaml.safe_load(set_key("a: 1", "b", [1, 2])) == {"a": 1, "b": [1, 2]}


def test_each_proposal_changes_one_declared_key_to_a_value_not_yet_in_the_archive() -> None:
    options = ChoicesOptions.model_validate({"choices": [
        {"file": "settings.yaml", "key": "temperature", "values": [0.0, 0.4]},
        {"file": "context.yaml", "key": "keep_last", "values": [6, 12]},
        {"file": "missing.yaml", "key": "x", "values": [1]}]})
    proposer = ChoicesProposer(options)
    assert isinstance(proposer, Proposer) and proposer.deterministic
    archive, parent = Archive(), root()
    archive.add(parent)
    made = []
    for _ in range(2):
        proposal = proposer.propose(parent, archive, random.Random(0))
        assert isinstance(proposal, Proposal) and proposal.parents == (parent.id,) and len(proposal.files) == 1
        (path, text), = proposal.files.items()
        changed = {k for k, v in yaml.safe_load(text).items() if yaml.safe_load(parent.files[path]).get(k) != v}
        assert len(changed) == 1 and proposal.claim.target.startswith(f"{path}: {changed.pop()}: ")
        made.append(proposal.claim.target)
        archive.add(Candidate.from_files("agent", {**parent.files, **proposal.files}), status="rejected")
    assert sorted(made) == ["context.yaml: keep_last: 6 -> 12", "settings.yaml: temperature: 0.0 -> 0.4"]
    # both alternatives are archived now (the parent's own values are never proposed)
    skip = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(skip, Skip)
    assert "every declared value was tried" in skip.reason and "missing.yaml" in skip.reason


def test_choices_is_a_registered_proposer_with_checked_options() -> None:
    spec = ComponentSpec(name="choices", options={"choices": [{"file": "a.yaml", "key": "k", "values": [1]}]})
    assert isinstance(build("proposer", spec, None), ChoicesProposer)
    with pytest.raises(Exception, match="values"):
        build("proposer", ComponentSpec(name="choices", options={"choices": [{"file": "a.yaml", "key": "k", "values": []}]}), None)


def test_a_whole_file_value_with_the_settings_it_needs_is_one_proposal() -> None:
    options = ChoicesOptions.model_validate({"choices": [
        {"file": "system_prompt.md", "values": ["Rewrite the whole file.\n"],
         "also": [{"file": "settings.yaml", "key": "file_blocks", "value": True}]}]})
    proposer, archive, parent = ChoicesProposer(options), Archive(), root()
    archive.add(parent)
    proposal = proposer.propose(parent, archive, random.Random(0))
    assert proposal.files["system_prompt.md"] == "Rewrite the whole file.\n"
    assert yaml.safe_load(proposal.files["settings.yaml"]) == {**yaml.safe_load(SETTINGS), "file_blocks": True}
    assert sorted(proposal.files) == ["settings.yaml", "system_prompt.md"]
    assert proposal.claim.target == "system_prompt.md: (the whole file): 'hi' -> 'Rewrite the whole file.'; " \
                                    "settings.yaml: file_blocks"
    archive.add(Candidate.from_files("agent", {**parent.files, **proposal.files}), status="rejected")
    skip = proposer.propose(parent, archive, random.Random(0))
    assert isinstance(skip, Skip)
