import json

import pytest

from ratchet.context.config import ContextConfig
from ratchet.context.trial import LESSONS_HEADER, PlaybookTrial, with_playbook
from ratchet.contracts import RatchetError, Task, TaskResult
from ratchet.models.scripted import ScriptedModel
from ratchet.store import RunStore

from .fakes import BagOfWords


class LessonSuite:
    """Solves a task only when the prompt file carries a lesson naming the task's word."""

    def __init__(self):
        self.calls = 0

    def tasks(self):
        return [Task(f"t{k}", {"prompt": f"problem about {word}"}) for k, word in enumerate(["lists", "strings", "dicts", "sets"])]

    def evaluate(self, candidate, tasks, seed):
        self.calls += 1
        (task,) = tasks
        word = task.input["prompt"].split()[-1]
        solved = LESSONS_HEADER in candidate.files["prompts/system.md"] and word in candidate.files["prompts/system.md"]
        return [TaskResult(task.id, seed, float(solved), trace=f"attempt on {word}", metrics={"model_calls": 1.0})]


def _learner_model():
    def respond(messages):
        text = messages[-1]["content"]
        if "Change it only by operations" in text:
            lesson = text.split("New lesson from the latest attempt")[1].split(":\n", 1)[1].split("\n")[0]
            return json.dumps({"operations": [{"op": "ADD", "section": "s", "text": lesson}]})
        word = text.split("attempt on ")[1].split()[0]
        return json.dumps({"tags": [], "lesson": f"remember lists strings dicts sets, e.g. {word}"})

    return ScriptedModel(respond)


def test_trial_phases_learn_help_and_resume(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create_run("context-trial", {})
    suite = LessonSuite()
    train, test = suite.tasks()[:2], suite.tasks()[2:]
    files = {"prompts/system.md": "You are careful.", "workflow.py": "..."}
    trial = PlaybookTrial(suite, files, "prompts/system.md", run, _learner_model(), ContextConfig(),
                          embedder=BagOfWords(), sampling_suite=suite)
    trial.empty(train, test)
    trial.offline(train, test)
    trial.online(train, test)
    trial.best_of(2, test)
    assert [r["score"] for r in trial.phase("test-empty")] == [0.0, 0.0]
    assert [r["score"] for r in trial.phase("test-offline")] == [1.0, 1.0]
    assert [r["score"] for r in trial.phase("train-online")] == [0.0, 1.0]  # the second saw the first's lesson
    assert all(r["items"] for r in trial.phase("test-online"))
    assert len(trial.phase("test-best-of-2-sample-1")) == 2
    calls = suite.calls
    assert calls == 2 + 2 + 2 + 2 + 2 + 4  # train-empty evaluated once, shared by offline

    again = PlaybookTrial(suite, files, "prompts/system.md", store.open_run(run.id), _learner_model(), ContextConfig(),
                          embedder=BagOfWords(), sampling_suite=suite)
    again.empty(train, test)
    again.offline(train, test)
    again.online(train, test)
    assert suite.calls == calls  # everything was already in the run


def test_a_candidate_without_the_prompt_file_is_named():
    with pytest.raises(RatchetError, match="no prompts/system.md"):
        with_playbook({"workflow.py": ""}, "prompts/system.md", "x")
