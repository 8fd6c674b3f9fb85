"""The player's workflow (editable by the engine): one model call per move, the guess read from the reply.

Each move is one run of this step function in the sandbox. ``state["task"]`` is
{"game", "observation", "feedback", "turn"}; the workflow returns {"call_model": messages} first,
then {"answer": move} once the reply is in ``state["events"]``.
"""

import re

MAX_OBSERVATION = 1500
GUESS = re.compile(r"\[\s*(\d+)\s*\]")


def step(state):
    task, events = state["task"], state["events"]
    replies = [e["reply"] for e in events if e["kind"] == "model"]
    if not replies:
        user = task["observation"][-MAX_OBSERVATION:]
        if task.get("feedback"):
            user += "\n\n" + task["feedback"]
        return {"call_model": [{"role": "system", "content": state["files"].get("prompts/system.md", "")},
                               {"role": "user", "content": user}], "max_tokens": 12}
    found = GUESS.search(replies[-1]) or re.search(r"\d+", replies[-1])
    return {"answer": f"[{found.group(1) if found.groups() else found.group(0)}]" if found else replies[-1]}
