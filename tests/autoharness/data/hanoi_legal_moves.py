def legal_moves(fields):
    # fields: the towers, {'A': [3, 2, 1], 'B': [], 'C': []}; the game accepts a move onto the same tower.
    return [s + " " + d for s in "ABC" for d in "ABC"
            if fields.get(s) and (s == d or not fields.get(d) or fields[d][-1] > fields[s][-1])]
