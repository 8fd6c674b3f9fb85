"""Verdicts become training signal: every sample a harness search asked the model for is a judged turn.

Why: the engine judges every proposal with a program (the score its code earned, the failures
the environment reported), which is a better label than a judge reading a user's next message,
and the online learner already trains on judged turns. So a finished engine run (AutoHarness on
the engine, or ``ratchet evolve`` with the ``critic_refiner`` proposer) is read into the same
:class:`~ratchet.online.records.Turn` / :class:`~ratchet.online.records.Judgement` pairs the
server's turns become, and fed to the same :class:`~ratchet.online.queue.TurnQueue`: the one
trainer learns from both, with Binary RL, OPD or both (``trainer.signal``).

What is read: the run's ``evolve/samples.jsonl`` (:data:`~ratchet.evolve.proposers.critic.SAMPLES_FILE`),
one record per critic/refiner step: the request, and per sample the reply, its code's hash, its
screened score and why it was unusable; and the archive (the kept sample's candidate, its results
and the gate's decision). Proposers that record no samples (the reflective, mutation, diff,
agentic and merge proposers) give no turns. This is the one module of ``online`` that reads the engine's
records (``evolve.archive``): it is where the two loops meet, and the engine imports nothing of it.

A sample's **score** is what its code earned on the scale its request's samples share:

* a sample that made no new program (no code in the reply, the parent's code unchanged) scores 0:
  as a proposal it is worth nothing, whatever the parent it copies scores;
* a screened sample scores its screen (the refiner's cheap check in [0, 1], e.g. the share of
  explored states where ``legal_actions`` is right), the kept one too, so all screened samples of a
  request compare on one scale; a repeat of an earlier sample's code scores what that code screened;
  a sample the step repaired without the model (``repair`` in its record) scores what the model
  wrote, its hint says which small change scored how much, and when the repaired code was kept its
  evaluation is the sample's;
* an unscreened kept sample (``samples: 1``, or a refiner that cannot screen) scores its
  candidate's held-in mean h (the search split's when it has none; 0 when it was never evaluated).

Its **reward** is +1 / -1 when its score is above / below the mean of the *other* samples of the
same request, 0 when equal or when it is the request's only sample (0 is "no Binary RL signal": the
queue keeps it for OPD only when it has a hint). All samples of one request share a session id
(the run and a hash of the request), so a held-out share of the queue holds out whole requests.

Its **hint** (OPD's hindsight) is what the evaluation revealed, short: the kept sample's h, the
gate's decision and its failures by error type; a screened sample's screen against the best of its
request, with what the screen found wrong (error types and one counterexample) where the refiner
says (:class:`~ratchet.evolve.proposers.critic.ExplainingRefiner`); an unusable one's reason. Judgements say ``source="judge"`` (the record type allows only
``judge`` and ``feedback``) and ``judge="verdict:<proposer>"``.

Token ids: given a :class:`VerdictPolicy` (the trainer is one), the prompt is the request through
the policy's chat template (:func:`~ratchet.online.scoring.chat_ids`), the reply its tokens, and the
log-probs are *recomputed* by that policy: the model that wrote the reply (llama.cpp, sampled)
kept none. The trainer uses them as the behaviour policy of its importance weight
``min(π_prox / π_serve, cap)``, so recomputed at the trainer's own weights the weight is 1: the
reply is trained as if the trainer had sampled it (no off-policy correction; the GGUF's
quantization gap is not measured). Score with the policy at the version the run's proposer ran
(``policy_version``). The trainer keeps the last ``max_seq_len`` tokens of a long prompt, so its
proximal log-probs there differ from those recomputed over the whole prompt: raise
``trainer.max_seq_len`` for harness requests (often 2-3k tokens). Without a policy the turns carry
no token ids, and the trainer skips them as ``empty``: such turns are for reading, not training.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ratchet.contracts import RatchetError
from ratchet.evolve.archive import Archive
from ratchet.evolve.proposers.critic import SAMPLES_FILE, code_hash, summarize
from ratchet.online.records import Judgement, Turn
from ratchet.online.scoring import chat_ids

#: The longest hint a verdict gives (characters): the teacher reads it appended to the request.
HINT_CHARS = 600
#: ``@v3`` or ``@v3+DIGEST`` in a spec or a recorded model name.
_NAMED = re.compile(r"@v(\d+)(?:\+([0-9a-f]{4,64}))?\b")
#: A spec that names a version by what it points at, resolved when the run loaded it.
_ALIAS = re.compile(r"@(?:current|latest)\b")


class VerdictPolicy(Protocol):
    """What tokenizes and scores a verdict's reply: a tokenizer with the served model's chat
    template and per-token log-probs of replies (:class:`~ratchet.online.trainer.Trainer` is one)."""

    tokenizer: Any

    def score(self, sequences: Sequence[list[int]], starts: Sequence[int], *, base: bool = False) -> list[Any]:
        """Per-token log-probs of ``sequences[i][starts[i]:]``."""
        ...


@dataclass(frozen=True)
class _Sample:
    """One sample of a step as this module reads it."""

    messages: list[dict[str, Any]]
    request_hash: str
    reply: str
    score: float
    hint: str
    outcome: str
    proposer: str
    at: float


def request_hash(messages: Sequence[dict[str, Any]]) -> str:
    """The request's identity: equal for the same messages, whatever the sampling parameters."""
    text = json.dumps([dict(m) for m in messages], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def turn_id(run_id: str, key: str, reply: str) -> str:
    """The judged turn's id of one sample: the run, its request (:func:`request_hash`) and its reply;
    a sample recorded twice (a step run again after a resume) has one."""
    return "verdict-" + hashlib.sha256(f"{run_id}\0{key}\0{reply}".encode()).hexdigest()[:24]


def recorded_model(run: Any) -> str | None:
    """The name of the model that answered the run's calls, as the run recorded it (its report's
    ``model``, else its first logged call's): ``local:NAME@v3+DIGEST`` for a weight version, whatever
    the spec said (``@current`` moves); None when the run recorded none."""
    report = run.read_json("report.json") or {}
    if report.get("model"):
        return str(report["model"])
    for call in run.read_jsonl("llm_calls.jsonl"):
        if call.get("model"):
            return str(call["model"])
    return None


def run_version(run: Any, versions: str | Path | None = None) -> int:
    """The weight version the run's replies were written by: the number its recorded model name
    says (``local:NAME@v3+DIGEST`` → 3; a spec of ``@current`` or ``@latest`` is recorded as the
    version it resolved to), else the number its spec names, else 0 (the base).

    With ``versions`` (a version store's directory) the recorded adapter digest is mapped back
    through that store: the number there of the version whose ``adapter.gguf`` has that digest (a
    store of other weights may hold them under another number). A digest that store does not hold
    is an error naming both: those replies were written by weights it never had."""
    spec = str((run.config or {}).get("model") or "")
    name = recorded_model(run) or ""
    found = _NAMED.search(name) or _NAMED.search(spec)
    if found is None:
        if _ALIAS.search(spec) and name:
            raise RatchetError(f"run {run.id} names {spec!r} but recorded its model as {name!r}, with no version",
                               hint="feed it with an explicit version (policy_version=)")
        return 0
    number, digest = int(found.group(1)), found.group(2)
    if versions is None or digest is None:
        return number
    from ratchet.online.versions import VersionStore
    from ratchet.online.weights import gguf_sha256

    for version in VersionStore(versions).list():
        if version.lora_gguf is not None and gguf_sha256(version.lora_gguf).startswith(digest):
            return version.number
    raise RatchetError(f"run {run.id}'s replies were written by adapter {digest} (v{number} of its store), which the "
                       f"version store {versions} does not hold",
                       hint="feed it to the serving run whose versions it ran with, or name the version (policy_version=)")


def relative_rewards(scores: Sequence[float]) -> list[int]:
    """+1 / -1 / 0 per score: above, below or equal to the mean of the *other* scores; 0 for a
    lone score (nothing to compare it with)."""
    if len(scores) < 2:
        return [0] * len(scores)
    total = sum(scores)
    out = []
    for s in scores:
        others = (total - s) / (len(scores) - 1)
        out.append(1 if s > others + 1e-9 else -1 if s < others - 1e-9 else 0)
    return out


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= HINT_CHARS else text[: HINT_CHARS - 1] + "…"


def _candidate_by_code(archive: Archive, surface: str, digest: str) -> Any:
    """The archived candidate whose ``surface`` is the code with this hash (the kept sample's child)."""
    for candidate in archive.candidates():
        text = candidate.files.get(surface)
        if candidate.parent_id is not None and text is not None and code_hash(text) == digest:
            return candidate
    return None


def _evaluated(archive: Archive, candidate: Any) -> tuple[float | None, str]:
    """The kept sample's score (held-in h, else the search split's) and what its evaluation revealed."""
    split = "heldin" if archive.results(candidate.id, "heldin") else "search"
    results = archive.results(candidate.id, split)
    h = archive.score(candidate.id, split) if results else None
    parent = archive.score(candidate.parent_id, split) if candidate.parent_id else None
    parts = [f"When your code was run it scored h {h:.2f}" + (f" (the code it replaced: {parent:.2f})"
                                                                if parent is not None else "") + "."
             if h is not None else "Your code was not run on any game."]
    decision = archive.decision(candidate.id)
    if decision is not None:
        parts.append(f"It was {'kept' if decision.accepted else 'rejected'}: {decision.reason}.")
    failures = [f for r in results for f in r.failures]
    if failures:
        parts.append(f"What failed: {summarize(failures)}.")
    return h, " ".join(parts)


def _read_samples(run: Any) -> list[_Sample]:
    archive = Archive(run)
    out: list[_Sample] = []
    for record in run.read_jsonl(SAMPLES_FILE):
        messages = [dict(m) for m in record["request"]]
        key = request_hash(messages)
        if messages and messages[-1].get("role") == "assistant":
            # A body-only request ends in the reply's opening, which the recorded reply already
            # starts with (models.request.continued): the turn is the request without it.
            messages = messages[:-1]
        samples = record["samples"]
        screens = {s["code"]: s["screen"] for s in samples if s.get("code") and s.get("screen") is not None}
        best = max(screens.values(), default=None)
        for s in samples:
            digest, reason = s.get("code"), s.get("reason")
            if s.get("screen") is not None:
                score = float(s["screen"])
                hint = (f"Before any game was played your code was checked on the game's explored states: it "
                        f"scored {score:.2f} of 1 (the best code written for this request scored {best:.2f}).")
                repair = s.get("repair") or {}
                if repair.get("code"):  # the step's repair climbed it without the model (evolve.proposers.repair)
                    hint += f" A small change ({'; '.join(repair['changes'])}) made it score {float(repair['after']):.2f}."
                kept = record.get("kept")
                if kept is not None and kept in (digest, repair.get("code")):
                    child = _candidate_by_code(archive, record["surface"], kept)
                    if child is not None:
                        hint += " " + _evaluated(archive, child)[1]
                if s.get("findings"):  # last: the games' verdict, where there is one, is clipped last
                    hint += f" What it got wrong: {s['findings']}."
            elif digest is not None and digest in screens:  # a repeat of an earlier sample's code
                score = float(screens[digest])
                hint = f"Your code repeated an earlier answer to this request, which scored {score:.2f} of 1."
            elif reason:
                score, hint = 0.0, f"Your reply gave no usable new code: {reason}."
            elif digest is not None and record.get("kept") in (digest, (s.get("repair") or {}).get("code")):
                child = _candidate_by_code(archive, record["surface"], record["kept"])
                h, hint = _evaluated(archive, child) if child is not None else (None, "Your code was not run.")
                if (s.get("repair") or {}).get("code"):  # fixed without the model before it was run
                    hint = f"A small change was made to your code first ({'; '.join(s['repair']['changes'])}). " + hint
                score = h or 0.0
            else:
                score, hint = 0.0, "Your reply was not scored."
            out.append(_Sample(messages, key, s["reply"], score, _clip(hint), reason or f"score {score:.4f}",
                               record.get("proposer", "critic_refiner"), float(record.get("at") or 0.0)))
    return out


def verdict_turns(run: Any, policy: VerdictPolicy | None = None, *,
                  policy_version: int | None = None) -> list[tuple[Turn, Judgement]]:
    """Every recorded proposer sample of ``run`` as a judged turn (see the module's docstring),
    oldest first; a sample recorded twice (a step run again after a resume) once. ``policy``:
    tokenizes the turns and recomputes their log-probs (None: no token ids, not trainable).
    ``policy_version``: the version of the weights that wrote the replies (default:
    :func:`run_version`, the one the run recorded, ``@current`` resolved)."""
    version = run_version(run) if policy_version is None else policy_version
    samples = _read_samples(run)
    groups: dict[str, list[_Sample]] = {}
    for s in samples:
        groups.setdefault(s.request_hash, []).append(s)
    seen: set[str] = set()
    pairs: list[tuple[Turn, Judgement]] = []
    for key, group in groups.items():
        unique: dict[str, _Sample] = {}
        for s in group:  # a step replayed after a resume recorded the same replies again
            unique.setdefault(turn_id(run.id, key, s.reply), s)
        rewards = relative_rewards([s.score for s in unique.values()])
        for (tid, s), reward in zip(unique.items(), rewards, strict=True):
            if tid in seen:
                continue
            seen.add(tid)
            turn = Turn(turn_id=tid, session_id=f"verdict:{run.id}:{key[:16]}", session_inferred=False,
                        turn_type="main", messages=s.messages, response_text=s.reply, prompt_token_ids=[],
                        response_token_ids=[], response_logprobs=[], policy_version=version, created_at=s.at)
            judgement = Judgement(turn_id=tid, reward=reward, votes=[reward], hint=s.hint,
                                  next_state=s.outcome, judge=f"verdict:{s.proposer}", source="judge")
            pairs.append((turn, judgement))
    pairs.sort(key=lambda p: p[0].created_at)
    return tokenized(pairs, policy) if policy is not None else pairs


def tokenized(pairs: list[tuple[Turn, Judgement]], policy: VerdictPolicy) -> list[tuple[Turn, Judgement]]:
    """The turns with the policy's prompt and reply ids and its log-probs of the reply (an empty
    reply keeps no ids: the trainer skips it as ``empty``)."""
    prompts = [chat_ids(policy.tokenizer, t.messages) for t, _ in pairs]
    replies = [[int(i) for i in policy.tokenizer.encode(t.response_text, add_special_tokens=False)] for t, _ in pairs]
    kept = [i for i, r in enumerate(replies) if r]  # an empty reply has nothing to score
    scored = policy.score([prompts[i] + replies[i] for i in kept], [len(prompts[i]) for i in kept]) if kept else []
    logprobs = {i: [float(x) for x in lp] for i, lp in zip(kept, scored, strict=True)}
    out = []
    for i, (turn, judgement) in enumerate(pairs):
        ids = replies[i] if i in logprobs else []
        out.append((replace(turn, prompt_token_ids=prompts[i], response_token_ids=ids,
                            response_logprobs=logprobs.get(i, [])), judgement))
    return out


def unfed(pairs: Sequence[tuple[Turn, Judgement]], queue: Any) -> list[tuple[Turn, Judgement]]:
    """The pairs whose turn ``queue`` does not hold yet (looked up by their sessions' turn ids)."""
    held: set[str] = set()
    for session in {t.session_id for t, _ in pairs}:
        held.update(queue.session_turn_ids(session))
    return [(t, j) for t, j in pairs if t.turn_id not in held]


def rejudge_interrupted(pairs: Sequence[tuple[Turn, Judgement]], queue: Any) -> int:
    """Give their judgement to the turns ``queue`` holds without one: a feed interrupted between
    writing the turns and their judgements left them ``pending``, which no judge takes (they have
    no next state); returns how many were judged now. The turns were stored with their token ids,
    so nothing is scored again."""
    judged: set[str] = set()
    held: set[str] = set()
    for session in {t.session_id for t, _ in pairs}:
        held.update(queue.session_turn_ids(session))
        judged.update(queue.session_judged_ids(session))
    missing = [j for t, j in pairs if t.turn_id in held and t.turn_id not in judged]
    for judgement in missing:
        queue.add_judgement(judgement)
    return len(missing)


def add_judged(queue: Any, pairs: Sequence[tuple[Turn, Judgement]]) -> None:
    """Add the turns and then their judgements: a main turn waits as ``pending`` (no judge takes
    it, having no next state) until its judgement makes it ``judged``, ready for the trainer."""
    queue.add_turns([t for t, _ in pairs])
    for _, judgement in pairs:
        queue.add_judgement(judgement)


def unusable(judgement: Judgement) -> bool:
    """Whether the verdict is that the reply gave no usable new code (no code, the parent's code
    unchanged, ...): its ``next_state`` is then the reason, not the sample's score."""
    return not judgement.next_state.startswith("score ")


def feed(run: Any, queue: Any, policy: VerdictPolicy | None = None, *, policy_version: int | None = None,
         skip: Collection[str] = ()) -> int:
    """Add ``run``'s verdict turns to ``queue`` (a :class:`~ratchet.online.queue.TurnQueue`) as
    judged turns; returns how many were new. Idempotent: a turn the queue already holds (by its
    id, a hash of the run, the request and the reply) is not added again, nor its judgement, and
    only new turns are tokenized and scored. ``skip``: turn ids not to feed (a feedback policy
    sent their failures to the harness, not the weights)."""
    pairs = [p for p in verdict_turns(run, policy_version=policy_version) if p[0].turn_id not in skip]
    rejudge_interrupted(pairs, queue)
    new = unfed(pairs, queue)
    if policy is not None and new:
        new = tokenized(new, policy)
    add_judged(queue, new)
    return len(new)


def trainer_policy(config: Any, versions_dir: str | Path) -> tuple[VerdictPolicy, int]:
    """A serving run's trainer (``config``: its :class:`~ratchet.online.trainer_config.TrainerConfig`,
    model and LoRA) at the weight version serving now, and that version's number. Verdicts scored
    by it and stamped with that version are, to the training loop, samples of its own current
    weights: importance weight 1, staleness 0. Loads the model in torch (tens of seconds)."""
    import importlib.util

    from ratchet.online.trainer import Trainer
    from ratchet.online.versions import VersionStore

    missing = [m for m in ("torch", "transformers", "peft") if importlib.util.find_spec(m) is None]
    if missing:
        raise RatchetError(f"scoring verdicts needs the training extra ({', '.join(missing)} missing)",
                           hint="pip install 'ratchet[learn]'")
    trainer = Trainer.from_config(config)
    store = VersionStore(versions_dir)
    number = store.current_number()
    version = store.get(number)
    if version.adapter_dir is not None:
        trainer.load_adapter(version.adapter_dir, number)
    return trainer, number


__all__ = ["HINT_CHARS", "VerdictPolicy", "add_judged", "feed", "recorded_model", "relative_rewards", "request_hash", "run_version",
           "rejudge_interrupted", "tokenized", "trainer_policy", "turn_id", "unfed", "unusable", "verdict_turns"]
