"""The benches' results writer keeps the files' format: the committed results, read back and
written again through it, come out byte for byte as the benches wrote them by hand before."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# bench/ is a package of the checkout, not of the installed distribution.
sys.path.insert(0, str(ROOT))

from bench._results import RESULTS, machine, write_json, write_markdown  # noqa: E402

#: Results of benches that write through the writer with its defaults (indent 2, a final newline).
DEFAULTS = ["executors_throughput", "model_gateway", "evolve_gate", "evolve_gate_heldin30", "evolve_humaneval_small",
            "evolve_humaneval_baseline", "evolve_textarena", "evolve_peers_small", "memory_long_run",
            "models_throughput", "runtime_repeat_guard", "sandbox_overhead", "ui_load",
            "evolve_coding_agent", "evolve_coding_agent_45_15b_opening_seeds", "evolve_peers.arms",
            "evolve_peers_small.arms", "runtime_vs_miniswe", "runtime_vs_miniswe_qwen2.5-coder-1.5b"]


@pytest.mark.parametrize("name", DEFAULTS)
def test_a_committed_result_is_written_again_byte_for_byte(name: str, tmp_path: Path):
    committed = (RESULTS / f"{name}.json").read_text()
    write_json(name, json.loads(committed), out=tmp_path)
    assert (tmp_path / f"{name}.json").read_text() == committed


@pytest.mark.parametrize("name, indent", [("envs_throughput", 2), ("envs_random_legal", 1)])
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
