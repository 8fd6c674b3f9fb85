"""A harness's code played against the games: where it runs (``runtime``: the sandbox with
``harnesslib`` importable), the harness as an envs agent (``player``), its checks against what the
game itself says (``transitions``: labelled transitions and legal lists; ``diagnoses``: plain-words
mistakes of a ``legal_actions``; ``dense``: the value h they add up to), how a state is shown to a
function (``views``) and the held-out protocol, the model with and without a harness (``protocol``).

Nothing here synthesizes a harness: that is ``ratchet.autoharness``, which imports this package and
is never imported by it (``tests/envs/test_layering.py``).
"""
