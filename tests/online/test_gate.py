"""The promotion gate: every check refuses on its own, a collapse is refused, status names the check."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.contracts import RatchetError
from ratchet.online import status as status_mod
from ratchet.online.evaluation import (
    BUILTIN_TASKS,
    EvaluationHook,
    GateConfig,
    GuardCase,
    HeldOutCase,
    Task,
    load_guard,
    refusal_line,
)
from ratchet.online.versions import VersionStore

CASES = [HeldOutCase([{"role": "user", "content": f"q{i}"}], "Ahoy! sure", "sure") for i in range(3)]
GUARD = [GuardCase([{"role": "user", "content": f"g{i}"}], f"answer {i}") for i in range(3)]


class FakeScorer:
    """Log-probs from a table: the base's and the candidate's, per (response kind)."""

    version = 0

    def __init__(self, *, preferred=-1.0, dispreferred=-2.0, guard=-0.5, kl=0.1, base_preferred=-1.5,
                 base_dispreferred=-1.0, base_guard=-0.5, tokens=2, collapsed=False) -> None:
        self.collapsed = collapsed
        self.now = {"pref": preferred, "disp": dispreferred, "guard": guard}
        self.base = {"pref": base_preferred, "disp": base_dispreferred, "guard": base_guard}
        self.kl = kl
        self.tokens = tokens

    def _kind(self, messages, response) -> str:
        if messages[0]["content"].startswith("g"):
            return "guard"
        return "pref" if response.startswith("Ahoy") else "disp"

    def mean_token_logprob(self, messages, response, *, base=False) -> float:
        return (self.base if base else self.now)[self._kind(messages, response)]

    def sequence_logprob(self, messages, response, *, base=False) -> float:
        return self.mean_token_logprob(messages, response, base=base) * self.tokens

    def response_kl_to_base(self, pairs) -> float:
        return self.kl

    def generate(self, messages, max_tokens, *, base=False) -> str:
        return "The answer is 4." if base or not self.collapsed else "Ah, hello there! I'm here to help."


TASKS = [Task([{"role": "user", "content": f"g{i} 2+2?"}], "4") for i in range(3)]


def gate(**settings) -> EvaluationHook:
    return EvaluationHook(CASES, tolerance=0.5, guard=GUARD, gate=GateConfig(**settings), tasks=TASKS)


def test_a_healthy_candidate_passes_every_check() -> None:
    verdict = gate().evaluate(FakeScorer(), baseline=-1.0)
    assert verdict["promote"] and verdict["failed"] == []
    assert set(verdict["checks"]) == {"preference", "preferred_floor", "kl", "guard", "tasks"}
    assert verdict["score"] == pytest.approx(2.0)  # margin (-1 - -2) * 2 tokens
    assert refusal_line(verdict) is None


@pytest.mark.parametrize(("scorer", "failed"), [
    # The margin fell below the current version's by more than the tolerance.
    (FakeScorer(preferred=-2.0, dispreferred=-1.5), "preference"),
    # The preferred replies fell more than 1 nat/token below the base, although the margin grew.
    (FakeScorer(preferred=-3.0, dispreferred=-9.0), "preferred_floor"),
    # Far from the base.
    (FakeScorer(kl=2.5), "kl"),
    # The neutral references fell outside the guard's band.
    (FakeScorer(guard=-1.2), "guard"),
    # Teacher forcing looks fine, but the greedy replies no longer answer the neutral tasks.
    (FakeScorer(collapsed=True), "tasks"),
])
def test_each_check_refuses_on_its_own(scorer, failed) -> None:
    verdict = gate().evaluate(scorer, baseline=1.0)
    assert not verdict["promote"]
    assert verdict["failed"] == [failed]
    assert failed in refusal_line(verdict)


def test_the_collapse_of_the_old_settings_is_refused_though_its_margin_improved() -> None:
    # The shape measured at lr 2e-3: both log-probs fell (the margin still grew), KL to base 8.2,
    # neutral answers far less likely.
    collapse = FakeScorer(preferred=-6.0, dispreferred=-12.0, guard=-4.0, kl=8.2, collapsed=True)
    old_rule = EvaluationHook(CASES, tolerance=0.5)  # what the old gate looked at: the margin
    assert old_rule.score(collapse) > old_rule.score(FakeScorer(preferred=-1.5, dispreferred=-1.0, kl=0.0))
    verdict = gate().evaluate(collapse, baseline=-1.0)
    assert verdict["checks"]["preference"]["passed"]
    assert not verdict["promote"] and set(verdict["failed"]) == {"preferred_floor", "kl", "guard", "tasks"}
    line = refusal_line(verdict)
    assert "kl: 8.200 > max 1.000" in line and "guard" in line and "preferred_floor" in line
    assert "tasks: solved 0/3 < 2 (base 3)" in line


def test_the_guard_band_widens_with_noisy_cases_and_has_a_floor() -> None:
    class Noisy(FakeScorer):
        def mean_token_logprob(self, messages, response, *, base=False):
            if messages[0]["content"].startswith("g") and not base:
                return {"g0": -0.5, "g1": -2.5, "g2": 0.1}[messages[0]["content"]]
            return super().mean_token_logprob(messages, response, base=base)

    check = gate(guard_tolerance=0.1, guard_z=3.0).evaluate(Noisy(), baseline=-1.0)["checks"]["guard"]
    assert check["band"] > 0.1 and check["passed"] == (check["change"] >= -check["band"])
    assert gate(guard_tolerance=0.4).evaluate(FakeScorer(guard=-0.8), baseline=-1.0)["checks"]["guard"]["passed"]
    assert gate(guard_tolerance=0.1).evaluate(Noisy(), baseline=-1.0)["checks"]["guard"]["band"] == 0.1


def test_guard_cases_load_and_bad_lines_name_the_file(tmp_path) -> None:
    good = tmp_path / "guard.jsonl"
    good.write_text(json.dumps({"messages": [{"role": "user", "content": "2+2?"}], "reference": "4"}) + "\n")
    assert load_guard(good)[0].reference == "4"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n')
    with pytest.raises(RatchetError, match="bad.jsonl:1"):
        load_guard(bad)


def test_status_says_which_check_refused_a_version(tmp_path) -> None:
    base = status_mod.online_dir(tmp_path / "r1")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    verdict = gate().evaluate(FakeScorer(preferred=-6.0, dispreferred=-12.0, guard=-4.0, kl=8.2), baseline=-1.0)
    from ratchet.online.queue import TurnQueue

    TurnQueue(base / status_mod.QUEUE_NAME)
    VersionStore(base / status_mod.VERSIONS_NAME).publish(adapter, {"evaluation": verdict}, promote=False)
    rows = status_mod.collect(tmp_path / "r1")["versions"]
    assert rows[1]["refused"] and not rows[1]["promoted"]
    result = CliRunner().invoke(app, ["serve", "status", "--runs-root", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "v1 not served:" in text and "kl: 8.200 > max 1.000" in text


class TaskScorer(FakeScorer):
    """Answers the built-in tasks like the base does, unless collapsed; records the KL pairs it was asked."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.kl_pairs: list = []

    def generate(self, messages, max_tokens, *, base=False) -> str:
        answers = dict(BUILTIN_TASKS)
        return "Ah, hello there!" if self.collapsed and not base else f"Ahoy! It is {answers[messages[0]['content']]}."

    def response_kl_to_base(self, pairs) -> float:
        self.kl_pairs = list(pairs)
        return self.kl


def test_without_a_held_out_file_the_builtin_tasks_and_kl_still_gate() -> None:
    hook = EvaluationHook.from_config(None, gate=GateConfig())
    assert hook is not None and len(hook.tasks) == len(BUILTIN_TASKS) and not hook.cases
    healthy = TaskScorer()
    verdict = hook.evaluate(healthy, baseline=hook.score(healthy))
    assert verdict["promote"] and set(verdict["checks"]) == {"kl", "tasks"}
    # KL is measured on the base's own replies to the tasks (there is nothing else to measure it on).
    assert [r for _, r in healthy.kl_pairs] == [f"Ahoy! It is {a}." for _, a in BUILTIN_TASKS]
    assert hook.evaluate(TaskScorer(kl=2.5), 0.0)["failed"] == ["kl"]
    assert hook.evaluate(TaskScorer(collapsed=True), 0.0)["failed"] == ["tasks"]
    assert EvaluationHook.from_config(None, gate=GateConfig(builtin=False)) is None
