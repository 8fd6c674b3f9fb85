"""Online learning while serving (``context.online``): judged turns teach the playbook, served
prompts get it. Scripted policy, scripted reflector/curator, no model."""

import json
import threading
import time

import httpx
import pytest

from ratchet.context.online import LESSONS_HEADER, ServeContext, TurnLearner, served_messages
from ratchet.context.playbook import Item, Playbook
from ratchet.models.scripted import ScriptedModel
from ratchet.online.config import OnlineConfig
from ratchet.online.loops import run_judge_loop
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn

from .fakes import BagOfWords

LESSON = "Answer with the code only."


def roles():
    def respond(messages):
        if "Change it only by operations" in messages[-1]["content"]:
            return json.dumps({"operations": [{"op": "ADD", "section": "serve", "text": LESSON}]})
        return json.dumps({"tags": [], "lesson": LESSON})

    return ScriptedModel(respond)


def turn(i: int) -> Turn:
    return Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": f"sort list {i}"}], f"a{i}",
                [1, 2], [3, 4], [-0.5, -0.7], 0)


def test_the_serve_config_takes_context_online_and_is_off_by_default():
    assert OnlineConfig().context.online is False
    config = OnlineConfig.model_validate({"context": {"online": True, "budget_tokens": 50}})
    assert config.context.online and config.context.budget_tokens == 50
    with pytest.raises(ValueError, match="budget_tokens"):
        OnlineConfig.model_validate({"context": {"budget_tokens": -1}})


def test_served_messages_add_the_lessons_within_the_budget(tmp_path):
    path = tmp_path / "playbook.md"
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "sort a list"}]
    assert served_messages(messages, path, ServeContext()) == messages  # no playbook yet
    book = Playbook()
    for n in range(30):
        book.put(Item(id=book.new_id(), section="s", text=f"lesson {n} " + "word " * 10, helpful=int(n == 29)))
    book.save(path)
    out = served_messages(messages, path, ServeContext(budget_tokens=40))
    assert out[1:] == messages[1:] and out[0]["content"].startswith("Be brief." + LESSONS_HEADER)
    shown = out[0]["content"].split(LESSONS_HEADER)[1].splitlines()
    assert shown[0].startswith("[ctx-00030]") and 0 < len(shown) < 30
    no_system = served_messages(messages[1:], path, ServeContext(budget_tokens=40))
    assert no_system[0]["role"] == "system" and no_system[1:] == messages[1:]
    path.write_text("# Playbook\n- [bad line\n")
    assert served_messages(messages, path, ServeContext()) == messages  # a broken file is served without


def test_a_decided_judgement_teaches_the_playbook_and_an_undecided_one_does_not(tmp_path):
    path = tmp_path / "playbook.md"
    model = roles()
    learner = TurnLearner(path, model, ServeContext(use_grammar=False, lessons="reflector"))
    assert learner(turn(0), Judgement("t0", 0, [0], None, "hm", "rule")) is None and model.calls == []
    entry = learner(turn(1), Judgement("t1", -1, [-1], "say less", "no, just the code", "rule"))
    assert entry["score"] == 0.0 and [i.text for i in Playbook.load(path).items.values()] == [LESSON]
    prompt = model.calls[0]["messages"][-1]["content"]
    assert "sort list 1" in prompt and "no, just the code" in prompt and "say less" in prompt


def test_by_default_a_correction_teaches_what_the_user_asked_in_their_words_and_nothing_else_does(tmp_path):
    """``lessons: stated``: a hinted correction's hint is filed under ``user`` as it stands (no
    model call, the name kept); a repeat folds into its item, not a second one (its helpful tag
    refused: the item was shown and the reply still failed); praise, an undecided turn and a
    correction the judge found no hint in, and a failed tool's output, teach nothing."""
    path = tmp_path / "playbook.md"
    model = roles()
    learner = TurnLearner(path, model, ServeContext(use_grammar=False))
    assert learner(turn(0), Judgement("t0", 1, [1], None, "perfect, thanks", "rule")) is None
    assert learner(turn(1), Judgement("t1", -1, [-1], None, "meh", "rule")) is None
    tool = Judgement("t1", -1, [-1], "The tool's output was: exit 1", "tool: exit 1", "rule")
    assert learner(turn(1), tool) is None  # a failed tool is not what the user wants of every answer
    entry = learner(turn(2), Judgement("t2", -1, [-1], "Call me Noor, please.", "hm. Call me Noor, please.", "rule"))
    assert entry["lesson"] == "Call me Noor, please." and entry["version"] == 1
    again = learner(turn(3), Judgement("t3", -1, [-1], "  Call me Noor, please. ", "again: call me Noor, please.", "rule"))
    [item] = Playbook.load(path).items.values()
    assert (item.section, item.text, item.helpful, item.harmful) == ("user", "Call me Noor, please.", 0, 0)
    assert len(again["duplicates"]) == 1 and again["tags_dropped"][0]["id"] == item.id
    assert model.calls == []  # neither reflector nor curator was asked
    from ratchet.context.online import steps_path

    lines = [json.loads(x) for x in steps_path(path).read_text().splitlines()]
    # every decided turn is a line (a reader waiting for the learner sees each taken), the undecided none
    assert [(x["reward"], x.get("taught", True)) for x in lines] == [(1, False), (-1, False), (-1, False),
                                                                      (-1, True), (-1, True)]
    served = served_messages([{"role": "user", "content": "what is a byte?"}], path, ServeContext())
    assert "(user) Call me Noor, please." in served[0]["content"]


def test_the_judge_loop_hands_each_judged_turn_to_the_learner(tmp_path):
    queue = TurnQueue(tmp_path / "q.db")
    for i, next_state in enumerate(["thanks, perfect", "no, I meant the other one"]):
        queue.add_turn(turn(i))
        queue.set_next_state(f"t{i}", next_state)
    config = OnlineConfig(learn="binary", judge={"kind": "classifier"})  # not auto: never the 1.5B here
    config.judge.poll_s = 0.02
    learner = TurnLearner(tmp_path / "playbook.md", roles(), ServeContext(use_grammar=False, lessons="reflector"))
    seen = []

    def observer(t, j):
        seen.append((t.turn_id, j.reward))
        learner(t, j)

    stop = threading.Event()
    worker = threading.Thread(target=lambda: run_judge_loop(config, tmp_path / "q.db", stop, observer=observer))
    worker.start()
    deadline = time.time() + 10
    while len(seen) < 2 and time.time() < deadline:
        time.sleep(0.02)
    stop.set()
    worker.join(5)
    assert sorted(seen) == [("t0", 1), ("t1", -1)] and queue.stats()["judged"] == 2
    # no encoder in this learner: the repeated lesson is folded by its exact text, not added twice
    stats = learner.learner.stats
    assert stats.steps == 2 and stats.duplicates == 1 and len(Playbook.load(tmp_path / "playbook.md")) == 1


def test_the_server_shows_the_model_the_playbook_and_records_what_it_showed(tmp_path):
    pytest.importorskip("fastapi")
    from ratchet.online.policy import PolicyHost, ScriptedPolicy
    from ratchet.online.server import ServerThread, create_app, make_state

    path = tmp_path / "playbook.md"
    book = Playbook()
    book.put(Item(id=book.new_id(), section="serve", text=LESSON))
    book.save(path)
    shown = []
    policy = ScriptedPolicy(lambda messages: shown.append(messages) or "sorted(x)")
    queue = TurnQueue(tmp_path / "q.db")
    state = make_state(PolicyHost(lambda adapter: policy), queue,
                       context=lambda messages: served_messages(messages, path, ServeContext()))
    with ServerThread(create_app(state)) as server:
        reply = httpx.post(f"{server.url}/v1/chat/completions", timeout=30,
                           json={"model": "ratchet", "messages": [{"role": "user", "content": "sort x"}]})
    state.collector.close()
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "sorted(x)"
    assert shown[0][0]["role"] == "system" and f"[ctx-00001] (serve) {LESSON}" in shown[0][0]["content"]
    assert shown[0][1] == {"role": "user", "content": "sort x"}
    [(session, _)] = queue.sessions()
    [turn_id] = queue.session_turn_ids(session)
    queue.set_next_state(turn_id, "thanks")
    [(recorded, _)] = queue.turns_to_judge(5)
    assert LESSON in recorded.messages[0]["content"]  # the turn trained on is the prompt the model saw


def _two_items(path):
    """One lesson learned on a sorting request, one on a greeting (with the better record)."""
    book = Playbook()
    book.put(Item(id=book.new_id(), section="serve", text="Sort the list before returning it.",
                  origin="sort the list of numbers"))
    book.put(Item(id=book.new_id(), section="serve", text="Greet the user by name.", helpful=5,
                  origin="write a greeting email"))
    book.save(path)


def test_a_served_users_lessons_enter_every_request_and_a_least_relevance_scopes_them(tmp_path):
    path = tmp_path / "playbook.md"
    _two_items(path)
    messages = [{"role": "user", "content": "sort the list of numbers 3 1 2"}]
    # the default: what one user wants holds whatever they ask; relevance ranks, nothing is kept out
    served = served_messages(messages, path, ServeContext(), BagOfWords())[0]["content"]
    assert served.index("Sort the list") < served.index("Greet")
    # a least relevance scopes items to related requests, as the task learners do
    scoped = served_messages(messages, path, ServeContext(min_relevance=0.4), BagOfWords())[0]["content"]
    assert "Sort the list" in scoped and "Greet" not in scoped  # budget left, yet under min_relevance
    # without an encoder (relevance: record) the greeting comes first, for its record
    unscoped = served_messages(messages, path, ServeContext(relevance="record"))[0]["content"]
    assert unscoped.index("Greet") < unscoped.index("Sort the list")


def test_served_turns_are_learned_with_the_conversation_prompts(tmp_path):
    """Serving asks for an instruction about the user that keeps their specifics; the task
    learners' prompts (a general rule for tasks of the kind) stay theirs, and a prompts folder
    still overrides either set file by file."""
    from ratchet.context.config import ContextConfig
    from ratchet.context.roles import Prompts

    assert ServeContext().prompt_set == "conversation" and ContextConfig().prompt_set == "tasks"
    model = roles()
    TurnLearner(tmp_path / "playbook.md", model, ServeContext(use_grammar=False, lessons="reflector"))(
        turn(1), Judgement("t1", -1, [-1], None, "call me Noor please", "rule"))
    reflector_prompt = model.calls[0]["messages"][-1]["content"]
    assert "kept exactly" in reflector_prompt and "call me Noor please" in reflector_prompt
    assert "one user wants" in model.calls[1]["messages"][-1]["content"]  # the curator's
    tasks, conversation = Prompts.load(), Prompts.load(None, "conversation")
    assert "general rule for tasks of this kind" in tasks.reflector and tasks.reflector != conversation.reflector
    assert conversation.generator == tasks.generator  # a role the set lacks comes from the task set
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "reflector.md").write_text("mine {task}")
    own = Prompts.load(tmp_path / "own", "conversation")
    assert own.reflector == "mine {task}" and own.curator == conversation.curator


def test_the_serving_encoder_caches_the_latest_texts_only():
    """A serving process embeds every request: its cache keeps the latest ``cache_size`` texts."""
    import numpy as np

    from ratchet.context.similarity import SentenceEmbedder

    class Counting:
        def __init__(self):
            self.seen = []

        def encode(self, texts):
            self.seen += texts
            return np.eye(384, dtype=np.float32)[: len(texts)]

    embedder = SentenceEmbedder(cache_size=2)
    embedder._encoder = Counting()
    embedder.embed(["item", "request 1"])
    embedder.embed(["item", "request 2"])  # "item" is cached and now the latest but one
    embedder.embed(["item", "request 3"])
    assert embedder._encoder.seen == ["item", "request 1", "request 2", "request 3"]
    assert list(embedder._cache) == ["item", "request 3"]


class FakeEncoder(BagOfWords):
    """Stands in for the pulled all-MiniLM-L6-v2 where ``serve_embedder`` builds it."""

    built: list[str] = []

    def __init__(self, name):
        super().__init__()
        FakeEncoder.built.append(name)

    def load(self):
        return self


def test_serve_wires_both_halves_to_the_playbook_beside_its_queue_only_when_asked(tmp_path, monkeypatch):
    from ratchet.online.launch import _served_context
    from ratchet.online.loops import make_turn_learner

    monkeypatch.setattr("ratchet.context.online.SentenceEmbedder", FakeEncoder)
    FakeEncoder.built = []
    assert _served_context(OnlineConfig(), tmp_path) is None and FakeEncoder.built == []
    config = OnlineConfig.model_validate({"context": {"online": True, "model": "scripted:", "use_grammar": False}})
    learner = make_turn_learner(config, tmp_path / "queue.db")
    assert learner.learner.path == tmp_path / "context" / "playbook.md"
    assert isinstance(learner.learner.embedder, FakeEncoder)  # the learner counts tags for what the server shows
    _two_items(learner.learner.path)
    served = _served_context(config, tmp_path)([{"role": "user", "content": "sort the list of numbers"}])
    text = served[0]["content"]
    assert text.index("Sort the list") < text.index("Greet")  # ranked by the encoder's relevance
    assert FakeEncoder.built == ["all-minilm-l6-v2"] * 2  # one encoder in each process
    record = OnlineConfig.model_validate({"context": {"online": True, "model": "scripted:", "relevance": "record"}})
    assert make_turn_learner(record, tmp_path / "queue.db").learner.embedder is None
    served = _served_context(record, tmp_path)([{"role": "user", "content": "sort the list of numbers"}])
    text = served[0]["content"]
    assert text.index("Greet") < text.index("Sort the list") and len(FakeEncoder.built) == 2  # by record


def test_serving_with_training_off_still_judges_and_learns_the_playbook(tmp_path, monkeypatch):
    """``--learn off --set context.online=true``: the judge loop runs (no trainer), its learner is
    the one serve builds, and every step's cost lands beside the playbook."""
    from ratchet.context.online import steps_path
    from ratchet.online.loops import LocalLoops

    monkeypatch.setattr("ratchet.models.load_model", lambda spec, **_: roles())
    config = OnlineConfig.model_validate({"learn": "off", "judge": {"kind": "classifier", "poll_s": 0.02},
                                          "context": {"online": True, "model": "scripted:", "use_grammar": False,
                                                      "relevance": "record", "lessons": "reflector"}})
    assert set(LocalLoops(config, tmp_path / "queue.db", tmp_path / "v").specs) == {"judge"}
    queue = TurnQueue(tmp_path / "queue.db")
    for i, next_state in enumerate(["thanks, perfect", "no, I meant the other one", "ok"]):
        queue.add_turn(turn(i))
        queue.set_next_state(f"t{i}", next_state)
    stop = threading.Event()
    worker = threading.Thread(target=lambda: run_judge_loop(config, tmp_path / "queue.db", stop))
    worker.start()
    path = tmp_path / "context" / "playbook.md"
    deadline = time.time() + 10
    while time.time() < deadline and (not steps_path(path).is_file() or len(steps_path(path).read_text().splitlines()) < 2):
        time.sleep(0.02)
    stop.set()
    worker.join(5)
    lines = [json.loads(x) for x in steps_path(path).read_text().splitlines()]
    assert queue.stats()["judged"] >= 2 and [x["reward"] for x in lines] == [1, -1]
    assert [x["version"] for x in lines] == [1, 2] and lines[-1]["items"] == len(Playbook.load(path)) == 1
    # reflector, then curator, per step: each a counted model call with its time
    assert all(x["calls"] == 2 and x["model_s"] >= 0 and x["wall_s"] >= 0 for x in lines)


def test_the_judge_hints_corrections_when_a_served_playbook_learns_what_they_state():
    """``--learn off`` asks no hint for training, yet ``context.lessons: stated`` learns from hints:
    the judge of such a server hints corrections; with ``lessons: reflector`` it need not."""
    from ratchet.online.judge import build_judge
    from ratchet.online.loops import judge_hints

    def config(**context):
        return OnlineConfig.model_validate({"learn": "off", "context": context})

    assert judge_hints(config(online=True)) and not judge_hints(config(online=True, lessons="reflector"))
    assert not judge_hints(config()) and judge_hints(OnlineConfig(learn="opd"))
    judge = build_judge("classifier", learn="off", hints=True)
    verdict = judge.judge(turn(0), "No. Please call me Noor from now on.")
    assert verdict.reward == -1 and "Noor" in (verdict.hint or "")
    assert build_judge("classifier", learn="off").judge(turn(0), "No. Please call me Noor from now on.").hint is None


def test_lessons_can_follow_the_last_user_message_instead_of_ending_the_system_message(tmp_path):
    path = tmp_path / "playbook.md"
    book = Playbook()
    book.put(Item(id=book.new_id(), section="user", text="Call me Noor."))
    book.save(path)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "what is a byte?"}]
    out = served_messages(messages, path, ServeContext(placement="user"))
    assert out[0] == messages[0] and out[1]["content"].startswith("what is a byte?\n\n(Lessons learned")
    assert out[1]["content"].endswith("(user) Call me Noor.)") and messages[1]["content"] == "what is a byte?"
    parts = [{"role": "user", "content": [{"type": "text", "text": "what is a byte?"}]}]
    assert served_messages(parts, path, ServeContext(placement="user"))[0]["content"][-1]["text"].startswith("\n\n(")
    # after a tool's result the person's words are not last: the system message takes them
    tool_last = [*messages, {"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "ok"}]
    placed = served_messages(tool_last, path, ServeContext(placement="user"))
    assert "Call me Noor." in placed[0]["content"] and placed[1:] == tool_last[1:]
