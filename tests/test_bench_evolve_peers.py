"""bench.evolve_peers --size workflow: the peers repeat the workflow search's splits and budget, and
its table pairs each peer's best prompt with the search's arms on the same test problems. The peers
themselves run in the bench environment (not here); their arm record is written by hand below."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench/ is a package of the checkout, not of the installed distribution

from bench import _setup, evolve_peers, workflow_search
from bench._results import write_json, write_markdown


def test_the_workflow_size_repeats_the_workflow_searchs_splits() -> None:
    full = workflow_search.SIZES["full"]
    splits = evolve_peers.SIZES["workflow"]["splits"]
    assert splits is _setup.WORKFLOW_SPLITS
    assert (splits["search"], splits["heldin"], splits["test"]) == (full["search_ids"], full["heldin_ids"], full["test_ids"])


def test_the_workflow_table_pairs_a_peers_best_prompt_with_the_searchs_arms(tmp_path, monkeypatch) -> None:
    out = {"out": tmp_path}
    for module in (workflow_search, evolve_peers):
        monkeypatch.setattr(module, "write_json", lambda name, data, **kw: write_json(name, data, **out, **kw))
        monkeypatch.setattr(module, "write_markdown", lambda name, text: write_markdown(name, text, **out))
    assert workflow_search.main(["--size", "small", "--model", "scripted:", "--store", str(tmp_path / "runs"),
                                 "--out", "plumbing", "--threads", "1"]) == 0
    search = json.loads((tmp_path / "plumbing.json").read_text())
    test = workflow_search.SIZES["small"]["test_ids"]
    monkeypatch.setattr(evolve_peers, "RESULTS", tmp_path)
    monkeypatch.setattr(evolve_peers, "SIZE", {**evolve_peers.SIZES["workflow"], "ours": "plumbing",
                                               "out": "peers", "splits": {**_setup.WORKFLOW_SPLITS, "test": test}})
    assert evolve_peers.ratchet_budget()["calls"] == search["search"]["budget"]["calls"] > 0
    # A peer whose best prompt solved the first and last test problems, the original only the first.
    scores = {t: 0.0 for t in test}
    arm = {"arm": "gepa", "search": {"calls": 7}, "best_is_original": False, "peer": {},
           "test": {"best": {**scores, test[0]: 1.0, test[-1]: 1.0}, "original": {**scores, test[0]: 1.0}},
           "test_calls_per_task": {"best": 1.5, "original": 1.4}}
    (tmp_path / "peers.arms.json").write_text(json.dumps({"gepa": arm}))
    evolve_peers.workflow_table()
    table = json.loads((tmp_path / "peers.json").read_text())
    rows = {r["arm"]: r for r in table["rows"]}
    assert rows["gepa: best prompt, original workflow"]["passed"] == 2
    assert rows["gepa: best prompt, original workflow"]["pass_at_1"] == pytest.approx(2 / len(test))
    assert rows["gepa: original, graded here"]["passed"] == 1
    assert rows["workflow search: evolved"]["passed"] == search["arms"]["evolved"]["passed"]
    solved = {key.split("#")[0] for key in search["solved"]["evolved"]}
    [pair] = [p for p in table["pairs"] if p["second"] == "evolved"]
    gepa = {test[0], test[-1]}
    assert (pair["only_first"], pair["only_second"]) == (len(gepa - solved), len(solved - gepa))
    text = (tmp_path / "peers.md").read_text()
    assert "| gepa: best prompt, original workflow |" in text and "Not run: openevolve." in text
