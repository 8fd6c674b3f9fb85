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
