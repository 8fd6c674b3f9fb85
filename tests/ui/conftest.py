"""Real runs for the dashboard to show, made through the library with the scripted model: an
AutoHarness synthesis (search, held-out protocol, adoption), a `ratchet play` rollout, a logged
conversation with tool calls, and a serving run with weight versions and judged turns."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.library import HarnessLibrary
from ratchet.autoharness.engine import synthesize_on_engine
from ratchet.envs.harness.protocol import ProtocolConfig
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.cli import app as cli_app
from ratchet.models import ScriptedModel
from ratchet.online import status as online_status
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn
from ratchet.online.status import QUEUE_NAME, VERSIONS_NAME, online_dir
from ratchet.online.versions import VersionStore
from ratchet.store import RunStore

# The correct TicTacToe harness of the AutoHarness tests, shared rather than copied.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "autoharness"))
from fakes import GOOD  # noqa: E402
from evolution_run import make_evolve_run  # noqa: E402

#: Model-written text that must be shown, never run: the first harness carries it in a comment.
SCRIPT = "<script>window.__pwned = 1</script>"

LOOSE = f'''import random
# {SCRIPT}

def propose_action(board):
    return "[" + str(random.randint(0, 8)) + "]"

def is_legal_action(board, action):
    return True
'''



def refiner():
    """First a harness that accepts every move (h < 1), then a correct one (h = 1): a tree of two."""
    codes = iter([LOOSE, GOOD])

    def respond(messages) -> str:
        if "Python function" in messages[-1]["content"]:
            return f"Here it is {SCRIPT}\n```python\n{next(codes, GOOD)}```"
        return "The centre is best.\n<move>[4]</move>"

    return ScriptedModel(respond)


def make_autoharness_run(store: RunStore, tmp: Path) -> str:
    # twelve search seeds: six held-in games, the fewest on which the engine's paired gate can keep a child
    cfg = AutoHarnessConfig(method="faithful", eval_steps=20, search_seeds=list(range(12)), heldout_seeds=[1000, 1001],
                            iterations=4, library_dir=str(tmp / "lib"))
    run = store.create_run("autoharness", cfg.model_dump(), "ui-test")
    proto = ProtocolConfig(legal_seeds=2, legal_steps=6, reward_games=2, matches=2, step_cap=20)
    model = refiner()  # the engine accounts the refiner's calls; the player (unaccounted here) plays the held-out games
    synthesize_on_engine(cfg, model, run, protocol=proto, play_model=model,
                         runtime_factory=InProcessHarness, extra={"harness_runtime": InProcessHarness},
                         library=HarnessLibrary(tmp / "lib"), description="Tic Tac Toe")
    return run.id


def make_play_run(root: Path) -> str:
    result = CliRunner().invoke(cli_app, ["play", "--env", "TicTacToe-v0", "--agent", "random-legal", "--episodes", "3",
                                          "--workers", "1", "--run-dir", str(root)])
    assert result.exit_code == 0, result.output
    return RunStore(root).list_runs(kind="play", limit=1)[0]["id"]


def make_conversation_run(store: RunStore) -> str:
    run = store.create_run("agent", {"task": "list files"}, "tools")
    with run.trajectory_writer("agent", session_id="s-tools") as log:
        log.write([
            {"role": "user", "content": "What is in the current directory?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call-1", "type": "function", "function": {"name": "list_dir", "arguments": json.dumps({"path": "."})}}]},
            {"role": "tool", "tool_call_id": "call-1", "content": "README.md\nsrc\n"},
            {"role": "assistant", "content": f"Two entries: README.md and src. {SCRIPT}"},
        ])
    run.set_status("done", {"turns": 4})
    return run.id


def _adapter(path: Path, marker: str) -> Path:
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"r": 4, "marker": marker}))
    (path / "adapter_model.safetensors").write_bytes(marker.encode())
    return path


def make_online_run(root: Path, name: str) -> Path:
    """A serving run as `ratchet serve --learn` leaves it: judged turns, hints, two weight versions
    (v1 promoted, v2 refused by evaluation), status snapshots."""
    run_dir = root / name
    base = online_dir(run_dir)
    queue = TurnQueue(base / QUEUE_NAME)
    replies = [("Reverse a string: s[::-1]", "Thanks, that works perfectly!", 1, None),
               ("Use a loop to reverse it.", "No, I meant reverse the words", -1, "Split on spaces and reverse the list of words."),
               (f"Here: {SCRIPT}", "perfect", 1, None)]
    for i, (reply, nxt, reward, hint) in enumerate(replies):
        turn = Turn(f"t{i}", f"session-{i % 2}", False, "main", [{"role": "user", "content": f"question {i}"}], reply,
                    [1, 2], [3], [-0.5], policy_version=0 if i < 2 else 1, created_at=time.time() - 60 + i)
        queue.add_turn(turn)
        queue.set_next_state(turn.turn_id, nxt)
        queue.add_judgement(Judgement(turn.turn_id, reward, [reward, reward, 0], hint, nxt, "rule"))
        online_status.write(run_dir)
    versions = VersionStore(base / VERSIONS_NAME)
    versions.publish(_adapter(run_dir / "a1", "one"), {"loss": 0.61, "kl_to_base": 0.01, "evaluation": {"score": 0.5}}, promote=True)
    versions.publish(_adapter(run_dir / "a2", "two"), {"loss": 0.9, "kl_to_base": 0.2, "evaluation": {"score": 0.1}}, promote=False)
    online_status.write(run_dir)
    return run_dir


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict:
    """One store holding every kind of run; read-only tests share it."""
    tmp = tmp_path_factory.mktemp("ui-store")
    root = tmp / "runs"
    store = RunStore(root)
    ids = {
        "autoharness": make_autoharness_run(store, tmp),
        "play": make_play_run(root),
        "agent": make_conversation_run(store),
        "serve": make_online_run(root, "serve-test").name,
        "evolve": make_evolve_run(store, tmp / "evolve")[0],
    }
    return {"root": root, "store": store, **ids}
