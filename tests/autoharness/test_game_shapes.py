"""Game shapes that defeated exploring and board reading on the per-game table's games, found by
running them offline: a board's Python lists read as actions (Tower of Hanoi: ``A: [3, 2, 1]``,
Chopsticks: ``Player 0: [1, 1]``), a template's one-letter names that the rules define as numbers
(``[attack M O]`` where ``M=your hand (0 or 1)``), towers named ``[A C]`` read as row and column, a
board under a "Current grid state (…):" header (Lights Out), a grid row of empty cells dropped as a
separator (Frozen Lake), a grammar of 104 actions whose first state used up every seed's quota, and a
board-less game (Guess the Number) whose observation window hid the guesses the game rejects again."""

from __future__ import annotations

import random
from pathlib import Path

from ratchet.envs.harnesslib import cells, current_board, parse_grid
from ratchet.envs import EnvConfig, make
from ratchet.envs.explore import harvest, listed_states
from ratchet.envs.grammar import infer_grammar

CHOPSTICKS = """You are Player 0 in Chopsticks. On your turn, choose one of:
  + Attack:  '[attack M O]'  where M=your hand (0 or 1), O=opponent hand (0 or 1).
  + Split:   '[split L R]'  to redistribute your total fingers into L and R (L+R = your total).
[GAME] Current Board:
Player 0: [1, 1]
Player 1: [1, 1]"""

HANOI = """To move a disk, type the source tower and the target tower (e.g., '[A C]').
[GAME] Current Board:
A: [3, 2, 1]
B: []
C: []"""


DATA = Path(__file__).parent / "data"
#: Right answers, shared with bench/autoharness_ceiling.py: read as text, the scripted model's reply.
HANOI_ANSWER = (DATA / "hanoi_legal_moves.py").read_text()
OTHELLO_ANSWER = (DATA / "othello_legal_moves.py").read_text()


def test_a_boards_lists_are_not_actions_and_one_letter_names_defined_as_numbers_are_numbers():
    chopsticks = infer_grammar(CHOPSTICKS)
    assert chopsticks.describe() == "[attack <int 0-1> <int 0-1>] or [split <int 0-9> <int 0-9>]"
    assert chopsticks.matches("[attack 1 0]") and chopsticks.matches("[split 0 2]") and not chopsticks.matches("[1 1]")
    hanoi = infer_grammar(HANOI)
    assert hanoi.describe() == "[<letter A-E> <letter A-E>]" and hanoi.size() == 25
    # Lowercase one-letter template words still stand for numbers.
    assert infer_grammar("Answer [r c] with r and c in 0-2.").describe() == "[<int 0-2> <int 0-2>]"


def test_boards_under_a_grid_state_header_and_rows_of_empty_cells():
    lights = ("Type [row col] to press a light.\n[GAME] Current grid state (Move 0, 20 moves remaining):\n"
              "   0 1\n0: O .\n1: . O\n\n[Player] [0 0]\n\n[GAME] Current grid state (Move 1, 19 moves remaining):\n"
              "   0 1\n0: . O\n1: O O")
    assert current_board(lights) == "   0 1\n0: . O\n1: O O"
    lake = "[GAME] Current Board:\n+---+---+\n| P |   |\n+---+---+\n|   |   |\n+---+---+\n| H | G |\n+---+---+"
    assert cells(parse_grid(current_board(lake))) == ["P", "", "", "", "H", "G"]


def test_a_grammar_of_104_actions_is_enumerated_and_later_states_get_lists():
    chopsticks = lambda: make("Chopsticks-v0", EnvConfig(remote="never"))  # noqa: E731
    found = harvest(chopsticks, None, [0, 1], per_seed=60, rng=random.Random(0))
    states = listed_states(found)
    assert len(states) >= 4 and sum(t.legal for t in found) >= 20
    first = next(t for t in found if not t.prefix)
    assert set(first.listed) == {"[attack 0 0]", "[attack 0 1]", "[attack 1 0]", "[attack 1 1]", "[split 0 2]", "[split 2 0]"}
    assert len({t.prefix for t in found if t.seed == 0}) >= 3  # the first state did not use up the seed's quota
    # Every state with a list was tried whole: its legal transitions are exactly its list's actions.
    for t in found:
        assert t.legal == (t.action in t.listed)


def test_a_game_without_a_board_keeps_its_earlier_moves_in_the_observation():
    env = make("GuessTheNumber-v0", EnvConfig(remote="never"))
    env.reset(5)
    for guess in range(1, 9):
        result = env.step(f"[{guess}]")
    # Its guesses are its state: the game rejects a repeated one, so a harness must see all of them.
    assert all(f"[Player] [{guess}]" in result.observation.text for guess in range(1, 9))
    env.close()


def test_a_listed_action_with_a_comma_is_the_same_action_as_the_scaffolds():
    from ratchet.envs.harnesslib import action_value, as_action

    # Othello prints "[2, 3]"; the scaffold's ACTION_FORM writes "[2 3]", which the game accepts too.
    assert action_value("[2, 3]") == action_value(as_action((2, 3), "[{} {}]")) == "2 3"
    assert action_value("[attack 0  1]") == "attack 0 1" and action_value("[e2e4]") == "e2e4"


def test_the_engine_reaches_h_1_on_tower_of_hanoi_with_a_right_answer(tmp_path):
    from fakes import synthesized

    summary, _, model, code, h = synthesized(tmp_path, "TowerOfHanoi-v0", "```python\n" + HANOI_ANSWER + "```")
    # No printed list: the grammar's 25 tower pairs were tried at each state, and the towers reach the code as named lists.
    assert h == 1.0 and summary["model_calls"] == 1
    assert "ACTION_FORM = '[{} {}]'" in code and "legal_moves(fields(current_board(board)))" in code
    [request] = [m["content"] for m in model.calls[0]["messages"] if m["role"] == "user"]
    examples = [line.strip() for line in request.splitlines() if line.strip().startswith(">>> legal_moves(")]
    assert examples and len(set(examples)) == len(examples) and "{'A': [3, 2, 1], 'B': [], 'C': []}" in request


def test_a_text_boards_doctest_example_shows_the_whole_history_its_answer_depends_on():
    from ratchet.autoharness.prompts import scaffold_request
    from ratchet.envs.harness.views import BoardView

    board = "Guess the number between 1 and 20.\n" + "".join(f"\n[Player] [{n}]\n\n[GAME] The target number is higher.\n" for n in range(1, 10))
    request = scaffold_request([((board,), [f"[{n}]" for n in range(10, 21)])], BoardView())
    assert all(f"[Player] [{n}]" in request for n in range(1, 10))


def test_the_mover_is_read_from_each_games_opening():
    from ratchet.envs.harnesslib import mover

    assert mover("You are Player 1 playing White (W) in a game of Othello.\n[Black] [2, 3]\n[GAME] Player 0 (B) played") == "W"
    assert mover("You are Player 0 in Tic Tac Toe.\nAs Player 0, you will be 'O', while your opponent is 'X'.\n") == "O"
    assert mover("You are Player 1 in Connect Four.\nYour disc symbol: O.\n[Player 0] [3]") == "O"
    assert mover("You are playing Black in a game of Breakthrough.") == "B"
    # A message after the opening names other marks; it is not the opening.
    assert mover("Guess the number.\n[GAME] Player 0 (B) played") == ""


def test_othellos_legal_moves_see_the_player_to_move_and_the_engine_reaches_h_1(tmp_path):
    from fakes import synthesized

    from ratchet.envs.harness.views import CellsView, MoverCellsView, choose_view
    from ratchet.envs import env_factory_for

    # the default ten search seeds: five held-in games, enough for the engine's gate to keep a child
    summary, _, _, code, h = synthesized(tmp_path, "Othello-v0", "```python\n" + OTHELLO_ANSWER + "```")
    # Both colours moved in the listed states: legal_moves gets the cells and the mover's mark, and
    # a mover with no move passes (the game then takes any action).
    assert "legal_moves(cells(parse_grid(current_board(board))), mover(board))" in code
    assert h == 1.0 and summary["model_calls"] == 1
    listed = listed_states(harvest(env_factory_for("Othello-v0"), env_factory_for("Othello-v0", hints=True), [0, 1], 60,
                                   random.Random(0)))
    assert isinstance(choose_view(listed), MoverCellsView)
    # The cells alone cannot say whose turn it is; a game where one mover is ever listed keeps them alone.
    one_mover = [(b, legal) for b, legal in listed if "(B)" in b.split("\n[")[0]]
    assert type(choose_view(one_mover)) is CellsView


def test_a_two_player_game_whose_free_cells_are_its_moves_keeps_the_cells_alone():
    """Tic Tac Toe: both marks move, but every numbered square is a move whoever moves, so
    legal_moves is not handed a player it has no use for."""
    from ratchet.envs.harness.views import CellsView, MoverCellsView, choose_view

    def state(player, grid, legal):
        rows = "\n".join(" | ".join(grid[r * 3:r * 3 + 3]) for r in range(3))
        return (f"You are Player {'01'[player == 'O']} in Tic Tac Toe.\nAs Player {'01'[player == 'O']}, "
                f"you will be '{player}'.\n[GAME] Current Board:\n\n{rows}\n", legal)

    states = [state("X", ["X", "X", "O", "3", "4", "O", "6", "O", "8"], ["[3]", "[4]", "[6]", "[8]"]),
              state("O", ["O", "O", "X", "3", "4", "5", "6", "7", "X"], ["[3]", "[4]", "[5]", "[6]", "[7]"])]
    assert type(choose_view(states)) is CellsView
    # the same boards where only some free squares are moves: the mover is handed over
    assert isinstance(choose_view([(states[0][0], ["[3]"]), states[1]]), MoverCellsView)
