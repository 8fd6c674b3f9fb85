"""A run as a git repository: one commit per accepted candidate, parented on its lineage.

Each commit holds the whole workspace as that candidate sees it (the protected files from the
workspace, the editable ones from the candidate); its message is the proposer's claim and the
gate's numbers. Branches that the search abandoned stay as tags (``cand-<id>``); ``main`` points
at the best candidate and is checked out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ratchet.contracts import Candidate, RatchetError
from ratchet.evolve.archive import Archive
from ratchet.evolve.workspace import materialize


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True, env=env)
    except FileNotFoundError:
        raise RatchetError("git is not installed", hint="install git to export a run as a repository") from None
    except subprocess.CalledProcessError as exc:
        raise RatchetError(f"git {' '.join(args[:2])} failed: {exc.stderr.strip()[:500]}") from None
    return out.stdout.strip()


def _message(archive: Archive, c: Candidate) -> str:
    if c.parent_id is None:
        return f"original workspace ({c.id})"
    claim = c.meta.get("claim") or {}
    decision = archive.decision(c.id)
    lines = [f"{c.meta.get('proposer', 'proposal')}: {claim.get('target') or 'change'} ({c.id})", ""]
    if claim.get("root_cause"):
        lines.append(f"Root cause: {claim['root_cause']}")
    if decision is not None:
        lines += [f"Gate: {decision.reason}", "Numbers: " + json.dumps(decision.numbers, sort_keys=True)]
    return "\n".join(lines)


def export_run(run: Any, dest: str | Path, workspace: str | Path | None = None) -> dict[str, Any]:
    """Write the run's accepted candidates into a new git repository at ``dest``."""
    repo = Path(dest)
    if repo.exists() and any(repo.iterdir()):
        raise RatchetError(f"{repo} exists and is not empty", hint="export into a new directory")
    archive = Archive(run)
    accepted = archive.candidates("accepted")
    if not accepted:
        raise RatchetError(f"run {run.id} has no accepted candidate to export")
    workspace = Path(workspace or run.config.get("workspace", ""))
    repo.mkdir(parents=True, exist_ok=True)
    _git(repo, "init", "-q")
    commits: dict[str, str] = {}
    for c in accepted:
        for child in repo.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        if workspace.is_dir():
            materialize(c, workspace, repo)
        else:  # the workspace moved away: the editable files are all the run holds
            for rel, text in c.files.items():
                (repo / rel).parent.mkdir(parents=True, exist_ok=True)
                (repo / rel).write_text(text)
        _git(repo, "add", "-A")
        tree = _git(repo, "write-tree")
        stamp = f"{int(c.created_at)} +0000"
        env = {**os.environ, "GIT_AUTHOR_NAME": "ratchet evolve", "GIT_AUTHOR_EMAIL": "evolve@ratchet.local",
               "GIT_COMMITTER_NAME": "ratchet evolve", "GIT_COMMITTER_EMAIL": "evolve@ratchet.local",
               "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        parents = ["-p", commits[c.parent_id]] if c.parent_id in commits else []
        commits[c.id] = _git(repo, "commit-tree", tree, *parents, "-m", _message(archive, c), env=env)
        _git(repo, "update-ref", f"refs/tags/cand-{c.id}", commits[c.id])
    best = max(accepted, key=lambda c: archive.score(c.id, "heldin") or 0.0)
    _git(repo, "update-ref", "refs/heads/main", commits[best.id])
    _git(repo, "symbolic-ref", "HEAD", "refs/heads/main")
    _git(repo, "reset", "-q", "--hard", "main")
    return {"path": str(repo), "commits": len(commits), "best": best.id, "head": commits[best.id]}
