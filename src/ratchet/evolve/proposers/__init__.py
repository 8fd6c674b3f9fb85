"""Proposers: each makes one change to a parent candidate and states what it claims to fix.

``reflective`` (GEPA: rewrite one surface from the parent's failure traces), ``diff`` (OpenEvolve:
SEARCH/REPLACE blocks, whole-file fallback), ``merge`` (GEPA merge of two parents' surfaces),
``agentic`` (a tool-using agent over the raw traces; Ratchet's agent runtime by default),
``critic_refiner`` (AutoHarness's critic + refiner: a few failures, one per error type, shown to a
domain's refiner), ``mutation`` and ``autofix`` (program mutations and fixes, no model call),
``choices`` (declared alternatives), ``noop`` and ``cosmetic`` (controls for the A/A benchmark).
A configuration's own proposers live with it and are named by import path (AutoHarness's
``ratchet.autoharness.rules:InducedRulesProposer``).
Every one is built as ``Cls(options, ctx)`` and implements :class:`ratchet.contracts.Proposer`; one that cannot use a
reply returns a :class:`~ratchet.contracts.Skip` with why (also in the run's ``proposer_skips.jsonl``).
See docs/evolve-proposers.md.
"""
