import json

import pytest

from ratchet.context.budget import prune, select
from ratchet.context.config import ContextConfig
from ratchet.context.history import PlaybookHistory
from ratchet.context.learner import ContextLearner, Trajectory
from ratchet.context.operations import Add, Delete, Tag, operations_grammar
from ratchet.context.playbook import Item, Playbook, PlaybookError
from ratchet.context.roles import Curator, Prompts, parse_reflection
from ratchet.context.similarity import Deduplicator
from ratchet.context.sources import trajectories
from ratchet.contracts import RatchetError, TaskResult
from ratchet.models.scripted import ScriptedModel
from ratchet.store import RunStore

from .fakes import BagOfWords


def _ops(*ops) -> str:
    return json.dumps({"operations": list(ops)})


def _roles(reflections, curations):
    """A scripted model that plays reflector and curator, answering each from its own list."""
    queues = {"reflector": list(reflections), "curator": list(curations)}

    def respond(messages):
        role = "curator" if "Change it only by operations" in messages[-1]["content"] else "reflector"
        return queues[role].pop(0)

    return ScriptedModel(respond)


# -- curator: malformed output goes back and is counted --------------------------------------


def test_malformed_curator_output_is_returned_with_its_problems_and_counted():
    model = ScriptedModel([
        _ops({"op": "ADD", "section": "s", "text": "good"}, {"op": "ADD", "section": "s"},
             {"op": "DELETE", "id": "ctx-00042"}),
        _ops({"op": "ADD", "section": "s", "text": "fixed"}),
    ])
    curator = Curator(model, Prompts.load(), max_retries=1)
    result = curator.curate(Playbook(), [], "a lesson", "failure")
    assert result.attempts == 2 and len(result.problems) == 2
    assert [op.text for op in result.ops] == ["good", "fixed"]
    second_prompt = model.calls[1]["messages"][-1]["content"]
    assert "'text' must be a non-empty string" in second_prompt and "ctx-00042" in second_prompt
    # The grammar admits only what can apply: an empty playbook has no id to name, so only ADD.
    assert model.calls[0]["params"]["grammar"] == operations_grammar([])
    assert "op ::= add\n" in operations_grammar([]) and "op ::= add | update | delete | tag\n" in operations_grammar(["ctx-00001"])


def test_curator_gives_up_after_its_retries_and_keeps_the_count():
    model = ScriptedModel(["nonsense", "still nonsense"])
    result = Curator(model, Prompts.load(), max_retries=1, use_grammar=False).curate(Playbook(), [], "l", "failure")
    assert result.ops == [] and len(result.problems) == 2 and result.attempts == 2
    assert "grammar" not in model.calls[0]["params"] or model.calls[0]["params"]["grammar"] is None


def test_a_lesson_copied_from_the_prompt_is_refused_and_counted():
    from ratchet.context.roles import Reflector

    copied = '{"tags": [], "lesson": "Write the lesson in your own words"}'
    model = ScriptedModel([copied])
    out = Reflector(model, Prompts.load()).reflect("task", "trace", "failure", [])
    assert out.lesson == "" and "repeats the prompt" in out.problems[0].message
    grammar = model.calls[0]["params"]["grammar"]
    assert '"\\"tags\\"" ws ":" ws "[" ws "]"' in grammar  # shown no items, it can tag none


def test_reflection_tags_only_items_it_was_shown():
    out = parse_reflection('{"tags": [{"id": "ctx-00001", "tag": "helpful"}, {"id": "ctx-00009", "tag": "helpful"},'
                           ' {"id": "ctx-00001", "tag": "meh"}], "lesson": "Check bounds."}', {"ctx-00001"})
    assert out.tags == [Tag("ctx-00001", "helpful")] and out.lesson == "Check bounds."
    assert [p.index for p in out.problems] == [1, 2]
    assert len(parse_reflection("no json", set()).problems) == 1


# -- de-duplication, budget, pruning ---------------------------------------------------------


def _book(*texts, **counts) -> Playbook:
    book = Playbook()
    for text in texts:
        book.put(Item(book.new_id(), "s", text))
    return book


def test_dedup_turns_a_repeated_add_into_a_helpful_tag():
    book = _book("always guess the middle of the remaining range", "never repeat a guess")
    dedup = Deduplicator(BagOfWords(), 0.85)
    ops, dups = dedup.rewrite(book, [Add("s", "Always guess the middle of the remaining range!"),
                                     Add("s", "read the feedback after each guess carefully"),
                                     Add("s", "read the feedback after each guess, carefully")])
    assert ops == [Tag("ctx-00001", "helpful"), Add("s", "read the feedback after each guess carefully")]
    assert [d.item for d in dups] == ["ctx-00001", "batch-add:1"]
    assert dups[0].similarity >= 0.85


def test_dedup_off_at_threshold_one_keeps_paraphrases():
    book = _book("always guess the middle of the remaining range")
    ops, dups = Deduplicator(BagOfWords(), 1.0).rewrite(book, [Add("s", "guess the middle of the range always")])
    assert dups == [] and isinstance(ops[0], Add)


def test_budget_picks_relevant_items_within_the_token_limit():
    book = _book("in guess the number pick the middle", "in sudoku check each row", "in chess protect the king",
                 "in guess the number never repeat")
    sel = select(book, "guess the number between 1 and 100", 30, embedder=BagOfWords())
    assert sel.tokens <= 30
    assert {i.id for i in sel.items} == {"ctx-00001", "ctx-00004"}
    assert sel.dropped == 2
    assert select(book, "x", 0).items == []


def test_budget_prefers_items_with_a_good_record_when_relevance_ties():
    book = _book("alpha", "beta")
    book.put(Item("ctx-00002", "s", "beta", helpful=5))
    sel = select(book, "", 12)
    assert [i.id for i in sel.items][0] == "ctx-00002"


def test_prune_deletes_items_that_hurt_and_caps_the_size():
    book = Playbook()
    for text, h, x in [("a", 0, 2), ("b", 3, 0), ("c", 1, 1), ("d", 0, 1), ("e", 2, 0)]:
        book.put(Item(book.new_id(), "s", text, h, x))
    assert prune(book, margin=2) == [Delete("ctx-00001")]
    assert prune(book, margin=2, max_items=3) == [Delete("ctx-00001"), Delete("ctx-00004")]
    assert prune(book, margin=1, max_items=None) == [Delete("ctx-00001"), Delete("ctx-00004")]


# -- the learner: online, offline, bounded, history ------------------------------------------


def test_observe_tags_adds_saves_and_records_each_version(tmp_path):
    run = RunStore(tmp_path / "runs").create_run("context", {})
    model = _roles(
        ['{"tags": [], "lesson": "Guess the middle of the range."}',
         '{"tags": [{"id": "ctx-00001", "tag": "helpful"}], "lesson": ""}'],
        [_ops({"op": "ADD", "section": "strategies", "text": "Guess the middle of the range."})],
    )
    path = tmp_path / "ws" / "playbook.md"
    path.parent.mkdir()
    learner = ContextLearner(path, reflector_model=model, run=run, embedder=BagOfWords())
    first = learner.observe("guess a number", "guessed 50, 50, 50", 0.0, trajectory_id="ep-1")
    assert first["applied"][0]["id"] == "ctx-00001"
    learner.observe("guess a number", "guessed 50 then 25", 1.0, trajectory_id="ep-2")
    item = Playbook.load(path).get("ctx-00001")
    assert (item.helpful, item.sources, item.ops) == (1, ("ep-1", "ep-2"), ("ADD@1", "TAG@2"))
    history = PlaybookHistory(run)
    assert history.versions() == [1, 2]
    assert history.load(1).get("ctx-00001").helpful == 0
    assert "-- [ctx-00001] (+0/-0)" in history.diff(1, 2) and "+- [ctx-00001] (+1/-0)" in history.diff(1, 2)
    assert [e["trajectory"] for e in history.entries()] == ["ep-1", "ep-2"]
    with pytest.raises(PlaybookError, match="no version 7"):
        history.load(7)


def test_a_long_run_of_near_duplicate_adds_stays_bounded(tmp_path):
    # The curator says a variant of the same few lessons every time (what a small model does).
    lessons = ["guess the middle of the range", "do not repeat a guess", "read the higher or lower hint"]
    n = 60
    reflections = [json.dumps({"tags": [], "lesson": lessons[k % 3]}) for k in range(n)]
    curations = [_ops({"op": "ADD", "section": "s", "text": f"{lessons[k % 3]} {'!' * (k % 4)}"},
                      {"op": "ADD", "section": "s", "text": f"lesson number {k}"}) for k in range(n)]
    cfg = ContextConfig(max_items=20)
    learner = ContextLearner(tmp_path / "pb.md", reflector_model=_roles(reflections, curations), config=cfg,
                             embedder=BagOfWords())
    # Passed attempts: the repeats' helpful tags are evidence (the default tag strategy drops a
    # helpful tag on a failed one).
    stats = learner.learn(Trajectory(f"t{k}", "guess the number", "trace", 1.0) for k in range(n))
    assert stats.steps == n and max(stats.sizes) <= 20
    assert stats.duplicates >= n - 3  # every repeat of a lesson folded into its first item
    texts = [i.text for i in learner.playbook.items.values()]
    assert sum(t.startswith("guess the middle") for t in texts) == 1
    assert learner.playbook.get("ctx-00001").helpful >= 15  # the folded repeats count for it
    # The same run without de-duplication or a cap (ACE's add-only) grows with every step.
    add_only = ContextLearner(tmp_path / "ace.md", reflector_model=_roles(reflections, curations),
                              config=ContextConfig(dedup=False, max_items=None), embedder=BagOfWords())
    assert add_only.learn(Trajectory(f"t{k}", "x", "y", 0.0) for k in range(n)).sizes[-1] == 2 * n


def test_items_that_keep_hurting_are_pruned(tmp_path):
    reflections = ['{"tags": [], "lesson": "always answer 42"}'] + \
                  ['{"tags": [{"id": "ctx-00001", "tag": "harmful"}], "lesson": ""}'] * 2
    learner = ContextLearner(tmp_path / "pb.md", config=ContextConfig(prune_margin=2),
                             reflector_model=_roles(reflections, [_ops({"op": "ADD", "section": "s",
                                                                        "text": "always answer 42"})]))
    sizes = [learner.observe("task", "trace", 0.0)["items"] for _ in range(3)]
    assert sizes == [1, 1, 0] and learner.stats.pruned == 1


def test_offline_learning_reads_engine_results_and_resumes(tmp_path):
    store = RunStore(tmp_path / "runs")
    source = store.create_run("evolve", {})
    results = [TaskResult("HumanEval/1", 0, 0.0, trace="AssertionError in test"), TaskResult("HumanEval/2", 0, 1.0)]
    source.write_json("evolve/results/abc/heldin.json", [r.__dict__ | {"failures": []} for r in results])
    found = trajectories(source)
    assert [t.id for t in found] == ["abc/heldin/HumanEval/1@0", "abc/heldin/HumanEval/2@0"]
    assert found[0].score == 0.0 and "AssertionError" in found[0].trace

    learn_run = store.create_run("context", {})
    model = _roles(['{"tags": [], "lesson": "Return only the function."}'],
                   [_ops({"op": "ADD", "section": "code", "text": "Return only the function."})])
    learner = ContextLearner(tmp_path / "pb.md", reflector_model=model, run=learn_run)
    learner.learn(found[:1])  # a run killed after its first trajectory ...
    resumed = ContextLearner(tmp_path / "pb.md", run=learn_run,
                             reflector_model=_roles(['{"tags": [{"id": "ctx-00001", "tag": "helpful"}], "lesson": ""}'], []))
    stats = resumed.learn(found)  # ... resumes at the second
    assert stats.steps == 1
    # the stored attempt was made without the playbook: the reflector's tag of the item is dropped
    assert resumed.playbook.get("ctx-00001").helpful == 0
    assert PlaybookHistory(learn_run).entries()[-1]["tags_dropped"] == [
        {"id": "ctx-00001", "tag": "helpful", "why": "the item was not in the attempt's prompt"}]


def test_a_run_without_trajectories_is_a_clear_error(tmp_path):
    run = RunStore(tmp_path / "runs").create_run("evolve", {})
    with pytest.raises(RatchetError, match="keeps no trajectories"):
        trajectories(run)


def test_prompt_files_override_the_defaults_one_by_one(tmp_path):
    (tmp_path / "curator.md").write_text("CUSTOM {lesson}")
    prompts = Prompts.load(tmp_path)
    assert prompts.curator == "CUSTOM {lesson}" and "playbook" in prompts.generator
    with pytest.raises(PlaybookError, match="does not exist"):
        Prompts.load(tmp_path / "nope")


def test_offline_learning_reads_rollout_episodes(tmp_path):
    from ratchet.contracts import EpisodeSummary, StepRecord

    run = RunStore(tmp_path / "runs").create_run("play", {})
    run.write_step(StepRecord("ep-1", 0, 0, "Guess a number between 1 and 100.", "[50]", True, None, None, 0.1))
    run.write_step(StepRecord("ep-1", 1, 0, "Too high.", "[50]", True, None, None, 0.1))
    run.add_episode(EpisodeSummary("ep-1", "GuessTheNumber-v0", 3, "llm", 2, 0, {0: 0.0}, False, 1.0))
    (found,) = trajectories(run)
    assert found.id == "ep-1" and found.score == 0.0
    assert found.task.startswith("GuessTheNumber-v0: Guess a number")
    assert "action: [50]\nobservation: Too high." in found.trace


def test_a_learner_killed_before_saving_its_file_resumes_from_the_history(tmp_path):
    run = RunStore(tmp_path / "runs").create_run("context", {})
    model = _roles(['{"tags": [], "lesson": "Return only the function."}'],
                   [_ops({"op": "ADD", "section": "code", "text": "Return only the function."})])
    path = tmp_path / "pb.md"
    ContextLearner(path, reflector_model=model, run=run).observe("t", "trace", 0.0, trajectory_id="a")
    Playbook().save(path)  # as if the process died after recording version 1, before the file
    resumed = ContextLearner(path, reflector_model=_roles([], []), run=run)
    assert resumed.playbook.version == 1 and resumed.playbook.get("ctx-00001").text == "Return only the function."
    assert resumed.learn([Trajectory("a", "t", "trace", 0.0)]).steps == 0


def test_an_attempt_made_without_the_playbook_tags_no_item_offline_and_an_online_one_does(tmp_path):
    """Offline learning reads attempts made before the playbook existed: a reflector's tag then says
    nothing about the item (one item reached +17 over 17 unrelated HumanEval problems none of which saw it)."""
    tag = '{"tags": [{"id": "ctx-00001", "tag": "helpful"}], "lesson": ""}'
    model = _roles([tag, tag, tag], [])
    path = tmp_path / "playbook.md"
    Playbook.parse("# Playbook\n\n## strategies\n- [ctx-00001] (+0/-0) Guess the middle of the range.\n").save(path)
    # No least relevance: "guess a number" shares one word with the lesson, and this is about what was shown.
    learner = ContextLearner(path, reflector_model=model, embedder=BagOfWords(), config=ContextConfig(min_relevance=None))
    learner.learn([Trajectory("old-1", "guess a number", "guessed 50 then 25", 1.0, shown=frozenset())])
    assert Playbook.load(path).get("ctx-00001").helpful == 0  # the attempt never saw it
    assert learner.learn_one(Trajectory("old-2", "guess a number", "…", 1.0, shown=frozenset({"ctx-00001"})))["tags_dropped"] == []
    assert Playbook.load(path).get("ctx-00001").helpful == 1  # this one did
    entry = learner.observe("guess a number", "guessed 50 then 25", 1.0, trajectory_id="now")  # made with the playbook
    assert entry["tags_dropped"] == [] and Playbook.load(path).get("ctx-00001").helpful == 2


def test_stored_run_trajectories_saw_no_playbook(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create_run("evolve", {})
    run.write_json("evolve/results/c1/heldin.json", [{"task_id": "t1", "seed": 0, "score": 1.0, "trace": "ok"}])
    found = trajectories(run)
    assert found and all(t.shown == frozenset() for t in found)


def test_a_repeated_add_from_an_attempt_that_never_saw_the_item_moves_no_counter(tmp_path):
    """De-duplication turns a repeated ADD into a "helpful" tag; offline, the attempt never saw the
    item it repeats, so the tag is dropped like the reflector's (the duplicate is still recorded)."""
    lesson = "Guess the middle of the range."
    model = _roles(['{"tags": [], "lesson": "Guess the middle."}'] * 2,
                   [_ops({"op": "ADD", "section": "strategies", "text": lesson})] * 2)
    path = tmp_path / "playbook.md"
    Playbook.parse(f"# Playbook\n\n## strategies\n- [ctx-00001] (+0/-0) {lesson}\n").save(path)
    learner = ContextLearner(path, reflector_model=model, embedder=BagOfWords(), config=ContextConfig(min_relevance=None))
    entry = learner.learn_one(Trajectory("old-1", "guess a number", "guessed 50", 1.0, shown=frozenset()))
    assert entry["duplicates"] and [d["id"] for d in entry["tags_dropped"]] == ["ctx-00001"] and entry["applied"] == []
    assert len(Playbook.load(path)) == 1 and Playbook.load(path).get("ctx-00001").helpful == 0
    entry = learner.observe("guess a number", "guessed 50 then 25", 1.0, trajectory_id="now")  # saw it
    assert entry["tags_dropped"] == [] and Playbook.load(path).get("ctx-00001").helpful == 1
