"""The benches' results writer keeps the files' format: the committed results, read back and
written again through it, come out byte for byte as the benches wrote them by hand before."""

from __future__ import annotations

import json
import os
import platform
import sys
from argparse import Namespace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# bench/ is a package of the checkout, not of the installed distribution.
sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402
    autoharness_ablation,
    autoharness_ceiling,
    autoharness_harvest,
    autoharness_suite,
    autoharness_table,
)
from bench._results import RESULTS, machine, write_json, write_markdown  # noqa: E402

#: Results of benches that write through the writer with its defaults (indent 2, a final newline).
DEFAULTS = ["executors_throughput", "model_gateway", "evolve_gate", "evolve_gate_heldin30", "evolve_humaneval_small",
            "evolve_humaneval_baseline", "evolve_textarena", "evolve_peers_small", "memory_long_run",
            "models_throughput", "runtime_repeat_guard", "sandbox_overhead", "ui_load",
            "evolve_coding_agent", "evolve_coding_agent_45_15b_opening_seeds", "evolve_peers.arms",
            "evolve_peers_small.arms", "runtime_vs_miniswe", "runtime_vs_miniswe_qwen2.5-coder-1.5b",
            "autoharness_suite40", "autoharness_suite145_rules"]
#: Results the AutoHarness benches wrote by hand with ``indent=2`` and no final newline: written again
#: through the writer, they gain that newline and nothing else.
NO_FINAL_NEWLINE = ["autoharness_ablation", "autoharness_ceiling", "autoharness_ceiling_before",
                    "autoharness_ceiling_tictactoe", "autoharness_harvest", "autoharness_table",
                    "autoharness_table_engine", "autoharness_table_engine_fixes", "autoharness_table_faithful",
                    "autoharness_table_induce"]


@pytest.mark.parametrize("name", DEFAULTS)
def test_a_committed_result_is_written_again_byte_for_byte(name: str, tmp_path: Path):
    committed = (RESULTS / f"{name}.json").read_text()
    write_json(name, json.loads(committed), out=tmp_path)
    assert (tmp_path / f"{name}.json").read_text() == committed


@pytest.mark.parametrize("name, indent",
                         [("envs_throughput", 2), ("envs_random_legal", 1)] + [(n, 2) for n in NO_FINAL_NEWLINE])
def test_results_written_without_a_final_newline_gain_only_that(name: str, indent: int, tmp_path: Path):
    committed = (RESULTS / f"{name}.json").read_text()
    assert not committed.endswith("\n")
    write_json(name, json.loads(committed), out=tmp_path, indent=indent)
    assert (tmp_path / f"{name}.json").read_text() == committed + "\n"


def test_the_writer_creates_the_folder_applies_default_and_keeps_markdown_as_given(tmp_path: Path):
    out = tmp_path / "a" / "b"
    write_json("x", {"path": Path("/p"), "n": 1.5}, out=out, indent=1, default=str)
    assert (out / "x.json").read_text() == '{\n "path": "/p",\n "n": 1.5\n}\n'
    with pytest.raises(TypeError):  # without default, what JSON cannot hold is an error, as before
        write_json("y", {"path": Path("/p")}, out=out)
    write_markdown("x", "# title\n\n| a | µ |", out=out)
    assert (out / "x.md").read_text() == "# title\n\n| a | µ |"


def test_the_machine_block_names_cpus_and_python_first_then_the_benchs_own_readings():
    block = machine(platform="p", load=(1.0, 2.0, 3.0))
    assert block == {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": "p", "load": (1.0, 2.0, 3.0)}
    assert list(block) == ["cpus", "python", "platform", "load"]


# The AutoHarness benches' own writers, fed what they committed: the same JSON (and where the bench's
# table has not changed since, the same markdown) comes out, so their results stay reproducible.

@pytest.mark.parametrize("name", ["autoharness_ablation", "autoharness_harvest"])
def test_the_ablation_and_harvest_benches_write_their_committed_results_again(name: str, tmp_path: Path):
    committed = (RESULTS / f"{name}.json").read_text()
    data = json.loads(committed)
    if name == "autoharness_ablation":
        args = Namespace(model=data["model"], env=data["env"], max_calls=data["max_calls"])
        autoharness_ablation._write(args, data["rows"], out=tmp_path)
    else:
        autoharness_harvest._write(data["rows"], Namespace(seeds=data["seeds"], per_seed=data["per_seed"]), out=tmp_path)
    assert (tmp_path / f"{name}.json").read_text() == committed + "\n"
    assert (tmp_path / f"{name}.md").read_text() == (RESULTS / f"{name}.md").read_text()


@pytest.mark.parametrize("name", ["autoharness_suite40", "autoharness_suite145_rules"])
def test_the_suite_bench_writes_its_committed_results_again_byte_for_byte(name: str, tmp_path: Path):
    committed = (RESULTS / f"{name}.json").read_text()
    data = json.loads(committed)
    autoharness_suite._write(name, data["settings"], data["chunks"], data["games"], out=tmp_path)
    assert (tmp_path / f"{name}.json").read_text() == committed
    rendered = autoharness_suite.markdown(data["settings"], data["chunks"], data["games"])
    assert (tmp_path / f"{name}.md").read_text() == rendered


@pytest.mark.parametrize("name", ["autoharness_table", "autoharness_table_engine", "autoharness_table_engine_fixes",
                                  "autoharness_table_faithful", "autoharness_table_induce"])
def test_the_table_bench_rebuilds_its_committed_results_from_its_rows_and_first_notes(name: str, tmp_path: Path):
    from ratchet.autoharness.report import markdown_table

    committed = (RESULTS / f"{name}.json").read_text()
    data = json.loads(committed)
    # what the bench holds while it runs: the first run's notes, and rows only for the games it reached
    notes = [n for n in data["notes"] if not n.startswith("rows run again")]
    rows = [r for r in data["games"] if r.get("reason") != "not reached in the time available"]
    rebuilt = autoharness_table.results(data["settings"], notes, rows, [r["env"] for r in data["games"]])
    autoharness_table._write(name, rebuilt, markdown_table, out=tmp_path)
    assert (tmp_path / f"{name}.json").read_text() == committed + "\n"
    rendered = markdown_table(data["games"], autoharness_table.TITLE, data["notes"])
    assert (tmp_path / f"{name}.md").read_text() == rendered


def test_the_tables_results_name_the_rows_run_again_and_the_games_not_reached():
    notes = ["first run's note"]
    rows = [{"env": "A", "status": "done"}, {"env": "B", "status": "done", "rerun": "2026-12-01 at abc1234"}]
    data = autoharness_table.results({"model": "m"}, notes, rows, ["A", "B", "C", "D"])
    assert data["settings"] == {"model": "m"} and list(data) == ["settings", "notes", "games"]
    assert data["notes"][0] == "first run's note" and len(data["notes"]) == 2
    assert data["notes"][1].startswith("rows run again on newer code: B (2026-12-01 at abc1234)")
    assert notes == ["first run's note"]  # the caller's notes are not extended in place: each save adds the line once
    assert [r["env"] for r in data["games"]] == ["A", "B", "C", "D"]
    assert [r["status"] for r in data["games"][2:]] == ["not run", "not run"]
    untouched = autoharness_table.results({}, notes, rows[:1], ["A"])
    assert untouched["notes"] == notes and untouched["games"] == rows[:1]


def test_the_ceiling_bench_writes_its_rows_and_a_table_ending_in_its_notes(tmp_path: Path):
    rows = [{"env": "TicTacToe-v0", "path": "engine", "best_h": 1.0, "first_h": None, "best_by": "harness_refiner",
             "model_calls": 1, "s": 2.5}]
    autoharness_ceiling._write("ceiling", rows, out=tmp_path)
    assert (tmp_path / "ceiling.json").read_text() == json.dumps({"rows": rows}, indent=2) + "\n"
    text = (tmp_path / "ceiling.md").read_text()
    assert text == autoharness_ceiling.markdown(rows) and text.endswith("\n\n" + autoharness_ceiling.NOTES)
    assert "| TicTacToe-v0 | – | 1.000 | harness_refiner | 1 | 2.5 |" in text.splitlines()
