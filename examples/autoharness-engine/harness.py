"""A first TicTacToe harness: it knows the action format ([N], N the cell 0-8) but not the rules.
It proposes any cell, taken or not, and believes every move legal; the refiner is to fix that."""

import random


def propose_action(board):
    return "[" + str(random.randint(0, 8)) + "]"


def is_legal_action(board, action):
    return True
