def legal_moves(cells, player):
    board = [cells[9 + 9 * r : 17 + 9 * r] for r in range(8)]  # a header row of 8, then a row label per row
    other = "W" if player == "B" else "B"

    def flanks(r, c, dr, dc):
        r, c, n = r + dr, c + dc, 0
        while 0 <= r < 8 and 0 <= c < 8 and board[r][c] == other:
            r, c, n = r + dr, c + dc, n + 1
        return n > 0 and 0 <= r < 8 and 0 <= c < 8 and board[r][c] == player

    steps = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc]
    return [(r, c) for r in range(8) for c in range(8) if board[r][c] == "." and any(flanks(r, c, dr, dc) for dr, dc in steps)]
