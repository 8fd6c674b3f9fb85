"""The personalization bench's ``--learn context`` mode without a model: what a pace point
snapshots, how long the user waits for the learner, and that a snapshot is measured with the
prompt the server would serve (``served_messages``, same config, same encoder)."""

from __future__ import annotations

import json

import pytest

from bench import _personalization_context as ctx
from bench._personalization_report import markdown
from ratchet.context.online import LESSONS_HEADER, ServeContext, served_messages, steps_path
from ratchet.context.playbook import Item, Playbook
from ratchet.online.config import OnlineConfig
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn
from ratchet.online.simulated_user import GUARD_TASKS, pools, preference
from ratchet.online.status import QUEUE_NAME
from tests.context.fakes import BagOfWords

LESSON = "End every reply with the sign-off Happy coding!"


class SignsOffWhenTold:
    """Greedy fake: signs off only when the served system message carries the lesson; answers the
    guard tasks when the prompt is the base's, so the guard shows a cost of the lesson too."""

    def __init__(self) -> None:
        self.seen: list[list[dict]] = []
        self.closed = False

    def chat(self, messages, max_tokens):
        self.seen.append(messages)
        told = messages[0]["role"] == "system" and LESSON in messages[0]["content"]
        guard = dict(GUARD_TASKS).get(messages[-1]["content"])
        if guard is not None:
            return "I am not sure.\n\nHappy coding!" if told else f"It is {guard}."
        return "Here it is.\n\nHappy coding!" if told else "Here it is."

    def close(self):
        self.closed = True


def _online_dir(tmp_path, **context):
    """A serve run's directory as the server leaves it: its config and its playbook."""
    online = tmp_path / "online"
    online.mkdir()
    config = OnlineConfig.model_validate({"learn": "off", "context": {"online": True, **context}})
    (online / "config.json").write_text(config.model_dump_json())
    return online, online / "context" / "playbook.md"


def _learned(playbook, text=LESSON):
    book = Playbook.load(playbook)
    book.put(Item(id=book.new_id(), section="serve", text=text))
    book.version += 1
    book.save(playbook)


def test_a_snapshot_is_measured_with_the_prompt_the_server_serves(tmp_path) -> None:
    pref = preference("signoff")
    config = ServeContext(min_relevance=None)
    playbook = tmp_path / "p.md"
    _learned(playbook)
    gen, encoder = SignsOffWhenTold(), BagOfWords()
    out = ctx.measure_snapshot(gen.chat, pref, playbook, config, encoder, 160)
    heldout = pools("signoff").heldout_prompts
    assert out["preference"] == 1.0 and out["guard"] == 0.0  # the lesson met the preference, and cost the guard
    assert len(gen.seen) == len(heldout) + len(GUARD_TASKS) and encoder.calls > 0  # chosen with the encoder
    for q, messages in zip(heldout, gen.seen):
        assert messages == served_messages([{"role": "user", "content": q}], playbook, config, encoder)
        assert LESSONS_HEADER.strip() in messages[0]["content"] and messages[-1] == {"role": "user", "content": q}
    # an item under the least relevance stays out, exactly as it would when served: the base's prompt
    gen = SignsOffWhenTold()
    far = ctx.measure_snapshot(gen.chat, pref, playbook, ServeContext(min_relevance=0.99), encoder, 160)
    assert far["preference"] == 0.0 and far["guard"] == 1.0 and all(len(m) == 1 for m in gen.seen)


def test_pace_points_snapshot_the_playbook_with_its_size_and_the_learning_cost(tmp_path) -> None:
    online, playbook = _online_dir(tmp_path, relevance="record")
    bench_dir, state = tmp_path / "bench", {}
    ctx.note(state, online, bench_dir, 4, 10.0)  # nothing learned yet: an empty snapshot
    _learned(playbook)
    steps_path(playbook).write_text("".join(json.dumps(x) + "\n" for x in [
        {"turn": "t0", "calls": 2, "model_s": 1.5, "wall_s": 1.75},
        {"turn": "t1", "error": True, "calls": 1, "model_s": 0.5, "wall_s": 0.5}]))
    ctx.note(state, online, bench_dir, 8, 20.0)
    ctx.note(state, online, bench_dir, 8, 25.0)  # the end of a run on a pace point: not twice
    first, second = state["snapshots"]
    assert (first["items"], first["tokens"], first["calls"], first["conversations"]) == (0, 0, 0, 4)
    assert second["items"] == 1 and second["tokens"] > 0 and second["steps"] == 2 and second["failed_steps"] == 1
    assert (second["calls"], second["model_s"], second["learn_wall_s"]) == (3, 2.0, 2.25)
    assert LESSON in (bench_dir / ctx.PLAYBOOKS / second["file"]).read_text()
    _learned(playbook, "Another lesson.")  # the copy is the playbook as it was at the pace point
    assert "Another lesson." not in (bench_dir / ctx.PLAYBOOKS / second["file"]).read_text()

    state["base"] = {"preference": 0.25, "guard": 0.75, "heldout_replies": {}, "guard_replies": {}}
    gen, saves = SignsOffWhenTold(), []
    rows = ctx.rows(state, bench_dir, online, preference("signoff"), lambda: gen, 160, lambda: saves.append(1))
    assert [r["version"] for r in rows] == [0, 1, 2] and [r["preference"] for r in rows] == [0.25, 0.25, 1.0]
    assert rows[1]["guard"] == 0.75 and rows[2]["guard"] == 0.0 and rows[2]["playbook"] == "008.md"
    assert gen.closed and len(saves) == 2 and set(state["evaluated"]) == {"p1", "p2"}
    measured = len(gen.seen)
    again = ctx.rows(state, bench_dir, online, preference("signoff"), pytest.fail, 160, lambda: None)
    assert again == rows and len(gen.seen) == measured  # a resumed run measures nothing twice

    result = {"model": "m", "preference": "signoff", "signal": "context", "seed": 0, "label": None,
              "base_preference": 0.25, "best_served_preference": 1.0, "final_served_preference": 1.0,
              "guard_within_band": False, "preference_noise_band": 0.25, "base_guard": 0.75, "guard_noise_band": 0.25,
              "final_served_guard": 0.0, "conversations": 8, "pace": 4, "wall_s": 25.0, "versions": rows,
              "first_improvement": {"version": 2, "conversations": 8, "elapsed_s": 20.0},
              "serve_args": ["--learn", "off", "--set", "context.online=true", "--set", "context.budget_tokens=200"]}
    text = markdown({"runs": {"m/signoff/context/s0": result}})
    assert "`ratchet serve --learn off --set context.online=true`, overrides: context.budget_tokens=200" in text
    assert "| version (playbook) | conversations |" in text
    assert f"| 2 | 8 | 20.0 | 1 | {second['tokens']} | 3 | 2.0 | 2.2 | 1.00 | 0.00 |" in text


def test_the_user_waits_for_the_judge_and_for_each_decided_judgement_to_be_learned(tmp_path) -> None:
    online, playbook = _online_dir(tmp_path, relevance="record")
    queue = TurnQueue(online / QUEUE_NAME)
    for i in range(4):
        queue.add_turn(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": "q"}], "a", [1], [2], [-0.5], 0))
    for i in range(3):
        queue.set_next_state(f"t{i}", "thanks")
    assert ctx.unlearned(online / QUEUE_NAME, playbook) == 3  # t3 has no next state: nothing to judge yet
    queue.add_judgement(Judgement("t0", 1, [1], None, "thanks", "classifier"))
    queue.add_judgement(Judgement("t1", 0, [], None, "thanks", "classifier"))  # undecided: teaches nothing
    queue.add_judgement(Judgement("t2", -1, [-1], None, "thanks", "classifier", source="feedback"))  # not the loop's
    assert ctx.unlearned(online / QUEUE_NAME, playbook) == 1  # t0 is judged, not yet learned
    steps_path(playbook).parent.mkdir(parents=True)
    steps_path(playbook).write_text(json.dumps({"turn": "t0", "error": True}) + "\n")  # a failed step counts
    assert ctx.unlearned(online / QUEUE_NAME, playbook) == 0
    ctx.wait_learned(online, timeout_s=5, poll_s=0.01)  # returns at once


def test_a_context_run_serves_with_training_off_snapshots_each_pace_point_and_keys_its_result(tmp_path,
                                                                                               monkeypatch) -> None:
    """The bench's run in ``--learn context`` mode, its server and model replaced: the serve flags,
    a snapshot per pace point with what had been learned by then, one row per snapshot."""
    import argparse

    from bench import online_personalization as bench
    from ratchet.online.simulated_user import Conversation

    store, served, learned = tmp_path / "runs", [], []
    online = store / "m-signoff-context-s0" / "online"

    class FakeServer:
        url = "http://fake/v1"

        def __init__(self, args, port, log) -> None:
            served.append(args)

        def wait_ready(self):  # the server writes its config at start (its learner, later, the playbook)
            online.mkdir(parents=True, exist_ok=True)
            config = OnlineConfig.model_validate({"learn": "off", "context": {"online": True, "relevance": "record"}})
            (online / "config.json").write_text(config.model_dump_json())

        def stop(self):
            pass

    class FakeUser:
        def __init__(self, pref, **_) -> None:
            pass

        def converse(self, client, model, prompt, **_):
            learned.append(prompt)
            if len(learned) == 3:  # the third conversation teaches the lesson
                _learned(online / "context" / "playbook.md")
            return Conversation(prompt, ["Here it is."], [False], [0], ["no"])

    measured = []
    monkeypatch.setattr(bench, "Server", FakeServer)
    class FakeGenerator(SignsOffWhenTold):
        def __init__(self, gguf, lora, threads) -> None:
            super().__init__()
            measured.append(self)

        def reply(self, prompt, max_tokens):
            return self.chat([{"role": "user", "content": prompt}], max_tokens)

    monkeypatch.setattr(bench, "Generator", FakeGenerator)
    monkeypatch.setattr(bench, "evaluate_version", lambda *a, **k: {
        "preference": 0.0, "guard": 1.0, "heldout_replies": {}, "guard_replies": {}})
    monkeypatch.setattr(bench, "_merge", lambda result: None)
    monkeypatch.setattr("ratchet.models.registry.model_path", lambda name: tmp_path / "m.gguf")
    monkeypatch.setattr("openai.OpenAI", lambda **_: None)
    monkeypatch.setattr(bench, "SimulatedUser", FakeUser)
    args = argparse.Namespace(model="m", store=str(store), run=None, max_tokens=None, threads=1, port=1, gate="bench",
                              set=[], conversations=4, pace=2, pace_timeout_s=0.0, drain_s=0.0, retries=0,
                              temperature=0.8, label=None)
    result = bench.run(args, "signoff", "context", 0)
    assert served[0][2:6] == ["--learn", "off", "--set", "context.online=true"]
    assert not any("trainer." in a for a in served[0])  # no trainer, so no gate cases
    assert [(v["version"], v["conversations"], v["items"]) for v in result["versions"]] == [(0, 0, 0), (1, 2, 0), (2, 4, 1)]
    assert [v["preference"] for v in result["versions"]] == [0.0, 0.0, 1.0] and result["signal"] == "context"
    assert result["first_improvement"]["conversations"] == 4 and result["gate"] is None
    assert bench.result_key(result) == "m/signoff/context/s0"
    # the base's generator, then one for the only snapshot with items, closed after
    assert len(measured) == 2 and measured[-1].closed and LESSON in measured[-1].seen[0][0]["content"]
