"""The playbook as an engine surface: the curator proposer over an archive, with scripted models."""

import json
from pathlib import Path

import pytest
import yaml

from ratchet.context.playbook import Playbook, PlaybookError
from ratchet.context.proposer import CuratorProposer, CuratorProposerOptions
from ratchet.context.skills import ContextSkills
from ratchet.contracts import Candidate, Failure, Proposal, Proposer, Skip, TaskResult
from ratchet.evolve.components import build
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.models.scripted import ScriptedModel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "humaneval-playbook"
BOOK = "# Playbook\n<!-- next_id=2 version=3 -->\n\n## code\n- [ctx-00001] (+1/-0) Return only the function.\n"


class Archive:
    """The ArchiveView the proposer reads: one parent's results on one split."""

    def __init__(self, results: dict[tuple[str, str], list[TaskResult]]) -> None:
        self.by = results

    def results(self, candidate_id, split):
        return self.by.get((candidate_id, split), [])

    def candidates(self, status=None):
        return []

    def score(self, candidate_id, split):
        return None

    def children(self, candidate_id):
        return []

    def rejected(self, limit=10):
        return []

    def unusable(self, limit=None):
        return []


def failing(task: str, score: float = 0.0, seed: int = 0) -> TaskResult:
    return TaskResult(task, seed, score, trace=f"def f(): ...\n{task}: AssertionError",
                      failures=(Failure("test_failed", f"{task} assertion failed", task),))


def roles(reflections, curations):
    queues = {"reflector": list(reflections), "curator": list(curations)}

    def respond(messages):
        role = "curator" if "Change it only by operations" in messages[-1]["content"] else "reflector"
        return queues[role].pop(0)

    return ScriptedModel(respond)


def make(model, **options) -> CuratorProposer:
    ctx = EngineContext(load_manifest(EXAMPLE), EXAMPLE, model=model)
    return CuratorProposer(CuratorProposerOptions(**options), ctx)


def test_failed_tasks_become_one_new_playbook_and_nothing_else_changes():
    parent = Candidate.from_files("h", {"playbook.md": BOOK, "workflow.py": "x = 1\n"})
    archive = Archive({(parent.id, "search"): [failing("HE/3"), failing("HE/3", 0.5, seed=1), failing("HE/1", 0.5),
                                                TaskResult("HE/2", 0, 1.0)],
                       (parent.id, "heldin"): [failing("HE/9")]})
    model = roles([json.dumps({"tags": [{"id": "ctx-00001", "tag": "harmful"}], "lesson": "Check empty input first."}),
                   json.dumps({"tags": [], "lesson": "Keep the given signature."})],
                  [json.dumps({"operations": [{"op": "ADD", "section": "code", "text": "Check empty input first."}]}),
                   json.dumps({"operations": [{"op": "ADD", "section": "code", "text": "Keep the given signature."}]})])
    proposer = make(model)
    assert isinstance(proposer, Proposer)
    proposal = proposer.propose(parent, archive, None)
    assert isinstance(proposal, Proposal) and list(proposal.files) == ["playbook.md"]
    book = Playbook.parse(proposal.files["playbook.md"])
    assert [i.text for i in book.items.values()] == ["Return only the function.", "Check empty input first.",
                                                     "Keep the given signature."]
    assert book.get("ctx-00001").harmful == 1 and book.get("ctx-00002").id == "ctx-00002"
    # worst first: HE/3 (score 0, its worst seed) before HE/1; the held-in failure is never read
    assert f"{parent.id}/search/HE/3@0" in book.get("ctx-00002").sources
    assert all("HE/9" not in c["messages"][-1]["content"] for c in model.calls)
    assert proposal.claim.predicted_flips == ("HE/3",) and "HE/3, HE/1" in proposal.claim.target
    assert proposal.meta["reflected"] == 2 and proposal.meta["applied"] == 3 and proposal.parents == (parent.id,)


@pytest.mark.parametrize("tags", ["evidence", "reflector"])
def test_the_proposer_counts_tags_through_the_learners_tag_strategy(tags):
    """A failed task says nothing for an item's "helpful": the default strategy (``evidence``, the
    learner's) drops the tag and records why; ``reflector`` counts it as the models gave it."""
    from ratchet.context.tagging import HELPFUL_ON_FAILURE

    parent = Candidate.from_files("h", {"playbook.md": BOOK})
    model = roles([json.dumps({"tags": [{"id": "ctx-00001", "tag": "helpful"}], "lesson": "Check empty input."})],
                  [json.dumps({"operations": [{"op": "ADD", "section": "code", "text": "Check empty input."}]})])
    options = {"context": {"tags": tags}} if tags != "evidence" else {}
    proposal = make(model, **options).propose(parent, Archive({(parent.id, "search"): [failing("HE/5")]}), None)
    book = Playbook.parse(proposal.files["playbook.md"])
    [step] = proposal.meta["steps"]
    if tags == "evidence":
        assert book.get("ctx-00001").helpful == 1  # the parent's count, unmoved
        assert step["tags_dropped"] == [{"id": "ctx-00001", "tag": "helpful",
                                         "why": HELPFUL_ON_FAILURE.format(score=0.0)}]
    else:
        assert book.get("ctx-00001").helpful == 2 and step["tags_dropped"] == []
    assert [i.text for i in book.items.values()][-1] == "Check empty input."


def test_no_failure_is_a_skip_without_a_model_call():
    parent = Candidate.from_files("h", {"playbook.md": BOOK})
    model = ScriptedModel([])
    skip = make(model).propose(parent, Archive({(parent.id, "search"): [TaskResult("HE/2", 0, 1.0)]}), None)
    assert isinstance(skip, Skip) and "fails no search task" in skip.reason and model.calls == []


def test_when_no_operation_survives_the_skip_says_why_and_the_retries_were_asked():
    parent = Candidate.from_files("h", {})  # no playbook yet: an empty one
    model = roles([json.dumps({"tags": [], "lesson": "Guard the loop bounds."})],
                  ["not json", json.dumps({"operations": [{"op": "DELETE", "id": "ctx-00007"}]})])
    skip = make(model, context={"max_retries": 1, "use_grammar": False}).propose(
        parent, Archive({(parent.id, "search"): [failing("HE/5")]}), None)
    assert isinstance(skip, Skip)
    assert "no playbook operation survived for 1 failed search tasks" in skip.reason and "problems" in skip.reason
    assert len(model.calls) == 3  # reflector, curator, curator asked again with its problems


def test_a_lesson_free_reflection_and_a_broken_playbook_are_skips():
    parent = Candidate.from_files("h", {"playbook.md": BOOK})
    model = roles([json.dumps({"tags": [], "lesson": ""})], [])
    skip = make(model).propose(parent, Archive({(parent.id, "search"): [failing("HE/5")]}), None)
    assert isinstance(skip, Skip) and "no lesson was named" in skip.reason
    broken = Candidate.from_files("h", {"playbook.md": "# Playbook\n- [ctx-1] oops\n"})
    skip = make(ScriptedModel([])).propose(broken, Archive({(broken.id, "search"): [failing("HE/5")]}), None)
    assert isinstance(skip, Skip) and "does not parse" in skip.reason and "playbook.md:2" in skip.reason


def test_the_example_config_names_the_proposer_and_builds_it():
    raw = yaml.safe_load((EXAMPLE / "evolve.yaml").read_text())
    raw.update(workspace=str(EXAMPLE), model="scripted:")
    cfg = EvolveConfig.model_validate(raw)
    [spec] = cfg.proposers
    ctx = EngineContext(load_manifest(EXAMPLE), EXAMPLE, model=ScriptedModel([]))
    proposer = build("proposer", spec, ctx)
    assert isinstance(proposer, CuratorProposer) and proposer.options.context.budget_tokens == 300
    manifest = load_manifest(EXAMPLE)
    assert all(manifest.is_editable(p) for p in ("playbook.md", "skills/lessons/select.py", "skills/new/SKILL.md"))
    assert Playbook.parse((EXAMPLE / "playbook.md").read_text()).items == {}


def _book(n_items: int = 40) -> Playbook:
    from ratchet.context.playbook import Item

    book = Playbook()
    for n in range(1, n_items + 1):
        book.put(Item(id=book.new_id(), section="code", text=f"Lesson number {n} " + "word " * 12,
                      helpful=1 if n == n_items else 0, harmful=1 if n == 1 else 0))
    return book


TASK = "def f(words):\n    \"\"\"Count each word of the lesson number.\"\"\"\n"
"""A problem that shares words with every lesson of :func:`_book`."""


def test_the_lessons_skill_chooses_the_best_items_within_the_budget():
    skills = ContextSkills(EXAMPLE / "skills")
    assert skills.names() == ["lessons"] and "lessons:" in skills.listing()
    text = skills.select("lessons", _book(), TASK, 60)
    header = "\n\nLessons learned on earlier problems (follow those that apply):\n"
    assert text.startswith(header)
    lines = text[len(header):].splitlines()
    assert lines[0].startswith("[ctx-00040]") and not any(line.startswith("[ctx-00001]") for line in lines)
    assert 0 < sum((len(line) + 3) // 4 for line in lines) <= 60 and len(lines) < 40
    assert skills.select("lessons", Playbook(), "t", 60) == ""


def _workflow_options():
    """The example's workflow settings (its libraries: flowops and the word relevance)."""
    from ratchet.evolve.suites.config import WorkflowOptions

    raw = yaml.safe_load((EXAMPLE / "evolve.yaml").read_text())
    return WorkflowOptions.model_validate(raw["suite"]["options"]["workflow"])


def _step(files: dict[str, str], prompt: str = TASK) -> str:
    """The workflow's first system prompt, run in the sandbox as the suite runs it (with the
    example's workflow libraries beside the candidate's files)."""
    from ratchet.evolve.suites.workflow import library_files
    from ratchet.sandbox.sandbox import Sandbox

    task = {"task_id": "t", "prompt": prompt, "entry_point": "f"}
    files = {**library_files(_workflow_options()), **files}
    sandbox = Sandbox(files, entry="workflow.py")
    try:
        return sandbox.call("step", {"task": task, "events": [], "files": files})["call_model"][0]["content"]
    finally:
        sandbox.close()


def test_the_workflow_loads_the_playbook_through_its_skill_in_the_sandbox():
    shipped = {p: (EXAMPLE / p).read_text() for p in ("workflow.py", "prompts/system.md", "skills/lessons/select.py",
                                                       "skills/lessons/SKILL.md")}
    files = {**shipped, "playbook.md": _book().render()}
    system = _step(files)
    assert system.startswith(shipped["prompts/system.md"]) and "[ctx-00040] Lesson number 40" in system
    assert "ctx-00001]" not in system and len(system) - len(shipped["prompts/system.md"]) < 300 * 4 + 100
    # the selection is a surface: an edited select.py is what the prompt gets; without it, no lessons
    edited = {**files, "skills/lessons/select.py": "def select(playbook, task, budget_tokens):\n    return '\\nONLY'\n"}
    assert _step(edited).endswith("\nONLY")
    assert _step({k: v for k, v in files.items() if not k.startswith("skills/")}) == shipped["prompts/system.md"]


def test_the_lessons_skill_leaves_out_a_lesson_that_does_not_apply_in_the_sandbox():
    """The first trial's failure: a rule learned on one string problem entered every prompt. The
    shipped skill keeps it for a problem like its own and out of an unrelated one, with budget to
    spare, by the package's word relevance (the sandbox cannot import ratchet or load the encoder)."""
    from ratchet.context.lexical import MIN_RELEVANCE, relevance
    from ratchet.context.playbook import Item, origin_text
    from ratchet.evolve.suites.humaneval import package_data_file, read_problems

    prompts = [p["prompt"] for p in read_problems(package_data_file())[:40]]  # train problems only
    book = Playbook()
    book.put(Item(book.new_id(), "code", "Always convert the input string to lowercase", helpful=3,
                  origin=origin_text(prompts[16])))
    shipped = {p: (EXAMPLE / p).read_text() for p in ("workflow.py", "prompts/system.md", "skills/lessons/select.py",
                                                       "skills/lessons/SKILL.md")}
    files = {**shipped, "playbook.md": book.render()}
    assert "lowercase" in _step(files, prompts[27])  # flip_case: a string problem like /16's
    assert _step(files, prompts[0]) == shipped["prompts/system.md"]  # has_close_elements: left out
    rule = book.get("ctx-00001")
    scores = [relevance(prompts[k], rule.text, rule.origin) for k in (0, 27)]
    assert scores[0] < MIN_RELEVANCE <= scores[1]
    # without the library the sandbox cannot import the rule: the workflow then shows no lessons
    # (its skill fails to load), never all of them
    from ratchet.sandbox.sandbox import Sandbox

    sandbox = Sandbox(files, entry="workflow.py")
    try:
        task = {"task_id": "t", "prompt": prompts[27], "entry_point": "flip_case"}
        alone = sandbox.call("step", {"task": task, "events": [], "files": files})["call_model"][0]["content"]
    finally:
        sandbox.close()
    assert alone == shipped["prompts/system.md"]


def test_a_skill_without_select_or_with_a_bad_one_is_an_error_naming_it(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "SKILL.md").write_text("---\nname: plain\ndescription: d\n---\nbody\n")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "SKILL.md").write_text("---\nname: bad\ndescription: d\n---\nbody\n")
    (tmp_path / "bad" / "select.py").write_text("def select(playbook, task, budget_tokens):\n    return 3\n")
    skills = ContextSkills(tmp_path)
    assert skills.names() == ["bad"]
    with pytest.raises(PlaybookError, match="has no select.py"):
        skills.select("plain", Playbook(), "t", 10)
    with pytest.raises(PlaybookError, match="returned int, not text"):
        skills.select("bad", Playbook(), "t", 10)
    with pytest.raises(PlaybookError, match="no skill 'nope'"):
        skills.select("nope", Playbook(), "t", 10)


def test_a_failed_humaneval_task_teaches_a_lesson_the_child_sees_in_its_prompt():
    """The loop the engine runs, by hand: the suite judges the example, the proposer curates the
    playbook from the failure, and the child's workflow puts the lesson into its system prompt."""
    from ratchet.evolve.suites.humaneval import HumanEvalOptions, HumanEvalSuite

    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
    lesson = "Compare every pair of distinct elements."

    def respond(messages):
        content = messages[-1]["content"]
        if "Change it only by operations" in content:
            return json.dumps({"operations": [{"op": "ADD", "section": "code", "text": lesson}]})
        if "You review one attempt" in content:
            return json.dumps({"tags": [], "lesson": lesson})
        return wrong

    model = ScriptedModel(respond)
    manifest = load_manifest(EXAMPLE)
    files = {str(p.relative_to(EXAMPLE)): p.read_text() for p in EXAMPLE.rglob("*")
             if p.is_file() and manifest.is_editable(str(p.relative_to(EXAMPLE)))}
    parent = Candidate.from_files(manifest.name, files)
    ctx = EngineContext(manifest, EXAMPLE, model=model)
    suite = HumanEvalSuite(HumanEvalOptions(limit=1, grade_timeout_s=2.0, workflow=_workflow_options()), ctx)
    [result] = suite.evaluate(parent, suite.tasks(), 0)
    assert result.score == 0.0 and "Lessons learned" not in model.calls[0]["messages"][0]["content"]
    proposal = CuratorProposer(CuratorProposerOptions(context={"use_grammar": False}), ctx).propose(
        parent, Archive({(parent.id, "search"): [result]}), None)
    assert isinstance(proposal, Proposal) and list(proposal.files) == ["playbook.md"]
    child = Candidate.from_files(manifest.name, {**files, **proposal.files}, parent.id)
    calls = len(model.calls)
    suite.evaluate(child, suite.tasks(), 0)
    assert model.calls[calls]["messages"][0]["content"].endswith(f"[ctx-00001] {lesson}\n")


def test_without_an_encoder_a_lesson_learned_again_is_a_helpful_tag_not_a_second_item():
    parent = Candidate.from_files("h", {"playbook.md": BOOK})
    again = json.dumps({"operations": [{"op": "ADD", "section": "code", "text": "return only  the FUNCTION."},
                                       {"op": "ADD", "section": "code", "text": "Name the edge case."},
                                       {"op": "ADD", "section": "code", "text": "name the edge case."}]})
    model = roles([json.dumps({"tags": [], "lesson": "Return only the function."})], [again])
    # a partial score: the evidence strategy lets a helpful tag count there (on a score of 0 it would not)
    proposal = make(model).propose(parent, Archive({(parent.id, "search"): [failing("HE/5", 0.5)]}), None)
    book = Playbook.parse(proposal.files["playbook.md"])
    assert [(i.text, i.helpful) for i in book.items.values()] == [("Return only the function.", 2),
                                                                  ("Name the edge case.", 0)]
    assert [d["item"] for d in proposal.meta["steps"][0]["duplicates"]] == ["ctx-00001", "batch-add:1"]


def test_the_engine_judges_the_curators_playbook_with_its_gate(tmp_path):
    """One engine step on the example: the curator's proposal changes only the playbook and the
    gate turns it down, since the scripted coder fails every task with or without lessons."""
    from ratchet.evolve.archive import Archive as RunArchive
    from ratchet.evolve.loop import Engine
    from ratchet.store import RunStore

    raw = yaml.safe_load((EXAMPLE / "evolve.yaml").read_text())
    raw.update(workspace=str(EXAMPLE), model="scripted:", iterations=1, budget={"max_calls": 60},
               splits={"search": 0.34, "heldin": 0.33, "heldout": 0.33, "seed": 0})
    raw["suite"]["options"].update(limit=6, grade_timeout_s=2)
    cfg = EvolveConfig.model_validate(raw)

    def respond(messages):
        content = messages[-1]["content"]
        if "Change it only by operations" in content:
            return json.dumps({"operations": [{"op": "ADD", "section": "code", "text": "Handle the empty input."}]})
        if "You review one attempt" in content:
            return json.dumps({"tags": [], "lesson": "Handle the empty input."})
        return "```python\ndef f():\n    return None\n```"

    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    summary = Engine(cfg, run, ScriptedModel(respond)).execute()
    assert summary["state"] == "done" and summary["report"]["proposals"]["total"] == 1
    [(child, decision)] = RunArchive(run).rejected()
    original = next(c for c in RunArchive(run).candidates() if c.id == child.parent_id)
    assert child.meta["proposer"] == "curator"
    assert {p for p in child.files if child.files[p] != original.files.get(p)} == {"playbook.md"}
    assert [i.text for i in Playbook.parse(child.files["playbook.md"]).items.values()] == ["Handle the empty input."]
    assert not decision.accepted and "held-in" in decision.reason
