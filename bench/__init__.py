"""Benchmarks: one module per topic, each measuring a ratio against a baseline taken in the same run.

Run one with ``python -m bench.NAME``; run all (each in its own process) with ``python -m bench``;
list them with ``python -m bench --list``. Results go to ``bench/results/NAME.json`` and ``.md``,
written by the one results writer (``_results.py``). A bench is a config, a library call and a
table: report rendering and post-hoc tests are library features (``ratchet.evolve.report``,
``ratchet.evolve.report_tables``); what benches set up alike is in ``_setup.py``; no bench imports
another (modules starting with ``_`` are support, not benches).
"""
