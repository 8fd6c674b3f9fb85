"""OpenEvolve's side of bench/evolve_peers.py; runs in the bench environment (openevolve==0.4.0).

The system prompt is the evolved program (a text file), rewritten whole each iteration
(``diff_based_evolution: false``, as OpenEvolve's prompt-optimization example does), with the
library's defaults otherwise (islands, MAP-Elites grid, prompt sampling). The evaluator scores a
program on the held-in split (``combined_score``) and returns the search split's failures as
artifacts, which OpenEvolve puts in its next prompts. The LLM is the same embedded model behind
the bench's OpenAI-compatible endpoint. OpenEvolve has no call budget of its own, so the number
of iterations is the budget left after the seed's evaluation divided by the calls of one
iteration (one proposal plus one evaluation). Usage: python openevolve_run.py SPEC.json
"""

import json
import sys
import urllib.request
from pathlib import Path

from openevolve.api import run_evolution
from openevolve.config import Config, LLMModelConfig

SPEC = json.loads(open(sys.argv[1]).read())
URL = SPEC["url"]
WORK = Path(SPEC["work"])

EVALUATOR = '''
import json
import urllib.request

from openevolve.evaluation_result import EvaluationResult

SPEC = json.loads(open(%r).read())


def post(path, payload):
    request = urllib.request.Request(SPEC["url"] + path, json.dumps(payload).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=3600) as response:
        return json.loads(response.read())


def evaluate(program_path):
    prompt = open(program_path).read()
    heldin = post("/evaluate", {"system_prompt": prompt, "task_ids": SPEC["heldin"]})
    search = post("/evaluate", {"system_prompt": prompt, "task_ids": SPEC["search"]})
    failing = [r for r in search if r["score"] < 1]
    artifacts = {"failures": "\\n\\n".join(
        r["task_id"] + ": " + "; ".join(r["failures"]) + "\\n" + r["trace"][-900:] for r in failing[:3]) or "none"}
    score = sum(r["score"] for r in heldin) / len(heldin)
    return EvaluationResult(metrics={"combined_score": score, "search_score": sum(r["score"] for r in search) / len(search)},
                            artifacts=artifacts)
''' % str(WORK / "spec.json")


def post(path, payload):
    request = urllib.request.Request(URL + path, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=3600) as response:
        return json.loads(response.read())


def spent():
    with urllib.request.urlopen(URL + "/spent", timeout=60) as response:
        return json.loads(response.read())


# The seed's evaluation (held-in and search) tells what one evaluation costs in calls.
post("/evaluate", {"system_prompt": SPEC["seed_prompt"], "task_ids": SPEC["heldin"] + SPEC["search"]})
per_eval = max(1, spent()["calls"])
iterations = max(1, (SPEC["budget_calls"] - per_eval) // (1 + per_eval))

(WORK / "evaluator.py").write_text(EVALUATOR)
(WORK / "initial_prompt.txt").write_text(SPEC["seed_prompt"])
config = Config()
config.random_seed = 0
config.language = "text"
config.file_suffix = ".txt"
config.diff_based_evolution = False
config.max_iterations = iterations
config.llm.models = [LLMModelConfig(name=SPEC["model"].split(":")[-1], api_base=URL + "/v1", api_key="local",
                                    weight=1.0, temperature=SPEC["temperature"], max_tokens=SPEC["max_tokens"],
                                    timeout=1800, retries=1, retry_delay=1, random_seed=0)]
config.evaluator.timeout = 3600
config.evaluator.parallel_evaluations = 1
config.evaluator.cascade_evaluation = False
config.prompt.max_artifact_bytes = 3000  # the 0.5B's context is 4096-8192 tokens
config.database.random_seed = 0

result = run_evolution(initial_program=str(WORK / "initial_prompt.txt"), evaluator=str(WORK / "evaluator.py"),
                       config=config, iterations=iterations, output_dir=str(WORK / "openevolve"), cleanup=False)
best = result.best_code if result.best_program is not None else SPEC["seed_prompt"]
json.dump({"best_prompt": best, "iterations": iterations, "proposals": spent()["proposer_calls"],
           "improved": None, "best_score": result.best_score, "metrics": result.metrics, "spent": spent()},
          open(WORK / "result.json", "w"), indent=2)
print("openevolve done", spent(), flush=True)
