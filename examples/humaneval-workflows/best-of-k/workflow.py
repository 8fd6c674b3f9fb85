"""Best-of-k selected by the visible examples: the hand-made baseline a searched workflow must beat.

Sample K codes, cut the model's own test code off each, run each distinct code on the docstring's
examples and answer the one that passes most (ties: the largest group that behaves the same).
K model calls and at most K test runs per task; run it at a temperature above 0 (evolve.yaml), or
the K samples are one.
"""

from flowops import as_step, code_messages, extract_code, sample_k, select_by_examples

K = 4


def workflow(task, files):
    replies = yield from sample_k(code_messages(task, files), k=K)
    codes = [c for c in (extract_code(r.text, task) for r in replies) if c]
    chosen = yield from select_by_examples(codes, task)
    return chosen.code if chosen else ""


step = as_step(workflow)
