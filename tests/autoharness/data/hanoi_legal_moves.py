import re

def legal_moves(board):
    towers = {t: [int(x) for x in body.split(",") if x.strip()]
              for t, body in re.findall(r"^([A-C]): \[(.*?)\]", board.split("Current Board:")[-1], re.M)}
    # The game accepts a move onto the same tower.
    return [s + " " + d for s in "ABC" for d in "ABC" if towers.get(s) and (s == d or not towers.get(d) or towers[d][-1] > towers[s][-1])]
