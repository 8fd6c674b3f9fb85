"""The player's workflow (editable by the engine): one model call per move, then ``legal_move``
turns the model's reply into the move sent to the game.

Each move is one run of ``step`` in the sandbox. ``state["task"]`` is {"game", "observation",
"feedback", "turn"} (the observation holds the rules and the game so far: each guess and its
"higher"/"lower" hint); the workflow returns {"call_model": messages} first, then
{"answer": move} once the reply is in ``state["events"]``.
"""

import re

MAX_OBSERVATION = 1500
MAX_TOKENS = 12
GUESS = re.compile(r"\[\s*(\d+)\s*\]")


def legal_move(reply, observation):
    """The move sent to the game: the first number in square brackets in the reply (else its first
    number), written as the game wants it, ``[n]``. It does not check the move against the game."""
    found = GUESS.search(reply) or re.search(r"\d+", reply)
    if found is None:
        return reply
    return "[" + (found.group(1) if found.groups() else found.group(0)) + "]"


def step(state):
    task, events = state["task"], state["events"]
    replies = [e["reply"] for e in events if e["kind"] == "model"]
    if not replies:
        user = task["observation"][-MAX_OBSERVATION:]
        if task.get("feedback"):
            user += "\n\n" + task["feedback"]
        return {"call_model": [{"role": "system", "content": state["files"].get("prompts/system.md", "")},
                               {"role": "user", "content": user}], "max_tokens": MAX_TOKENS}
    return {"answer": legal_move(replies[-1], task["observation"])}
