"""Workflow 'best-of-4', compiled from an operator spec (ratchet.workflows.spec); edit the spec, not this file.

Steps: sample -> strip_tests -> select_by_examples. At most 4 model calls per task.
"""

from flowops import as_step, run_plan

PLAN = [{'op': 'sample', 'k': 4}, {'op': 'strip_tests'}, {'op': 'select_by_examples'}]


def workflow(task, files):
    return (yield from run_plan(PLAN, task, files))


step = as_step(workflow)
