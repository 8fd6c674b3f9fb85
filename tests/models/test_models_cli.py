from __future__ import annotations

from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.cli import doctor as doctor_cli

runner = CliRunner()


def test_models_list_and_path_with_an_empty_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RATCHET_CACHE_DIR", str(tmp_path))
    listed = runner.invoke(app, ["models", "list"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "qwen2.5-coder-0.5b" in listed.output and "smollm2-135m" in listed.output
    missing = runner.invoke(app, ["models", "path", "smollm2-135m"])
    assert missing.exit_code != 0 and "ratchet models pull smollm2-135m" in str(missing.exception)


def test_models_try_scripted_prints_text_and_tokens():
    result = runner.invoke(app, ["models", "try", "scripted:", "hello model"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "hello model" in result.output and "completion tokens" in result.output


def test_doctor_exits_1_when_a_check_fails(monkeypatch):
    bad = lambda: [doctor_cli.Check("thing", "fail", "broken", "fix it")]  # noqa: E731
    good = lambda: [doctor_cli.Check("other", "ok", "fine")]  # noqa: E731
    monkeypatch.setattr(doctor_cli, "CHECKS", (good, bad))
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 1 and "broken" in result.output and "fix it" in result.output
    monkeypatch.setattr(doctor_cli, "CHECKS", (good,))
    assert runner.invoke(app, ["doctor"]).exit_code == 0


def test_doctor_reports_a_crashing_check_as_failed(monkeypatch):
    def crash():
        raise OSError("disk on fire")

    monkeypatch.setattr(doctor_cli, "CHECKS", (crash,))
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 1 and "disk on fire" in result.output


def test_doctor_model_rows_flag_missing_default(monkeypatch, tmp_path):
    monkeypatch.setenv("RATCHET_CACHE_DIR", str(tmp_path))
    rows = {r.name: r for r in doctor_cli.check_models()}
    assert rows["model qwen2.5-coder-0.5b (default)"].status == "fail"
    assert rows["model smollm2-135m"].status == "ok" and "optional" in rows["model smollm2-135m"].detail
