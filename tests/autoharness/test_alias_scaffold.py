"""The aliases idea end to end on a small grid game that lists each move under two names (as Frozen
Lake does): the harvest infers them, the scaffold's ALIASES carries them into the harness, and its
legal_actions adds them to what the model's legal_moves returns, so legal_moves may return one name a move."""

from __future__ import annotations

from fakes import MemoryRun

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.contracts import Observation, StepResult
from ratchet.models import ScriptedModel

MOVES = {"[up]": (-1, 0), "[down]": (1, 0), "[left]": (0, -1), "[right]": (0, 1),
         "[w]": (-1, 0), "[s]": (1, 0), "[a]": (0, -1), "[d]": (0, 1)}
RULES = "[GAME] Walk the P to the G on a 2 x 3 grid. Move with [up] [down] [left] [right] or [w] [s] [a] [d].\n"


class FakeWalk:
    """One player on a 2 x 3 grid; a move off the grid is invalid; the goal ends the game."""

    env_id = "Walk-v0"
    num_players = 1

    def __init__(self, hints: bool = False) -> None:
        self.hints, self.at, self.echo = hints, (0, 0), ""

    def legal(self) -> list[str]:
        return [a for a, (dr, dc) in MOVES.items() if 0 <= self.at[0] + dr < 2 and 0 <= self.at[1] + dc < 3]

    def _text(self) -> str:
        rows = ["| " + " | ".join("P" if (r, c) == self.at else "G" if (r, c) == (1, 2) else "." for c in range(3)) + " |"
                for r in range(2)]
        hint = "\nAvailable Moves: " + ", ".join(f"'{a}'" for a in self.legal()) if self.hints else ""
        return RULES + self.echo + "[GAME] Current Board:\n" + "\n".join(rows) + "\n" + hint

    def reset(self, seed: int) -> Observation:
        self.at, self.echo = (0, 0), ""
        return Observation(0, self._text())

    def step(self, action: str) -> StepResult:
        self.echo = f"[Player 0] {action}\n"
        if action.strip() not in self.legal():
            return StepResult(Observation(0, self._text()), False, False, "you cannot move there")
        dr, dc = MOVES[action.strip()]
        self.at = (self.at[0] + dr, self.at[1] + dc)
        if self.at == (1, 2):
            return StepResult(None, True, rewards={0: 1.0})
        return StepResult(Observation(0, self._text()), False)

    def close(self) -> None:
        pass


# The directions only, never the letters: what the 0.5B wrote on Frozen Lake.
DIRECTIONS = '''```python
def legal_moves(cells):
    r, c = divmod(cells.index("P"), 3)
    moves = []
    if r > 0:
        moves.append("[up]")
    if r < 1:
        moves.append("[down]")
    if c > 0:
        moves.append("[left]")
    if c < 2:
        moves.append("[right]")
    return moves
```'''


def search(aliases: bool) -> Synthesis:
    cfg = AutoHarnessConfig(env="Walk-v0", method="ratchet", iterations=0, eval_envs=2, eval_steps=20,
                            ideas={"samples_per_step": 1, "library_seed": False, "induce": False, "repair": False, "aliases": aliases})
    return Synthesis(cfg, ScriptedModel([DIRECTIONS]), MemoryRun(), FakeWalk, InProcessHarness,
                     hint_env_factory=lambda: FakeWalk(hints=True), description=RULES)


def test_aliases_reach_the_harness_and_its_legal_actions_return_them():
    s = search(aliases=True)
    result = s.run_search()
    assert s.state["aliases"] == {"[up]": ["[w]"], "[down]": ["[s]"], "[left]": ["[a]"], "[right]": ["[d]"]}
    code = result.best_code
    # In the order the game first listed them (its first state lists no [up] nor [left]).
    assert "ALIASES = {'[down]': ['[s]'], '[right]': ['[d]'], '[left]': ['[a]'], '[up]': ['[w]']}" in code
    with InProcessHarness({"harness.py": code}) as runtime:
        board = FakeWalk(hints=False).reset(0).text
        assert runtime.call("legal_actions", board) == ["[down]", "[s]", "[right]", "[d]"]
        assert runtime.call("is_legal_action", board, "[d]") and not runtime.call("is_legal_action", board, "[a]")
    assert result.best_h == 1.0 and result.calls == 1
    # legal_moves' examples keep the game's whole lists: returning them passes too, and the request
    # is the one the search made before aliases.
    prompt = [m for m in s.model.calls[0]["messages"] if m["role"] == "user"][-1]["content"]
    assert "'[w]'" in prompt.split(">>> legal_moves(", 1)[1]


def test_without_the_idea_the_same_legal_moves_rejects_the_letters():
    s = search(aliases=False)
    result = s.run_search()
    assert "aliases" not in s.state and "ALIASES = {}" in result.best_code
    assert result.best_h < 1.0 and s.state["metrics"][result.best_id]["legal_actions_accuracy"] < 1.0
