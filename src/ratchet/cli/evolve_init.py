"""``ratchet evolve init DIR``: a starter workspace for your own JSONL suite.

It writes five small files (the run's settings, the manifest, a one-call workflow, its system
prompt and, without --suite, three sample tasks) that ``ratchet evolve DIR/evolve.yaml`` runs as
they are, and refuses to overwrite anything already there. docs/first-run.md walks through them;
examples/jsonl-suite is this starter with a suite of sixteen tasks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ratchet.contracts import RatchetError

EVOLVE_YAML = """\
# Run settings (protected: proposals never change them). Start the run with:
#   ratchet evolve {config}
# Every relative path here is read from this file's directory, so the run starts from anywhere.
workspace: .
model: {model}
suite:
  name: jsonl
  options:
    path: {suite}          # one task per line, each with its own verifier
    workflow: {{max_model_calls: 1, max_test_runs: 0, max_tokens: 400, temperature: 0.0}}
# search: tasks whose failures the proposer reads; heldin: where the gate decides; heldout: must not
# drop. The gate needs 6 held-in tasks or more to ever accept a change (`ratchet evolve` warns).
splits: {{search: 0.25, heldin: 0.5, heldout: 0.25, seed: 0}}
seeds: [0]                 # greedy decoding: one seed says all
selector: {{name: greedy}}
proposers:
  - name: reflective       # rewrites the system prompt from the failures it reads
    options: {{surfaces: ["prompts/system.md"], max_tokens: 400, temperature: 0.7}}
gate: {{name: paired, options: {{alpha: 0.05}}}}
budget: {{max_calls: 200}}
iterations: 5
"""

MANIFEST_YAML = """\
# What the engine may change (editable) and what it must leave alone (protected).
name: {name}
editable: ["prompts/*.md", "workflow.py"]
protected: ["evolve.yaml", "*.jsonl"]
entry: workflow.py
"""

WORKFLOW_PY = '''\
"""The harness around the model: one call with the system prompt, the reply is the answer.

``step`` runs in a sandbox and is called again after each request it makes is served:
``state["task"]`` is {"task_id", "prompt", "turn", "previous"}; ``state["files"]`` holds the
workspace's text files (prompts/system.md); ``state["events"]`` the replies so far.
Return {"call_model": messages} to ask the model, {"answer": text} to answer.
"""


def step(state):
    replies = [e["reply"] for e in state["events"] if e["kind"] == "model"]
    if not replies:
        system = state["files"].get("prompts/system.md", "")
        return {"call_model": [{"role": "system", "content": system},
                               {"role": "user", "content": state["task"]["prompt"]}]}
    return {"answer": replies[-1]}
'''

SYSTEM_MD = """\
You write small Python functions. Answer with one ```python code block holding the complete
function, nothing else.
"""

#: Three sample tasks, written when no suite is given: replace them with your own.
SAMPLE_TASKS = [
    {"id": "add", "prompt": "Write a Python function add(a, b) that returns the sum of a and b.",
     "verifier": {"command": ["{python}", "-c", "from solution import add; assert add(2, 3) == 5 and add(-1, 1) == 0"]}},
    {"id": "is-even", "prompt": "Write a Python function is_even(n) that returns True when n is even.",
     "verifier": {"command": ["{python}", "-c",
                              "from solution import is_even; assert is_even(4) and not is_even(7) and is_even(0)"]}},
    {"id": "initials", "prompt": "Write a Python function initials(name) that returns the upper-case first letters "
                                 "of the words of name, e.g. initials('ada lovelace') == 'AL'.",
     "verifier": {"command": ["{python}", "-c",
                              "from solution import initials; assert initials('ada lovelace') == 'AL' and "
                              "initials('x') == 'X'"]}},
]


def write_starter(dest: Path, suite: Path | None = None, model: str = "local:qwen2.5-coder-0.5b",
                  name: str | None = None) -> list[Path]:
    """Write the starter workspace into ``dest`` (made if missing) and return the files written.
    ``suite`` is your JSONL file, named from the workspace (relative when it lies below it);
    without it, three sample tasks go to ``dest/tasks.jsonl``. Nothing is overwritten: a file
    already there is refused, naming every one, before anything is written."""
    if suite is not None and not suite.is_file():
        raise RatchetError(f"no suite file at {suite}", hint="give --suite a JSONL file, one task per line "
                                                            "(see docs/first-run.md), or leave it out for sample tasks")
    dest = dest.absolute()
    files = {
        "evolve.yaml": None,  # filled below, once the suite's path is known
        "manifest.yaml": MANIFEST_YAML.format(name=name or dest.name or "my-harness"),
        "workflow.py": WORKFLOW_PY,
        "prompts/system.md": SYSTEM_MD,
    }
    if suite is None:
        files["tasks.jsonl"] = "".join(json.dumps(task) + "\n" for task in SAMPLE_TASKS)
        suite_ref = "tasks.jsonl"
    else:
        suite = suite.absolute()
        relative = os.path.relpath(suite, dest)
        suite_ref = relative if not relative.startswith("..") else str(suite)
    config = dest / "evolve.yaml"
    shown = os.path.relpath(config) if not os.path.relpath(config).startswith("..") else str(config)
    # Quoted: a spec such as http://host:8000/v1#name would otherwise end at its "#".
    files["evolve.yaml"] = EVOLVE_YAML.format(config=shown, model=json.dumps(model), suite=json.dumps(suite_ref))
    taken = [rel for rel in files if (dest / rel).exists()]
    if taken:
        raise RatchetError(f"{dest} already has {', '.join(taken)}; nothing was written",
                           hint="choose a new directory, or move those files away first")
    written = []
    for rel, text in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x") as out:  # "x": a file that appeared since the check is still not overwritten
            out.write(text)
        written.append(path)
    return written
