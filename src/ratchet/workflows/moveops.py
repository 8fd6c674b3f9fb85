"""moveops: operators for a move-level workflow, where each run of the workflow answers one move of
a one-player text game (``ratchet.evolve.suites.textarena``: the task is ``{"game", "observation",
"feedback", "turn"}``).

They are generators over the same step protocol as :mod:`flowops` (and use its ``generate``,
``sample_k`` and ``vote``), composed the same way::

    from flowops import as_step
    from moveops import extract_move, move_messages, vote_moves

    def workflow(task, files):
        replies = yield from sample_k(move_messages(task, files), k=3, max_tokens=24)
        chosen = vote_moves([m for m in (extract_move(r.text) for r in replies) if m])
        return chosen.code if chosen else replies[0].text

    step = as_step(workflow)

Standard library only: it travels into the sandbox beside ``flowops.py`` (a games run lists both in
``workflow.libraries``), where the project cannot be imported. A separate file rather than more of
``flowops``: that one is already past its size and holds the code operators; nothing here is about
code.
"""

from __future__ import annotations

import re

try:  # in the sandbox both libraries are top-level modules
    from flowops import generate, sample_k, vote
except ImportError:  # imported from the project (tests, the spec's checks)
    from ratchet.workflows.flowops import generate, sample_k, vote

__all__ = [
    "MAX_OBSERVATION",
    "avoid_refused",
    "extract_move",
    "move_messages",
    "normalized_move",
    "refused_moves",
    "review_move",
    "run_move_plan",
    "think",
    "vote_moves",
]

MAX_OBSERVATION = 1500
"""Most characters of the observation shown (its end: the latest board and messages)."""
MOVE = re.compile(r"\[([^\[\]\n]{1,60})\]")
#: Words with which a game says a move was refused (TextArena: "You attempted an invalid move").
REFUSAL = re.compile(r"invalid|illegal|not (?:a )?(?:valid|allowed|legal)", re.I)
#: A player's message in the observation (TextArena writes ``[Player] [7]``, or ``[Player 0] ...``).
PLAYER = re.compile(r"^\[Player[^\]]*\]\s*(.*)$")
THINK_PROMPT = ("Think step by step about the best next move: what the rules allow, what happened so far, "
                "what each choice leads to. Do not give the move yet.")
ANSWER_PROMPT = "Now reply with your next move only, in square brackets as the rules say."


def move_messages(task, files, notes="", system_file="prompts/system.md"):
    """The messages asking for the next move: the harness's system prompt, the end of the observation
    and the environment's feedback on a refused move; with ``notes`` (a :func:`think` reply) the
    reasoning as the model's own turn, then the request for the move alone."""
    user = task["observation"][-MAX_OBSERVATION:]
    if task.get("feedback"):
        user += "\n\n" + task["feedback"]
    system = files.get(system_file, "")
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    if notes:
        messages += [{"role": "assistant", "content": notes}, {"role": "user", "content": ANSWER_PROMPT}]
    return messages


def think(task, files, max_tokens=None):
    """One reasoning call before the move (think-then-answer); returns the reasoning's text, which
    :func:`move_messages` puts before the request for the move."""
    messages = move_messages(task, files)
    messages[-1] = {"role": "user", "content": messages[-1]["content"] + "\n\n" + THINK_PROMPT}
    reply = yield from generate(messages, max_tokens)
    return reply.text


def extract_move(reply):
    """The move in a reply as the games want it: the last ``[...]`` of the reply (a model that
    explains first states its move last), else a reply of one short line made ``[that line]``;
    None when it holds neither."""
    found = MOVE.findall(reply)
    if found:
        return "[" + found[-1].strip() + "]"
    line = reply.strip().strip(".").strip()
    if line and "\n" not in line and len(line) <= 20:
        return "[" + line + "]"
    return None


def normalized_move(move):
    """A move's form for voting and comparing: lower case, single spaces, no space inside the brackets."""
    return " ".join(move.lower().replace("[", " [ ").replace("]", " ] ").split()).replace("[ ", "[").replace(" ]", "]")


def vote_moves(moves):
    """Self-consistency: the move most replies agree on (normalized), ties to the earliest; a
    ``flowops.Selection`` (its ``code`` is the move), None for no moves. A plain function, no request."""
    return vote(moves, normalize=normalized_move)


def refused_moves(task):
    """The moves (normalized) the game already refused: a player's move (a ``[Player] ...`` line)
    whose next message from the game says invalid/illegal/not allowed, and the latest move when the
    task carries the environment's feedback on a refused one. The moves a refusal message suggests
    (``Use '[Hit]' or '[Stand]'``) are not refused: only what the player sent counts."""
    refused, pending, latest = set(), None, None
    for line in task.get("observation", "").splitlines():
        text = line.strip()
        if not text:
            continue
        player = PLAYER.match(text)
        if player:
            pending = latest = extract_move(player.group(1))
        elif pending is not None:
            if REFUSAL.search(text):
                refused.add(normalized_move(pending))
            pending = None
    if task.get("feedback") and latest:
        refused.add(normalized_move(latest))
    return refused


def avoid_refused(moves, task):
    """``moves`` reordered so that those the game has not refused come first (order kept within each
    group); all of them when every one was refused. A plain function, no request."""
    refused = refused_moves(task)
    return [m for m in moves if normalized_move(m) not in refused] + [m for m in moves if normalized_move(m) in refused]


def review_move(task, files, move, max_tokens=None):
    """Ask the model to check ``move`` against the rules in the observation; when it says wrong, ask
    once for a better move (two calls at most). Returns the revised move, or None when the review
    found nothing wrong or the revision held no move (the reviewed move stands)."""
    ask = move_messages(task, files)
    ask[-1] = {"role": "user", "content": ask[-1]["content"] + "\n\nProposed move: " + move +
               "\nCheck it against the rules above and the game so far. End with one line: "
               "VERDICT: ok, or VERDICT: wrong."}
    verdict = yield from generate(ask, max_tokens)
    said = re.findall(r"VERDICT:\s*(ok|wrong)", verdict.text, re.IGNORECASE)
    if said and said[-1].lower() == "ok":
        return None
    fix = ask + [{"role": "assistant", "content": verdict.text},
                 {"role": "user", "content": "Reply with a better move only, in square brackets as the rules say."}]
    reply = yield from generate(fix)
    revised = extract_move(reply.text)
    return revised if revised and normalized_move(revised) != normalized_move(move) else None


def run_move_plan(plan, task, files):
    """Run a move plan (a validated ``ratchet.workflows.movespec.MoveSpec`` as plain data) for one
    move; returns the move.

    The plan works on a pool of extracted moves whose first is the answer: ``think`` makes one
    reasoning call that every later ``sample`` sees; ``sample`` asks ``k`` times and adds the moves
    of the replies; ``vote`` puts the majority move first; ``avoid_refused`` puts first the moves the
    game has not refused yet; ``review`` checks the first move and puts a revised one in front.
    With no move extracted at all, the first reply is answered as it is (the game judges it)."""
    notes, pool, raw = "", [], []
    for op in plan:
        name = op["op"]
        if name == "think":
            notes = yield from think(task, files, op.get("max_tokens"))
        elif name == "sample":
            replies = yield from sample_k(move_messages(task, files, notes), op.get("k", 1), op.get("max_tokens"))
            raw += [r.text for r in replies]
            pool += [m for m in (extract_move(r.text) for r in replies) if m]
        elif name == "vote" and pool:
            chosen = vote_moves(pool)
            pool = [chosen.code] + [m for i, m in enumerate(pool) if i != chosen.index]
        elif name == "avoid_refused" and pool:
            pool = avoid_refused(pool, task)
        elif name == "review" and pool:
            revised = yield from review_move(task, files, pool[0], op.get("max_tokens"))
            if revised:
                pool.insert(0, revised)
    return pool[0] if pool else (raw[0].strip() if raw else "")
