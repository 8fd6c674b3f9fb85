"""Test doubles of the engine's components: proposers that need no model (or the scripted one),
a broken grader, and a workspace for the synthetic ``noisy`` suite.

They are named in configs by path (``doubles:PlantedProposer``); the test folder is on sys.path.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from pydantic import Field

from ratchet.config import Settings
from ratchet.contracts import Candidate, Claim, Decision, Failure, Proposal, Skip, Task, TaskResult
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.suites.synthetic import NoisyOptions, NoisySuite

FILE = "harness.json"


def make_workspace(root: Path, p: float = 0.5, tasks: int = 40, extra: dict[str, str] | None = None) -> Path:
    """A noisy-suite workspace: harness.json editable, grader/settings.json protected."""
    ws = root / "ws"
    (ws / "grader").mkdir(parents=True, exist_ok=True)
    (ws / "manifest.yaml").write_text("name: noisy\neditable: ['harness.json', 'notes/*.md', '*.py']\n"
                                      "protected: ['grader/**']\nfeatures: [length]\n")
    (ws / FILE).write_text(json.dumps({"default": p}, indent=1) + "\n")
    (ws / "grader" / "settings.json").write_text(json.dumps({"tasks": tasks}))
    for rel, text in (extra or {}).items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return ws


def config(ws: Path, proposer: str = "doubles:PlantedProposer", options: dict | None = None, **kw: Any) -> EvolveConfig:
    base: dict[str, Any] = {
        "workspace": str(ws),
        "suite": {"name": "noisy", "options": {"tasks": 40}},
        "splits": {"search": 0.25, "heldin": 0.25, "heldout": 0.25, "test": 0.25},
        "selector": {"name": "greedy"},
        "proposers": [{"name": proposer, "options": options or {}}],
        # per-proposal alpha: these runs test the loop's mechanics on 10 held-in tasks, where the
        # run-wise correction (alpha / 2^k) would leave too little power (its own tests: test_gate.py)
        "gate": {"name": "paired", "options": {"correction": "none"}},
        "iterations": 3,
        "seeds": [0, 1, 2],
        "static": {"load_entry": False},
    }
    base.update(kw)
    return EvolveConfig.model_validate(base)


class PlantOptions(Settings):
    gain: float = 0.4
    """How much every task's pass probability rises."""
    cosmetic: bool = False
    """Change only whitespace (a control: no real change)."""
    target: str = FILE
    """Which file the proposal writes."""


class PlantedProposer:
    """Raises the declared pass probability by ``gain`` (or, cosmetic, re-indents the same JSON)."""

    name = "planted"
    deterministic = False

    def __init__(self, options: PlantOptions, ctx: EngineContext) -> None:
        self.options = options

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal:
        data = json.loads(parent.files[FILE])
        if self.options.cosmetic:
            text = json.dumps(data, indent=rng.randint(2, 9)) + "\n" * rng.randint(1, 5)
        else:
            data["default"] = min(1.0, data.get("default", 0.0) + self.options.gain)
            text = json.dumps(data, indent=1) + "\n"
        failing = [r.task_id for r in archive.results(parent.id, "search") if r.score == 0]
        return Proposal({self.options.target: text}, Claim("raise p", "p too low", tuple(failing)), self.name, (parent.id,))


class FilesOptions(Settings):
    files: dict[str, str] = Field(default_factory=dict)
    """The files every proposal writes."""


class FilesProposer:
    """Proposes exactly the given files (for the static checks)."""

    name = "files"
    deterministic = False

    def __init__(self, options: FilesOptions, ctx: EngineContext) -> None:
        self.options = options

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal:
        return Proposal(dict(self.options.files), Claim("test"), self.name, (parent.id,))


class ModelOptions(Settings):
    pass


class ModelProposer:
    """Asks the engine's model for a new default p, given the parent and the rejected attempts."""

    name = "model"
    deterministic = False

    def __init__(self, options: ModelOptions, ctx: EngineContext) -> None:
        self.model = ctx.model

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal:
        rejected = [c.id for c, _ in archive.rejected(3)]
        reply = self.model.complete([{"role": "user", "content": f"improve {parent.id}; rejected: {rejected}"}],
                                    temperature=0.7, seed=rng.randrange(10**6))
        return Proposal({FILE: json.dumps({"default": float(reply.text.strip())})}, Claim("model"), self.name, (parent.id,))


class GivesUpOptions(Settings):
    deterministic: bool = True
    """Declare the proposal a function of the archive alone (the loop then skips it for a parent it gave up on)."""
    exhausted: bool = False
    """Say so in the Skip (``Skip.exhausted``: the loop does not count the step)."""


class GivesUpProposer:
    """Never has anything to offer (the rules proposer once its labels teach it nothing new)."""

    name = "gives_up"

    def __init__(self, options: GivesUpOptions, ctx: EngineContext) -> None:
        self.deterministic, self.exhausted = options.deterministic, options.exhausted

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Skip:
        return Skip("nothing new learned", exhausted=self.exhausted)


class RecordingProposer:
    """Edits the protected grader first, then a valid file, recording the rejections it was shown."""

    name = "recording"
    deterministic = False
    shown: list[list[str]] = []

    def __init__(self, options: ModelOptions, ctx: EngineContext) -> None:
        self.calls = 0

    def propose(self, parent, archive, rng):
        RecordingProposer.shown.append([d.reason for _, d in archive.rejected()])
        self.calls += 1
        files = {"grader/settings.json": "{}"} if self.calls == 1 else {FILE: '{"default": 0.9}'}
        return Proposal(files, Claim("edit"), self.name, (parent.id,))


class GraderTamperer:
    """Stands for anything that changes the evaluator mid-run."""

    name = "tamper"
    deterministic = False

    def __init__(self, options: ModelOptions, ctx: EngineContext) -> None:
        self.ws = ctx.workspace

    def propose(self, parent, archive, rng):
        (Path(self.ws) / "grader" / "settings.json").write_text('{"tasks": 1}')
        return Proposal({FILE: '{"default": 0.31}'}, Claim("x"), self.name, (parent.id,))


class PassEverythingSuite(NoisySuite):
    """A broken grader: every task passes, whatever the candidate."""

    name = "pass-everything"

    def __init__(self, options: NoisyOptions, ctx: EngineContext | None = None) -> None:
        super().__init__(options, ctx)

    def evaluate(self, candidate: Candidate, tasks: list[Task], seed: int) -> list[TaskResult]:
        return [TaskResult(t.id, seed, 1.0) for t in tasks]


class CountingOptions(NoisyOptions):
    log: str = ""
    """File that gets one line per task evaluation actually run (across processes)."""
    die_before: int | None = None
    """SIGKILL this process when about to run evaluation number die_before + 1."""


class CountingSuite(NoisySuite):
    """The noisy suite, logging every evaluation it runs; optionally killing its process mid-run."""

    name = "counting"

    def __init__(self, options: CountingOptions, ctx: EngineContext | None = None) -> None:
        super().__init__(options, ctx)
        self.options: CountingOptions = options

    def fingerprint(self) -> str:
        # The log and the kill point do not decide a score: a resumed run is the same evaluator.
        o = self.options
        return NoisySuite(NoisyOptions(tasks=o.tasks, file=o.file, salt=o.salt)).fingerprint()

    def evaluate(self, candidate: Candidate, tasks: list[Task], seed: int) -> list[TaskResult]:
        log = Path(self.options.log)
        for task in tasks:
            done = len(log.read_text().splitlines()) if log.exists() else 0
            if self.options.die_before is not None and done >= self.options.die_before:
                os.kill(os.getpid(), signal.SIGKILL)
            with log.open("a") as f:
                f.write(f"{candidate.id} {task.id} {seed}\n")
        return super().evaluate(candidate, tasks, seed)


class AgentLikeOptions(Settings):
    calls: int = 3
    """Model calls made per proposal, straight on ``ctx.model`` as a tool-using runtime makes them."""
    propose: bool = False
    """Return a real change (raise the pass probability by 0.4) instead of nothing."""


class AgentLikeProposer:
    """Calls the run's model itself (an agent loop does; it has no ``asks`` counter) and then
    proposes nothing, or a planted change."""

    name = "agent-like"
    deterministic = False

    def __init__(self, options: AgentLikeOptions, ctx: EngineContext) -> None:
        self.options, self.ctx = options, ctx

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        for i in range(self.options.calls):
            self.ctx.model.complete([{"role": "user", "content": f"turn {i} on {parent.id}"}], max_tokens=8)
        if not self.options.propose:
            return Skip("the agent changed no editable file")
        data = json.loads(parent.files[FILE])
        data["default"] = min(1.0, data.get("default", 0.0) + 0.4)
        return Proposal(files={FILE: json.dumps(data) + "\n"}, claim=Claim(target="t"), proposer=self.name,
                        parents=(parent.id,))


class Archive:
    """An in-test ArchiveView: candidates with statuses, per-split results, rejected attempts, failed proposals."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[Candidate, str]] = {}
        self.by_split: dict[tuple[str, str], list[TaskResult]] = {}
        self.rejects: list[tuple[Candidate, Decision]] = []
        self.failed: list[dict] = []

    def add(self, candidate: Candidate, status: str = "accepted", **scores: float) -> Candidate:
        self.items[candidate.id] = (candidate, status)
        self.by_split[(candidate.id, "search")] = [
            TaskResult(task, 0, score, trace=f"trace of {task}: got {score}",
                       failures=() if score >= 1 else (Failure("test_failed", f"{task} assertion failed", task),))
            for task, score in scores.items()
        ]
        return candidate

    def record(self, candidate: Candidate, split: str = "search", results: list[TaskResult] | None = None,
               status: str = "evaluated") -> Candidate:
        """``candidate`` with the results given (none: it has no results on ``split``)."""
        self.items[candidate.id] = (candidate, status)
        self.by_split[(candidate.id, split)] = list(results or [])
        return candidate

    def candidates(self, status: str | None = None) -> list[Candidate]:
        return [c for c, s in self.items.values() if status is None or s == status]

    def results(self, candidate_id: str, split: str) -> list[TaskResult]:
        return self.by_split.get((candidate_id, split), [])

    def score(self, candidate_id: str, split: str) -> float | None:
        rs = self.results(candidate_id, split)
        return sum(r.score for r in rs) / len(rs) if rs else None

    def children(self, candidate_id: str) -> list[str]:
        return [c.id for c, _ in self.items.values() if c.parent_id == candidate_id]

    def rejected(self, limit: int = 10) -> list[tuple[Candidate, Decision]]:
        return self.rejects[-limit:]

    def unusable(self, limit: int | None = None) -> list[dict]:
        return self.failed[:limit]
