"""The playbook trial on any engine suite (ratchet.context.trial_suites) and its learner arms."""

import json
from pathlib import Path

import pytest

from ratchet.context.config import ContextConfig
from ratchet.context.learner import ContextLearner, Trajectory
from ratchet.context.trial import ACE_ADD_ONLY, LESSONS_HEADER, Arm, PlaybookTrial
from ratchet.context.trial_suites import ConfigSplits, LeadingSplits, TrialSuite
from ratchet.contracts import RatchetError, Task
from ratchet.evolve.config import SplitsConfig
from ratchet.models.scripted import ScriptedModel
from ratchet.store import RunStore

from .fakes import BagOfWords

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _tasks(n):
    return [Task(f"t{k}", {"prompt": f"task {k}"}) for k in range(n)]


def test_leading_splits_take_train_then_test_after_the_offset():
    rule = LeadingSplits(offset=2, train=3, test=2)
    train, test = rule.split(_tasks(10), None, None)
    assert [t.id for t in train] == ["t2", "t3", "t4"] and [t.id for t in test] == ["t5", "t6"]
    assert rule.limit(None, None) == 7
    train, test = rule.split(_tasks(10), 1, 1)
    assert [t.id for t in train] == ["t2"] and [t.id for t in test] == ["t3"]


def test_config_splits_judge_on_the_test_split_only():
    rule = ConfigSplits(SplitsConfig(search=0, heldin=0, heldout=0, ids={"heldin": ["t0", "t1"], "test": ["t4", "t5"]}))
    train, test = rule.split(_tasks(6), None, None)
    assert [t.id for t in train] == ["t0", "t1"] and [t.id for t in test] == ["t4", "t5"]
    assert rule.limit(None, None) is None
    with pytest.raises(RatchetError, match="no test split"):
        ConfigSplits(SplitsConfig(search=0, heldin=1.0, heldout=0)).split(_tasks(4), None, None)


def test_the_three_suites_are_built_from_their_workspaces_run_configs():
    gtn = TrialSuite("guess-the-number", EXAMPLES / "guess-the-number", "evolve.yaml", "prompts/system.md")
    train, test = gtn.split(gtn.build(None).tasks())
    assert [t.id for t in test] == [f"GuessTheNumber-v0#{k}" for k in range(10, 18)]  # the config's test ids
    assert len(train) == 10 and not {t.id for t in train} & {t.id for t in test}
    assert gtn.build(None, temperature=0.7).options.workflow.temperature == 0.7
    assert "prompts/system.md" in gtn.files()

    coding = TrialSuite("coding", EXAMPLES / "coding-agent", "evolve-choices.yaml", "system_prompt.md")
    suite = coding.build(None)
    train, test = coding.split(suite.tasks())
    assert (len(suite.tasks()), len(train), len(test)) == (45, 24, 20)  # 4 search + 20 held-in teach; one task falls in no split (rounding)
    assert "temperature=0.7" in coding.build(None, temperature=0.7).options.overrides  # its own sampled()

    humaneval = TrialSuite("humaneval", EXAMPLES / "humaneval-coder", "evolve.yaml", "prompts/system.md", LeadingSplits())
    suite = humaneval.build(None)
    assert suite.options.limit == 80 and suite.options.workflow.max_model_calls == 3
    train, test = humaneval.split(suite.tasks())
    assert test[0].id == "HumanEval/40" and test[-1].id == "HumanEval/79"


def test_guess_the_number_trial_puts_the_playbook_into_the_players_prompt(tmp_path):
    """A real GuessTheNumber suite (sandboxed workflow, TextArena game) with scripted models."""
    seen = []

    def player(messages):
        seen.append(messages[0]["content"])
        return "[10]"

    def learner(messages):
        text = messages[-1]["content"]
        if "Change it only by operations" in text:
            return json.dumps({"operations": [{"op": "ADD", "section": "guessing", "text": "Halve the range each guess."}]})
        return json.dumps({"tags": [], "lesson": "Halve the range each guess."})

    spec = TrialSuite("guess-the-number", EXAMPLES / "guess-the-number", "evolve.yaml", "prompts/system.md")
    suite = spec.build(ScriptedModel(player))
    train, test = spec.split(suite.tasks(), 1, 1)
    run = RunStore(tmp_path / "runs").create_run("context-trial", {})
    trial = PlaybookTrial(suite, spec.files(), spec.prompt_file, run, ScriptedModel(learner), ContextConfig())
    trial.empty(train, test)
    assert not any(LESSONS_HEADER in s for s in seen)
    trial.online(train, test, trial.arm("ace-add-only"))
    assert any("Halve the range each guess." in s for s in seen)
    [record] = trial.phase("test-ace-add-only-online")
    assert 0.0 <= record["score"] <= 1.0 and record["items"] == ["ctx-00001"]
    [size] = trial.sizes("ace-add-only-online")
    assert size["items"] == 1 and size["tokens"] > 0


def _add_only_learner(tmp_path, replies):
    calls = []

    def respond(messages):
        calls.append(messages[-1]["content"])
        return replies(messages[-1]["content"])

    arm = Arm.named("ace-add-only", ContextConfig())
    run = RunStore(tmp_path / "runs").create_run("context-trial", {})
    return ContextLearner(tmp_path / "p.md", reflector_model=ScriptedModel(respond), config=arm.config,
                          embedder=BagOfWords(), run=run, name="ace-add-only-online"), calls


def test_ace_add_only_arm_adds_repeats_and_never_prunes(tmp_path):
    def replies(prompt):
        if "Change it only by operations" in prompt:
            return json.dumps({"operations": [{"op": "ADD", "section": "s", "text": "Check the edge cases first."}]})
        return json.dumps({"tags": [], "lesson": "Check the edge cases first."})

    learner, calls = _add_only_learner(tmp_path, replies)
    for k in range(3):
        learner.learn_one(Trajectory(f"t{k}", "task", "trace", 0.0, shown=frozenset()))
    # no de-duplication: the same lesson three times is three items (ours would fold it)
    assert len(learner.playbook) == 3
    curator_prompts = [c for c in calls if "Change it only by operations" in c]
    assert all('"op": "ADD"' in c and '"op": "UPDATE"' not in c and '"op": "DELETE"' not in c for c in curator_prompts)
    # no budget: every item is in the curator's view of the playbook
    assert all(f"ctx-0000{k}" in curator_prompts[-1] for k in (1, 2))
    sizes = learner.sizes()
    assert [s["items"] for s in sizes] == [1, 2, 3]
    assert sizes[0]["tokens"] < sizes[1]["tokens"] < sizes[2]["tokens"]

    ours = ContextLearner(tmp_path / "q.md", reflector_model=ScriptedModel(lambda m: replies(m[-1]["content"])),
                          config=ContextConfig(), embedder=BagOfWords())
    for k in range(3):
        ours.learn_one(Trajectory(f"t{k}", "task", "trace", 0.0, shown=frozenset()))
    assert len(ours.playbook) == 1  # the negative control: de-duplication folds the repeats


def test_ace_add_only_curator_may_not_update_or_delete(tmp_path):
    def replies(prompt):
        if "Change it only by operations" in prompt:
            if "ctx-00001" in prompt:
                return json.dumps({"operations": [{"op": "DELETE", "id": "ctx-00001"},
                                                  {"op": "UPDATE", "id": "ctx-00001", "text": "Other words."}]})
            return json.dumps({"operations": [{"op": "ADD", "section": "s", "text": "First lesson."}]})
        return json.dumps({"tags": [], "lesson": "Some lesson."})

    learner, _ = _add_only_learner(tmp_path, replies)
    learner.learn_one(Trajectory("t0", "task", "trace", 0.0, shown=frozenset()))
    entry = learner.learn_one(Trajectory("t1", "task", "trace", 0.0, shown=frozenset()))
    assert [i.text for i in learner.playbook.items.values()] == ["First lesson."]
    refused = [p for p in entry["problems"] if "only ADD may be used" in p["message"]]
    assert len(refused) == 4  # DELETE and UPDATE, in the reply and in the retry


def test_ace_add_only_never_prunes_a_harmful_item(tmp_path):
    item_tags = iter([[], [{"id": "ctx-00001", "tag": "harmful"}], [{"id": "ctx-00001", "tag": "harmful"}],
                      [{"id": "ctx-00001", "tag": "harmful"}]])

    def replies(prompt):
        if "Change it only by operations" in prompt:
            return json.dumps({"operations": [{"op": "ADD", "section": "s", "text": "A lesson."}]}
                              if "ctx-00001" not in prompt else {"operations": []})
        return json.dumps({"tags": next(item_tags), "lesson": "A lesson."})

    learner, _ = _add_only_learner(tmp_path, replies)
    for k in range(4):
        learner.learn_one(Trajectory(f"t{k}", "task", "trace", 0.0))  # shown: what the learner selects
    item = learner.playbook.get("ctx-00001")
    assert item.harmful == 3 and item.helpful == 0  # ours deletes it at harmful - helpful >= 2
    assert ACE_ADD_ONLY["prune_margin"] is None


def test_a_model_that_refuses_the_prompt_is_a_counted_problem_not_a_crash(tmp_path):
    def refuse(messages):
        raise RatchetError("local:x: Requested tokens (5000) exceed context window of 4096")

    learner = ContextLearner(tmp_path / "p.md", reflector_model=ScriptedModel(refuse), config=ContextConfig())
    entry = learner.learn_one(Trajectory("t0", "task", "trace", 0.0))
    assert "reflector's call failed" in entry["problems"][0]["message"] and learner.stats.reflector_problems == 1


def test_unknown_arm_is_named():
    with pytest.raises(RatchetError, match="unknown learner arm 'ace'"):
        Arm.named("ace", ContextConfig())
