"""Sample -> extract -> test on the examples -> revise once -> vote.

Sample K codes and cut the model's own test code off each; run each distinct code on the docstring's
examples. When some pass them all, answer the majority among those (normalized code). When none
does, revise the one that passes most once with its failing examples, and answer the revision if it
does no worse. K + 1 model calls and K + 1 test runs per task at most (the same cost as best-of-(K+1)).
"""

from flowops import (
    as_step,
    code_messages,
    extract_code,
    normalized_code,
    revise,
    run_examples,
    sample_k,
    select_by_examples,
    visible_examples,
    vote,
)

K = 3


def workflow(task, files):
    replies = yield from sample_k(code_messages(task, files), k=K)
    codes = [c for c in (extract_code(r.text, task) for r in replies) if c]
    if not codes:
        return ""
    examples = visible_examples(task["prompt"], task["entry_point"])
    if not examples:
        return vote(codes).code
    chosen = yield from select_by_examples(codes, task, examples)
    checks = {normalized_code(c.code): c for c in chosen.checks}  # one check per distinct code
    passing = [code for code in codes if checks[normalized_code(code)].all_pass]
    if passing:
        return vote(passing).code
    best = checks[normalized_code(chosen.code)]
    fixed = yield from revise(task, best.code, best.feedback(examples), files.get("prompts/system.md", ""))
    after = yield from run_examples(fixed, examples)
    return fixed if after.passes >= best.passes else best.code


step = as_step(workflow)
