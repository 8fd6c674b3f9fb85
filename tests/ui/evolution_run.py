"""Improvement-engine runs for the Evolution view, made through the library: the engine's
synthetic ``noisy`` suite, the scripted model, and a proposer (named in the config as
``evolution_run:NoteProposer``) whose changes and claims are the model's words, ``<script>`` included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ratchet.config import Settings
from ratchet.contracts import Candidate, Claim, Proposal
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.loop import Engine
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

SCRIPT = "<script>window.__pwned = 1</script>"
FILE = "harness.json"


class NoteOptions(Settings):
    pass


class NoteProposer:
    """Asks the model for a new pass probability and a note: the first line of the reply is the
    number, the rest goes into ``notes/why.md`` and the claim's target; failing search tasks are
    predicted to flip."""

    name = "note"
    deterministic = False

    def __init__(self, options: NoteOptions, ctx: EngineContext) -> None:
        self.model = ctx.model

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal:
        reply = self.model.complete([{"role": "user", "content": f"improve {parent.files[FILE]}"}], temperature=0.7,
                                    seed=rng.randrange(10**6)).text
        number, _, note = reply.partition("\n")
        failing = sorted({r.task_id for r in archive.results(parent.id, "search") if r.score == 0})
        return Proposal({FILE: json.dumps({"default": float(number)}, indent=1) + "\n", "notes/why.md": note + "\n"},
                        Claim(note, "p too low", tuple(failing)), self.name, (parent.id,))


def workspace(root: Path, p: float) -> Path:
    ws = root / "ws"
    (ws / "grader").mkdir(parents=True, exist_ok=True)
    (ws / "manifest.yaml").write_text("name: noisy\neditable: ['harness.json', 'notes/*.md']\nprotected: ['grader/**']\n")
    (ws / FILE).write_text(json.dumps({"default": p}, indent=1) + "\n")
    (ws / "grader" / "settings.json").write_text("{}")
    return ws


def evolve_config(ws: Path, **kw: Any) -> EvolveConfig:
    return EvolveConfig.model_validate({
        "workspace": str(ws), "suite": {"name": "noisy", "options": {"tasks": 40}},
        "splits": {"search": 0.25, "heldin": 0.25, "heldout": 0.25, "test": 0.25}, "selector": {"name": "greedy"},
        "proposers": [{"name": "evolution_run:NoteProposer"}], "gate": {"name": "paired"}, "seeds": [0, 1, 2],
        "static": {"load_entry": False}, **kw})


def model() -> ScriptedModel:
    """From p = 0.1 to 0.5 (a real gain), from anything else to 0.05 (a loss): an accepted child,
    then one the gate rejects, whichever process asks (a resumed run asks a fresh model)."""
    def reply(messages) -> str:
        if '"default": 0.1' in messages[-1]["content"]:
            return f"0.5\nraise p {SCRIPT}"
        return f"0.05\nlower p {SCRIPT}"

    return ScriptedModel(reply)


def make_evolve_run(store: RunStore, tmp: Path, **kw: Any) -> tuple[str, EvolveConfig]:
    """A run of two steps on a workspace at p = 0.1; ``approval=...`` etc. pass through."""
    cfg = evolve_config(workspace(tmp, 0.1), iterations=2, **kw)
    run = store.create_run("evolve", cfg, name="noisy")
    Engine(cfg, run, model()).execute()
    return run.id, cfg


def resume(store: RunStore, run_id: str, cfg: EvolveConfig) -> dict[str, Any]:
    """What ``ratchet evolve resume`` does after an approval (the journal replays the model's replies)."""
    run = store.open_run(run_id)
    run.set_status("running")
    return Engine(cfg, run, model()).execute()
