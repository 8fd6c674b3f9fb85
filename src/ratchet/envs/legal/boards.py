"""Board games: legal moves from the board in ``state.game_state`` and the game's own validators.

Each function mirrors the move syntax of the game's ``step`` (TextArena 0.7.4) and calls the game's
own check wherever one exists without side effects; where the only check also records an invalid
move (Ultimate Tic-Tac-Toe's ``_is_valid_move``), its conditions are restated here.
"""

from __future__ import annotations

import random
from typing import Any

from ratchet.envs.legal import rule

_KING = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]


def _player(env: Any) -> int:
    return int(env.state.current_player_id)


def _squares_of(board: list[list[str]], n: int, piece: str) -> list[tuple[int, int]]:
    """(row, column) of every square of an n×n board holding ``piece``."""
    return [(r, c) for r in range(n) for c in range(n) if board[r][c] == piece]


@rule("SantoriniBaseFixed")
def santorini(env: Any, rng: random.Random) -> list[str]:
    # The game's own generator, for the player to move. Its rules prompt prints the list for
    # player 0 only (to every seat, never updated), which is why reading text fails here.
    listed = env._get_valid_moves(_player(env))
    return [m.strip() for m in listed.split(",") if m.strip()]


@rule("Alquerque")
def alquerque(env: Any, rng: random.Random) -> list[str]:
    from textarena.envs.Alquerque.env import rc_to_coord

    pid = _player(env)
    piece, opp = ("R", "B") if pid == 0 else ("B", "R")
    board = env.state.game_state["board"]
    n = env.BOARD_N
    moves = []
    for r, c in _squares_of(board, n, piece):
        for dr, dc in env.forward_dirs[pid]:  # a step: forward only, onto an empty point
            tr, tc = r + dr, c + dc
            if 0 <= tr < n and 0 <= tc < n and board[tr][tc] == "":
                moves.append(f"[{rc_to_coord(r, c)} {rc_to_coord(tr, tc)}]")
        for dr, dc in env.neighbours:  # a capture: any direction, over an enemy, onto empty
            tr, tc = r + 2 * dr, c + 2 * dc
            if 0 <= tr < n and 0 <= tc < n and board[tr][tc] == "" and board[r + dr][c + dc] == opp:
                moves.append(f"[{rc_to_coord(r, c)} {rc_to_coord(tr, tc)}]")
    return moves


@rule("Breakthrough")
def breakthrough(env: Any, rng: random.Random) -> list[str]:
    pid = _player(env)
    n = env.board_size
    step = 1 if pid == 0 else -1
    files = env._col_to_file
    moves = []
    for r in range(n):
        for c in range(n):
            for dc in (-1, 0, 1):
                tr, tc = r + step, c + dc
                if env._is_on_board(tr, tc) and env._is_valid_move(pid, r, c, tr, tc):
                    moves.append(f"[{files[c]}{r + 1}{files[tc]}{tr + 1}]")
    return moves


@rule("Checkers")
def checkers(env: Any, rng: random.Random) -> list[str]:
    pid = _player(env)
    moves = []
    for r in range(8):
        for c in range(8):
            for dr, dc in ((1, 1), (1, -1), (-1, 1), (-1, -1), (2, 2), (2, -2), (-2, 2), (-2, -2)):
                if env._is_valid_move(pid, r, c, r + dr, c + dc):
                    moves.append(f"[{r} {c} {r + dr} {c + dc}]")
    return moves


@rule("Chess")
def chess(env: Any, rng: random.Random) -> list[str]:
    return [f"[{m.uci()}]" for m in env.state.game_state["board"].legal_moves]


@rule("LinesOfAction")
def lines_of_action(env: Any, rng: random.Random) -> list[str]:
    side, enemy = ("O", "X") if _player(env) == 0 else ("X", "O")
    board = env.state.game_state["board"]
    n = env.BOARD_N
    moves = []
    for r, c in _squares_of(board, n, side):
        for dr, dc in _KING:
            dist = env._count_pieces_on_line(r, c, dr, dc)
            tr, tc = r + dr * dist, c + dc * dist
            if not (0 <= tr < n and 0 <= tc < n) or board[tr][tc] == side:
                continue
            if any(board[r + dr * k][c + dc * k] == enemy for k in range(1, dist)):
                continue  # the game forbids jumping over an enemy piece
            moves.append(f"[{env.rc_to_coord(r, c)}{env.rc_to_coord(tr, tc)}]")
    return moves


@rule("QuantumTicTacToe")
def quantum_tictactoe(env: Any, rng: random.Random) -> list[str]:
    board = env.state.game_state["board"]
    free = [i for i, (r, c) in sorted(env.cell_mapping.items()) if not board[r][c]]
    return [f"[{a},{b}]" for i, a in enumerate(free) for b in free[i + 1:]]


@rule("ConnectFour")
def connect_four(env: Any, rng: random.Random) -> list[str]:
    top = env.state.game_state["board"][0]
    return [f"[col {c}]" for c in range(env.num_cols) if top[c] == "."]


@rule("UltimateTicTacToe")
def ultimate_tictactoe(env: Any, rng: random.Random) -> list[str]:
    gs = env.state.game_state
    forced = gs["next_micro_board"]
    moves = []
    for macro in range(9) if forced is None else (forced,):
        if gs["macro_board"][macro // 3][macro % 3] != " ":
            continue
        for micro in range(9):
            if gs["board"][macro][micro // 3][micro % 3] == " ":
                moves.append(f"[{macro} {micro}]")
    return moves


@rule("Othello")
def othello(env: Any, rng: random.Random) -> list[str]:
    from textarena.envs.Othello.env import BLACK, WHITE

    valid = env._valid_moves(BLACK if _player(env) == 0 else WHITE)
    # With no valid move the game skips the turn whatever is sent.
    return [f"[{r}, {c}]" for r, c in valid] or ["[pass]"]


@rule("Snake", "Surround")
def directions(env: Any, rng: random.Random) -> list[str]:
    # Any of the four directions is accepted (a move into a wall or body loses; it is not invalid).
    # These games kill the mover on an unknown word instead of calling set_invalid_move.
    return ["[up]", "[down]", "[left]", "[right]"]


@rule("Battleship")
def battleship(env: Any, rng: random.Random) -> list[str]:
    tracking = env.state.game_state["tracking_board"][_player(env)]
    n = env.grid_size
    return [f"[{chr(ord('A') + r)}{c}]" for r in range(n) for c in range(n) if tracking[r][c] == "~"]


@rule("Tak", kind="subset", note="placements and moves of a whole or partial stack onto one neighbour; "
      "multi-square spreads are legal too but not listed")
def tak(env: Any, rng: random.Random) -> list[str]:
    pid = _player(env)
    n = env.board_size
    board = env.board
    moves = []
    for kind in ("F", "W", "C"):
        allocation_piece = [f"{kind}{pid}"]
        for r in range(n):
            for c in range(n):
                if env._is_valid_placement({(r, c): allocation_piece}):
                    moves.append(f"[place () {{({r},{c}): [{kind}{pid}]}}]")
    for r in range(n):
        for c in range(n):
            stack = board[r][c]
            if not stack or stack[-1][-1] != str(pid):
                continue
            for dr, dc in ((0, 1), (0, -1), (1, 0), (-1, 0)):
                tr, tc = r + dr, c + dc
                if not (0 <= tr < n and 0 <= tc < n):
                    continue
                for count in range(1, len(stack) + 1):
                    pieces = stack[-count:]
                    if env._is_valid_movement((r, c), {(tr, tc): pieces}):
                        moves.append(f"[move ({r},{c}) {{({tr},{tc}): [{', '.join(pieces)}]}}]")
    return moves
