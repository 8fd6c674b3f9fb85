"""ace-framework's side of bench/context_playbook.py; runs in its own bench environment
(ace-framework==0.13.0, Python >= 3.12: ``scripts/setup-bench.sh --only ace``).

Configured as its README and setup guide recommend: ``ACELiteLLM`` built from an
``ACEModelConfig`` (a model per role: the solver as Agent, the learner model as Reflector and
SkillManager), learning with ``learn(samples, environment)`` and answering with ``ask``. Both
models are reached through the bench's OpenAI-compatible endpoint (LiteLLM model names
``openai/solver`` and ``openai/learner``; the endpoint is ``OPENAI_BASE_URL``, which the bench
sets). Its optional embedding de-duplication (the ``deduplication`` extra, sentence-transformers)
is not installed, as in its default set-up.

The peer only produces answers. Each train problem is one ``learn`` call, its answer graded by
the bench's sandboxed grader (``POST /grade``) as the ``TaskEnvironment``'s feedback; after each,
the skillbook's size (skills, and its text as the Agent's prompt shows it) is appended to
``peer-sizes.jsonl``. Then each test problem is one ``ask`` with the learned skillbook, its answer
written to ``answers.jsonl`` (graded by the bench afterwards). Both files are appended as they
happen; a rerun skips the problems they already hold (the skillbook is saved after every step).

Usage: python ace_run.py SPEC.json   (SPEC: url, work, train [{id, question}], test [...],
solver / learner {temperature, max_tokens})
"""

import json
import os
import sys
import urllib.request

from ace import ACELiteLLM, Sample, TaskEnvironment
from ace.core import EnvironmentResult
from ace.providers import ACEModelConfig, ModelConfig

with open(sys.argv[1]) as spec_file:
    SPEC = json.load(spec_file)
WORK = SPEC["work"]
SKILLBOOK = os.path.join(WORK, "skillbook.json")


def post(path, payload):
    request = urllib.request.Request(SPEC["url"] + path, json.dumps(payload).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=3600) as response:
        return json.loads(response.read())


def spent():
    with urllib.request.urlopen(SPEC["url"] + "/spent", timeout=60) as response:
        return json.loads(response.read())


def done(name):
    path = os.path.join(WORK, name)
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        return {row["id"]: row for row in map(json.loads, filter(str.strip, fh))}


def append(name, row):
    with open(os.path.join(WORK, name), "a") as fh:
        fh.write(json.dumps(row) + "\n")


class HiddenTests(TaskEnvironment):
    """Feedback from the bench's grader: passed or the first line of what failed."""

    def evaluate(self, sample, agent_output):
        verdict = post("/grade", {"task_id": sample.id, "answer": agent_output.final_answer})
        append("train.jsonl", {"id": sample.id, "answer": agent_output.final_answer, "score": verdict["score"]})
        return EnvironmentResult(feedback=verdict["feedback"], ground_truth=None, metrics={"correct": verdict["score"]})


def role(name):
    settings = SPEC[name]
    return ModelConfig(model=f"openai/{name}", temperature=settings["temperature"], max_tokens=settings["max_tokens"])


config = ACEModelConfig(default=role("learner"), agent=role("solver"))
ace = ACELiteLLM.from_config(config, skillbook_path=SKILLBOOK if os.path.exists(SKILLBOOK) else None)
environment = HiddenTests()

learned = done("peer-sizes.jsonl")
for step, task in enumerate(SPEC["train"], 1):
    if task["id"] in learned:
        continue
    try:
        ace.learn([Sample(question=task["question"], id=task["id"])], environment=environment)
        error = None
    except Exception as exc:  # noqa: BLE001 -- a step the small model could not complete is recorded; learning goes on
        error = f"{type(exc).__name__}: {exc}"[:500]
    ace.save(SKILLBOOK)
    append("peer-sizes.jsonl", {"id": task["id"], "step": step, "skills": len(ace.skillbook.skills()),
                           "prompt": ace.skillbook.as_prompt(), "error": error})
    print("learned", task["id"], len(ace.skillbook.skills()), error or "", flush=True)

answered = done("answers.jsonl")
for task in SPEC["test"]:
    if task["id"] in answered:
        continue
    before = spent()
    try:
        answer, error = ace.ask(task["question"]), None
    except Exception as exc:  # noqa: BLE001 -- a failed answer is recorded as an empty one
        answer, error = "", f"{type(exc).__name__}: {exc}"[:500]
    calls = spent()["solver"] - before["solver"]
    append("answers.jsonl", {"id": task["id"], "answer": answer, "error": error, "calls": calls})
    print("answered", task["id"], error or "", flush=True)
print("ace done", flush=True)
