"""The README's measured section is one table whose every number is in the results file it cites."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rows() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## What has been measured", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert lines[0].split("|")[1:-1] == [" claim ", " baseline (same run) ", " result ", " n ", " results file "]
    return [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines[2:]]


def test_every_row_cites_a_results_file_that_holds_its_numbers() -> None:
    rows = _rows()
    assert len(rows) >= 10
    for claim, baseline, result, _n, cited in rows:
        path = ROOT / "bench" / "results" / cited.strip("`")
        assert path.is_file(), (claim, cited)
        held = path.read_text().replace(",", "")
        for number in re.findall(r"\d+(?:\.\d+)?", f"{baseline} {result}".replace(",", "")):
            assert number in held, (claim, number, cited)


def test_the_section_says_what_does_not_work_yet() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## What has been measured", 1)[1].split("\n## ", 1)[0]
    assert "What does not work yet" in section and "HumanEval" in section and "fitted" in section
    assert "make demo" in text and "make test" in text
