"""Move workflow 'one-move', compiled from a move spec (ratchet.workflows.movespec); edit the spec, not this file.

Each move: sample. At most 1 model calls per move.
"""

from flowops import as_step
from moveops import run_move_plan

PLAN = [{'op': 'sample', 'k': 1, 'max_tokens': 16}]


def workflow(task, files):
    return (yield from run_move_plan(PLAN, task, files))


step = as_step(workflow)
