"""GEPA's side of bench/evolve_peers.py; runs in the bench environment (gepa==0.1.4).

``optimize_anything`` in its generalization mode, as GEPA's documentation recommends for prompt
optimization: the seed candidate is the harness's system prompt, ``dataset`` the search split
(reflection minibatches), ``valset`` the held-in split (Pareto selection), the reflection LM the
same embedded model behind the bench's OpenAI-compatible endpoint (through litellm, GEPA's own
client). It stops when the bench's call budget is spent. Usage: python gepa_run.py SPEC.json
"""

import json
import sys
import urllib.request

from gepa.optimize_anything import EngineConfig, GEPAConfig, ReflectionConfig, optimize_anything

SPEC = json.loads(open(sys.argv[1]).read())
URL = SPEC["url"]


def post(path, payload):
    request = urllib.request.Request(URL + path, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=3600) as response:
        return json.loads(response.read())


def spent():
    with urllib.request.urlopen(URL + "/spent", timeout=60) as response:
        return json.loads(response.read())


def evaluate(candidate, example):
    [row] = post("/evaluate", {"system_prompt": candidate, "task_ids": [example]})
    feedback = "passed the hidden tests" if row["score"] >= 1 else "; ".join(row["failures"]) or "failed"
    return row["score"], {"Problem": example, "Feedback": feedback, "Trace": row["trace"][-900:]}


class CallBudget:
    """Stop once the bench's model-call budget (proposals and evaluations together) is spent."""

    def __call__(self, gepa_state):
        return spent()["calls"] >= SPEC["budget_calls"]


result = optimize_anything(
    seed_candidate=SPEC["seed_prompt"],
    evaluator=evaluate,
    dataset=SPEC["search"],
    valset=SPEC["heldin"],
    objective="Write the system prompt of a small coding model that completes Python functions from their "
              "signature and docstring (HumanEval). Higher is more hidden tests passed.",
    background="The model is a 0.5B-parameter coder. The prompt is the system message; the user message holds "
               "the function to complete and asks for one ```python block. The harness runs the docstring's "
               "examples and asks the model for one repair if they fail.",
    config=GEPAConfig(
        engine=EngineConfig(run_dir=SPEC["work"] + "/gepa", seed=0, parallel=False, max_workers=1,
                            max_metric_calls=10_000, cache_evaluation=True, display_progress_bar=False),
        reflection=ReflectionConfig(reflection_lm="openai/" + SPEC["model"].split(":")[-1],
                                    reflection_lm_kwargs={"api_base": URL + "/v1", "api_key": "local",
                                                          "temperature": SPEC["temperature"],
                                                          "max_tokens": SPEC["max_tokens"]}),
        stop_callbacks=[CallBudget()],
    ),
)
scores = list(result.val_aggregate_scores)
json.dump({"best_prompt": result.best_candidate if isinstance(result.best_candidate, str)
           else next(iter(result.best_candidate.values())),
           "candidates": len(result.candidates), "proposals": spent()["proposer_calls"],
           "improved": len(result.candidates) - 1,  # kept in the pool (beat the parent on a minibatch)
           "beat_seed_on_valset": sum(1 for s in scores[1:] if s > scores[0]),
           "val_scores": scores, "spent": spent()}, open(SPEC["work"] + "/result.json", "w"), indent=2)
print("gepa done", spent(), flush=True)
