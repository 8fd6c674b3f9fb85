"""The runtime-vs-mini-swe-agent bench reads why mini-swe-agent rejected replies from its own
trajectory file, so a RepeatedFormatError row says whether the model wrote several actions, none,
or was cut at the reply budget."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench/ is a package of the checkout, not of the installed distribution

from bench.runtime_vs_miniswe import format_errors  # noqa: E402


def rejected(n_actions: int, finish_reason: str, reply: str = "") -> dict:
    return {"role": "user", "content": "Format error",
            "extra": {"interrupt_type": "FormatError", "n_actions": n_actions, "model_response": reply,
                      "response": {"choices": [{"finish_reason": finish_reason}]}}}


def test_rejected_replies_are_counted_by_what_was_wrong(tmp_path: Path):
    trajectory = tmp_path / "t.traj.json"
    trajectory.write_text(json.dumps({"messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        rejected(7, "length"), rejected(0, "stop", "<returncode>0</returncode>\n<output>\nok\n</output>"),
        {"role": "assistant", "content": "ok", "extra": {"actions": [{"command": "ls"}]}},
        {"role": "user", "content": "<returncode>0</returncode>", "extra": {}},
        rejected(0, "stop", "THOUGHT: look\n```bash\nls\n```"), rejected(2, "stop", "```mswea_bash_command\nls\n```"),
        {"role": "exit", "content": "RepeatedFormatError", "extra": {"exit_status": "RepeatedFormatError"}}]}))
    assert format_errors(trajectory) == {"rejected": 4, "several_actions": 2, "no_action": 2, "cut_at_reply_budget": 1,
                                        "other_fence": 1, "wrote_observation": 1}


def test_a_run_without_a_readable_trajectory_has_no_counts(tmp_path: Path):
    assert format_errors(tmp_path / "missing.traj.json") is None
    broken = tmp_path / "broken.traj.json"
    broken.write_text("{not json")
    assert format_errors(broken) is None
