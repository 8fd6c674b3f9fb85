"""Benchmarks: one module per topic, each measuring a ratio against a baseline taken in the same run.

Run one with ``python -m bench.NAME``; run all (each in its own process) with ``python -m bench``;
list them with ``python -m bench --list``. Results go to ``bench/results/NAME.json`` and ``.md``.
"""
