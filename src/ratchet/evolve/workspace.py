"""A harness workspace as candidates: snapshot, materialize, apply a proposal, check it, pin it.

A candidate holds the workspace's editable files only; protected files stay in the workspace and
are read from there by the evaluator. The static check runs before any evaluation: every changed
path must match an editable glob and no protected one, every file must parse (Python, JSON, YAML),
and the manifest's Python entry must load in the sandbox, never in this process. Pinning hashes
every protected file plus the evaluator's fingerprint at run start; any later difference stops
the run.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import yaml

from ratchet.contracts import Candidate, Failure, Proposal, RatchetError
from ratchet.evolve.config import StaticCheckConfig
from ratchet.evolve.manifest import MANIFEST_NAME, Manifest
from ratchet.evolve.proposers.mutation import normalized
from ratchet.sandbox.config import SandboxConfig
from ratchet.sandbox.sandbox import Sandbox
from ratchet.store.run import safe_relpath


class PinMismatch(RatchetError):
    """A protected file or the evaluator changed since the run started."""


def _files_under(workspace: Path) -> list[str]:
    return sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*")
                  if p.is_file() and ".git" not in p.relative_to(workspace).parts)


def snapshot(workspace: str | Path, manifest: Manifest) -> Candidate:
    """The workspace's editable files as the original candidate (no parent)."""
    root = Path(workspace)
    files = {rel: (root / rel).read_text() for rel in _files_under(root) if manifest.is_editable(rel)}
    if not files:
        raise RatchetError(f"workspace {root} has no file matching the editable globs {manifest.editable}",
                           hint="fix `editable` in manifest.yaml, or add the harness files")
    return Candidate.from_files(manifest.name, files, None, origin="workspace")


def materialize(candidate: Candidate, workspace: str | Path, dest: str | Path) -> Path:
    """Write the whole workspace with ``candidate``'s editable files into ``dest`` (a new dir)."""
    root, out = Path(workspace), Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    manifest_editable = set(candidate.files)
    for rel in _files_under(root):
        if rel not in manifest_editable:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, out / rel)
    for rel, text in candidate.files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return out


#: How many of the failures a proposal showed the model its child keeps (``failures_shown``).
FAILURES_SHOWN = 10


def apply(parent: Candidate, proposal: Proposal, **meta: Any) -> Candidate:
    """The child: the parent's files with the proposal's changed files replaced or added.

    ``meta`` adds to what the child records of how it was made (proposer, parents, claim)."""
    files = {**parent.files, **proposal.files}
    claim = {"target": proposal.claim.target, "root_cause": proposal.claim.root_cause,
             "predicted_flips": list(proposal.claim.predicted_flips)}
    if proposal.shown:
        meta["failures_shown"] = [f.to_record() for f in proposal.shown[:FAILURES_SHOWN]]
    return Candidate.from_files(parent.kind, files, parent.id, proposer=proposal.proposer,
                                parents=list(proposal.parents), claim=claim, proposal=proposal.meta, **meta)


def _parse_error(relpath: str, text: str) -> str | None:
    suffix = Path(relpath).suffix
    try:
        if suffix == ".py":
            ast.parse(text, filename=relpath)
        elif suffix == ".json":
            json.loads(text)
        elif suffix in (".yaml", ".yml"):
            yaml.safe_load(text)
    except (SyntaxError, ValueError, yaml.YAMLError) as exc:
        return f"{relpath} does not parse: {exc}"
    return None


def program_key(candidate: Candidate) -> str:
    """What a candidate does, not how it is written: a hash of its files with the Python ones
    normalized (:func:`ratchet.evolve.proposers.mutation.normalized`: the unparsed syntax tree, so
    comments and layout do not count). A prompt's white space may change a model's reply, so every
    other file counts byte for byte."""
    files = {rel: normalized(text) if rel.endswith(".py") else text for rel, text in sorted(candidate.files.items())}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


@runtime_checkable
class SandboxLibraries(Protocol):
    """A suite that puts files of its own beside a candidate's in the sandbox (the workflow suites:
    the operator library ``flowops``): the static check loads a proposal's entry with them too, or
    a workflow importing them would be refused before it is ever evaluated."""

    def sandbox_files(self) -> dict[str, str]: ...


class StaticCheck:
    """The checks a proposal passes before any evaluation; each failure says what to fix.
    ``libraries``: files the suite puts beside a candidate's in its sandbox (a candidate's own file
    of the same name replaces one), so the entry is loaded as the suite will run it."""

    def __init__(self, manifest: Manifest, config: StaticCheckConfig | None = None,
                 libraries: dict[str, str] | None = None) -> None:
        self.manifest = manifest
        self.config = config or StaticCheckConfig()
        self.libraries = dict(libraries or {})

    def check(self, parent: Candidate, proposal: Proposal) -> list[Failure]:
        failures: list[Failure] = []
        changed = {rel: text for rel, text in proposal.files.items() if parent.files.get(rel) != text}
        if not changed:
            return [Failure("static_check", "the proposal changes nothing: identical to its parent")]
        for rel in sorted(changed):
            try:
                safe_relpath(rel, "candidate file")
            except RatchetError as exc:
                failures.append(Failure("static_check", str(exc).splitlines()[0], detail={"path": rel, "rule": "path"}))
                continue
            if self.manifest.is_protected(rel) or rel == MANIFEST_NAME:
                failures.append(Failure("static_check", f"{rel} is protected: no candidate may change it",
                                        detail={"path": rel, "rule": "protected"}))
            elif not self.manifest.is_editable(rel):
                failures.append(Failure("static_check", f"{rel} is outside the editable globs {self.manifest.editable}",
                                        detail={"path": rel, "rule": "editable"}))
            else:
                error = _parse_error(rel, changed[rel])
                if error:
                    failures.append(Failure("static_check", error, detail={"path": rel, "rule": "parse"}))
        if failures:
            return failures
        return self._load(apply(parent, proposal))

    def _load(self, child: Candidate) -> list[Failure]:
        entry = self.manifest.entry
        if not (self.config.load_entry and entry and entry.endswith(".py") and entry in child.files):
            return []
        sandbox_files = {**self.libraries, **{rel: text for rel, text in child.files.items() if rel.endswith(".py")}}
        try:
            with Sandbox(sandbox_files, entry=entry, config=SandboxConfig(start_timeout_s=self.config.load_timeout_s)) as box:
                box.start()
        except RatchetError as exc:
            return [Failure("static_check", f"{entry} does not load: {exc}", detail={"path": entry, "rule": "load"})]
        return []


# ------------------------------------------------------------------------------------------
# Hash pinning
# ------------------------------------------------------------------------------------------


def protected_hashes(workspace: str | Path, manifest: Manifest) -> dict[str, str]:
    """sha256 of every protected file in the workspace (the manifest included)."""
    root = Path(workspace)
    return {rel: hashlib.sha256((root / rel).read_bytes()).hexdigest()
            for rel in _files_under(root) if manifest.is_protected(rel)}


def pins(workspace: str | Path, manifest: Manifest, evaluator_fingerprint: str,
         model: str | None = None) -> dict[str, object]:
    """What is pinned at run start: protected file hashes, the evaluator's fingerprint and, when its
    evaluations call a model, that model's name (cached results are keyed without it, and the name
    says which weights answer: ``local:NAME@v3+DIGEST`` for a weight version)."""
    pinned: dict[str, object] = {"protected": protected_hashes(workspace, manifest), "evaluator": evaluator_fingerprint}
    if model is not None:
        pinned["model"] = model
    return pinned


def verify_pins(pinned: dict[str, object], current: dict[str, object]) -> None:
    """Raise :class:`PinMismatch` naming every protected file or fingerprint that changed."""
    before, after = dict(pinned["protected"]), dict(current["protected"])  # type: ignore[arg-type]
    changed = sorted(rel for rel in before.keys() | after.keys() if before.get(rel) != after.get(rel))
    problems = [f"protected file {rel} {'was removed' if rel not in after else 'was added' if rel not in before else 'changed'}"
                for rel in changed]
    if pinned["evaluator"] != current["evaluator"]:
        problems.append(f"the evaluator's fingerprint changed ({pinned['evaluator']} -> {current['evaluator']})")
    # Runs pinned before models were pinned have none: nothing to compare.
    if pinned.get("model") and current.get("model") and pinned["model"] != current["model"]:
        problems.append(f"the model its evaluations call changed ({pinned['model']} -> {current['model']}; a "
                        f"weight version named @current or @latest moved? name {pinned['model']} to resume)")
    if problems:
        raise PinMismatch("the evaluator is not the one this run started with: " + "; ".join(problems),
                          hint="restore the protected files (the run's scores are only comparable under one "
                               "evaluator), or start a new run")
