"""The personalization bench's parts that need no model: which runs its flags ask for, the prompts a
seed gives, the result keys and the spread between seeds."""

from __future__ import annotations

import json

import pytest

from bench import online_personalization as bench
from ratchet.online.simulated_user import pools


def _planned(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, int]]:
    """The runs ``main`` starts for ``argv`` (the run itself replaced: the plan, not the server)."""
    started: list[tuple[str, str, int]] = []

    def fake_run(args, pref, signal, seed):
        started.append((pref, signal, seed))
        return {k: None for k in ("run", "base_preference", "best_served_preference", "final_served_preference",
                                  "base_guard", "final_served_guard", "first_improvement")}

    monkeypatch.setattr(bench, "run", fake_run)
    bench.main(argv)
    return started


def test_flags_select_preferences_signals_and_seeds_one_run_per_combination(monkeypatch) -> None:
    assert _planned(["--preference", "length,signoff", "--learn", "combine,binary", "--seed", "0,1"], monkeypatch) == [
        ("length", "combine", 0), ("length", "combine", 1), ("length", "binary", 0), ("length", "binary", 1),
        ("signoff", "combine", 0), ("signoff", "combine", 1), ("signoff", "binary", 0), ("signoff", "binary", 1)]
    assert _planned(["--preference", "name", "--signal", "opd"], monkeypatch) == [("name", "opd", 0)]
    # the playbook beside the weights: `ratchet serve --learn off --set context.online=true`
    assert _planned(["--learn", "context,binary", "--seed", "3"], monkeypatch) == [("length", "context", 3),
                                                                                  ("length", "binary", 3)]


@pytest.mark.parametrize("argv, message", [
    (["--preference", "length,shout"], "--preference: unknown shout"),
    (["--learn", "rl"], "--learn: unknown rl"),
    (["--learn", "off"], "--learn: unknown off"),  # a run that learns nothing measures nothing
    (["--seed", "one"], "--seed: 'one' is not"),
    (["--preference", "length,name", "--run", "r"], "--run names one run"),
])
def test_bad_flags_name_the_flag_and_the_choices(argv, message, monkeypatch) -> None:
    with pytest.raises(SystemExit) as err:
        _planned(argv, monkeypatch)
    assert message in str(err.value)


def test_a_seed_orders_the_conversation_prompts_and_the_gate_prompts_are_never_asked() -> None:
    pool = pools("numbered")
    a, b = bench.conversation_prompts(pool, 0), bench.conversation_prompts(pool, 1)
    assert a == bench.conversation_prompts(pool, 0) and a != b and sorted(a) == sorted(b)
    assert not set(bench.gate_prompts(pool)) & set(a) and not set(pool.heldout_prompts) & set(a)


def _result(seed, best, final, first=None, **extra):
    return {"model": "m", "preference": "length", "signal": "combine", "seed": seed, "label": None,
            "base_preference": 0.25, "best_served_preference": best, "final_served_preference": final,
            "guard_within_band": True, "preference_noise_band": 0.25, "base_guard": 0.75, "guard_noise_band": 0.25,
            "final_served_guard": 0.75, "conversations": 24, "serve_args": [], "wall_s": 60.0,
            "first_improvement": None if first is None else {"version": 1, "conversations": first, "elapsed_s": 9.0},
            "versions": [{"version": 0, "promoted": True, "preference": 0.25, "guard": 0.75}], **extra}


def test_results_are_keyed_by_seed_and_the_markdown_shows_the_spread() -> None:
    runs = {bench.result_key(r): r for r in (_result(0, 0.5, 0.5, 8), _result(1, 0.75, 0.25), _result(2, 1.0, 0.75, 16))}
    assert set(runs) == {"m/length/combine/s0", "m/length/combine/s1", "m/length/combine/s2"}
    assert bench.result_key({**_result(0, 0, 0), "seed": None, "label": "old"}) == "m/length/combine/old"
    (row,) = bench.spread(runs)
    assert row["seeds"] == [0, 1, 2] and row["final_mean"] == pytest.approx(0.5)
    assert row["final_sd"] == pytest.approx(0.25) and row["first_improvement"] == [8, None, 16]
    assert bench.spread({"m/length/combine/s0": _result(0, 0.5, 0.5)}) == []  # one seed is no spread
    text = bench.markdown({"runs": runs})
    assert "| m/length/combine | 0,1,2 | 0.25/0.25/0.25 | 0.75 ± 0.25 | 0.50 ± 0.25 (0.25–0.75) | 3/3 | 8, —, 16 |" \
        in text


def test_base_only_measures_each_preference_once_per_prompt_and_writes_the_table(monkeypatch, tmp_path) -> None:
    asked: list[str] = []

    class FakeGenerator:  # replies like the base: one plain sentence, never the preference
        def __init__(self, gguf, lora, threads) -> None:
            pass

        def reply(self, prompt: str, max_tokens: int) -> str:
            asked.append(prompt)
            return "The capital of France is Paris." if "France" in prompt else f"{prompt[:-1]} is a thing."

        def close(self) -> None:
            pass

    monkeypatch.setattr(bench, "Generator", FakeGenerator)
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr("ratchet.models.registry.model_path", lambda name: tmp_path / "m.gguf")
    assert _planned(["--base-only", "--preference", "length,name,numbered"], monkeypatch) == []
    base = json.loads((tmp_path / "online_personalization.json").read_text())["base"]
    assert base["qwen2.5-coder-0.5b/length"]["score"] == 1.0  # one plain sentence each
    assert base["qwen2.5-coder-0.5b/name"]["score"] == 0.0 and base["qwen2.5-coder-0.5b/numbered"]["met"] == 0
    assert base["qwen2.5-coder-0.5b/name"]["guard"] == pytest.approx(1 / 12)
    assert len(asked) == len(set(asked))  # length and name share their prompts: asked once
    assert "| qwen2.5-coder-0.5b | name | 0/12 | 0.00 | 40 | 0.08 |" in (tmp_path / "online_personalization.md").read_text()


def test_an_interrupted_base_measurement_keeps_what_it_measured_and_resumes(monkeypatch, tmp_path) -> None:
    calls: list[str] = []

    class Dying:
        def __init__(self, *a) -> None:
            pass

        def reply(self, prompt: str, max_tokens: int) -> str:
            calls.append(prompt)
            if len(calls) > 12:  # the held-out prompts of "length" done, then killed
                raise KeyboardInterrupt
            return "Sure, Noor! It is a thing."

        def close(self) -> None:
            pass

    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr("ratchet.models.registry.model_path", lambda name: tmp_path / "m.gguf")
    monkeypatch.setattr(bench, "Generator", Dying)
    with pytest.raises(KeyboardInterrupt):
        bench.measure_base("m", ["length", "numbered"], threads=1, max_tokens=40)
    kept = json.loads((tmp_path / "online_personalization.json").read_text())["base"]
    assert list(kept) == ["m/length"] and kept["m/length"]["guard"] is None
    calls.clear()
    monkeypatch.setattr(bench, "Generator", type("Fresh", (Dying,), {"reply": lambda self, q, n: calls.append(q) or
                                                                    "Sure, Noor! It is a thing."}))
    out = bench.measure_base("m", ["length", "name", "numbered"], threads=1, max_tokens=40)
    assert out["m/name"]["score"] == 1.0 and out["m/length"]["guard"] == 0.0
    assert not set(calls) & set(pools("length").heldout_prompts)  # reused, not asked again


def test_a_preference_checked_at_the_replys_end_gets_replies_long_enough_to_reach_it() -> None:
    import argparse

    default = argparse.Namespace(max_tokens=None)
    assert bench.max_tokens_for(default, "signoff") > bench.max_tokens_for(default, "length") == bench.MAX_TOKENS
    assert bench.max_tokens_for(argparse.Namespace(max_tokens=64), "signoff") == 64  # the flag wins


def test_a_run_started_at_one_reply_length_refuses_to_go_on_at_another(monkeypatch, tmp_path) -> None:
    import argparse

    from ratchet.models import registry

    monkeypatch.setattr(registry, "model_path", lambda name: tmp_path / "model.gguf")
    state = tmp_path / "m-signoff-combine-s0" / "bench" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"base": {"preference": 0.0}}))  # a run from before the length was recorded: 40
    args = argparse.Namespace(model="m", store=str(tmp_path), run=None, max_tokens=None, threads=1)
    with pytest.raises(SystemExit) as err:
        bench.run(args, "signoff", "combine", 0)
    assert "started with --max-tokens 40, not 160" in str(err.value) and "--max-tokens 40" in str(err.value)


def test_the_user_does_not_wait_for_a_partial_batch_the_trainer_holds(tmp_path) -> None:
    import sqlite3

    from ratchet.online.queue_file import _SCHEMA

    path = tmp_path / "queue.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(_SCHEMA)

    def states(*names: str) -> int:
        with sqlite3.connect(path) as db:
            db.execute("DELETE FROM turns")
            db.executemany("INSERT INTO turns VALUES (?, 's', 'main', 0, 0, 0.0, ?, '{}', NULL, NULL, NULL)",
                           [(f"t{i}", n) for i, n in enumerate(names)])
        return bench._waiting(path, min_batch=4)

    assert states("claimed", "claimed", "claimed") == 0  # held until a fourth sample comes
    assert states("claimed", "claimed", "claimed", "claimed") == 4  # a batch being trained
    assert states("judged", "claimed") == 2 and states("ready") == 1  # the judge or trainer still has work
    assert states("trained", "excluded") == 0


def test_the_result_records_which_judge_ran_and_the_markdown_says_it(tmp_path) -> None:
    from ratchet.online.judge.choice import JudgeChoice
    from ratchet.online.queue import TurnQueue
    from ratchet.online.records import Judgement, Turn
    from ratchet.online.status import QUEUE_NAME

    queue = TurnQueue(tmp_path / QUEUE_NAME)
    for i, judge in enumerate(["stacked:qwen2.5-coder-1.5b", "stacked:qwen2.5-coder-1.5b", "classifier"]):
        queue.add_turn(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": "q"}], "a", [1], [2], [-0.5], 0))
        queue.set_next_state(f"t{i}", "thanks")
        queue.add_judgement(Judgement(f"t{i}", 1, [1], None, "thanks", judge))
    queue.close()
    JudgeChoice("auto", "stacked", "qwen2.5-coder-1.5b", "its label model qwen2.5-coder-1.5b is pulled and verified") \
        .save(tmp_path)
    ran = bench.judge_ran(tmp_path)
    assert ran["choice"]["kind"] == "stacked" and ran["choice"]["configured"] == "auto"
    assert ran["judgements_by"] == {"stacked:qwen2.5-coder-1.5b": 2, "classifier": 1}
    text = bench.markdown({"runs": {"m/length/combine/s0": _result(0, 0.5, 0.5, judge=ran)}})
    assert "judged by stacked:qwen2.5-coder-1.5b (2 turns), classifier (1 turn), chosen by judge.kind=auto" in text
    assert "judged by" not in bench.markdown({"runs": {"m/length/combine/s0": _result(0, 0.5, 0.5)}})
