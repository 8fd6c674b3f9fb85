"""The improvement engine: a harness is a workspace of files; one loop edits, evaluates and keeps
a change only on honest evidence.

One step: archive -> selector (parent) -> proposer (change + claim) -> workspace snapshot ->
static check -> staged evaluation (smoke, then held-in) -> gate (noise band, paired test, guards)
-> archive. Every idea is a small class behind one of the Protocols in :mod:`ratchet.contracts`
(``Selector``, ``Proposer``, ``Evaluator``, ``Gate``).
"""
