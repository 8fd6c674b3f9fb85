"""The synthesis loop: a tree of harness versions refined by Thompson sampling (the paper's REx
search), plus the ``ratchet`` method's additions for small models.

One iteration: pick a node (Thompson), let the critic sample its failed steps, decide which
function to refine, prompt the refiner (``samples`` times for the ratchet method), extract and
judge every sample, store every one (rejected and failed ones too), add the best to the tree, and
checkpoint the tree, the RNG state and the budget used. A killed run resumes from the checkpoint
and, with a deterministic model, reaches the same result. Stops at h = 1.0, after ``iterations``
refinements, or when the call / token / time budget is spent. Each of the ratchet method's
additions is a component (``ideas.py``) the loop asks at fixed points; the loop reads no flag.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ratchet.autoharness import critic
from ratchet.envs import harnesslib as lib
from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.decompose import Decomposer
from ratchet.autoharness.dense import dense_of, harness_value
from ratchet.autoharness.evaluate import LegalityEvaluator, policy_value
from ratchet.autoharness.ideas import Decompose, Idea, Lesson, Request, components
from ratchet.autoharness.prompts import asks_one_function, synthesis_prompt
from ratchet.autoharness.refine import REQUIRED, check_signatures, which_to_refine
from ratchet.autoharness.runtime import RuntimeFactory
from ratchet.envs.explore import EnvFactory, Transition, harvest, listed_states
from ratchet.envs.grammar import infer_grammar
from ratchet.autoharness.tree import Node, Tree, select_action
from ratchet.autoharness.views import BoardView, choose_view
from ratchet.envs.answers import extract_code
from ratchet.contracts import BudgetExceeded, Candidate, Evaluation, Failure, Model, RatchetError
from ratchet.models.journal import JournaledModel
from ratchet.models.request import context_window, continued
from ratchet.store.files import rng_from_json, rng_to_json

CHECKPOINT = "autoharness"
KIND = "autoharness.harness"
#: The refiner's replies, each on disk before it is used (the engine's journal, see ``JournaledModel``).
REPLIES = "autoharness/replies.jsonl"
#: What a request that does not fit the refiner's context window gives up, a step at a time, until
#: it fits (an int keeps that many of a list): failed steps first (each shows a board), then the
#: extra example boards, the labelled actions and worked example, the sample board, the expected
#: list, and the one-function request's examples last (they are what it asks about). Measured: a
#: 64-cell board game's whole-harness refinement was 4,700 tokens with the 1.5B's tokenizer, past
#: its 4,096-token window.
SHRINK: tuple[dict[str, Any], ...] = (
    {"failures": 2}, {"more_examples": 0}, {"failures": 1}, {"labelled": 0, "few_shot": False}, {"sample_board": None},
    {"expected": 0}, {"scaffold_examples": 1}, {"failures": 0},
)


class RunLog(Protocol):
    """The part of the run store the search writes to (``ratchet.store.Run``)."""

    def add_candidate(self, candidate: Candidate, status: str = ...) -> Any: ...
    def set_candidate_status(self, candidate_id: str, status: str, score: float | None = None) -> Any: ...
    def add_evaluation(self, evaluation: Evaluation) -> Any: ...
    def checkpoint(self, name: str, obj: Any) -> Any: ...
    def load_checkpoint(self, name: str) -> Any: ...
    def append_jsonl(self, relpath: str, record: dict[str, Any]) -> Any: ...
    def read_jsonl(self, relpath: str) -> list[dict[str, Any]]: ...
    def set_status(self, status: str, summary: dict[str, Any] | None = None) -> Any: ...


@dataclass
class Judgement:
    """What evaluating one candidate found."""

    h: float
    status: str  # "evaluated" or "failed" (the code does not load or lacks a function)
    metrics: dict[str, float]
    failures: list[Failure]


@dataclass
class SearchResult:
    best_id: str | None
    best_code: str | None
    best_h: float
    iterations: int
    calls: int
    tokens: int
    wall_s: float
    stop_reason: str
    nodes: int
    history: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The run's status summary once the search has stopped (the pipeline writes the same)."""
        return {"best_h": self.best_h, "stop_reason": self.stop_reason, "calls": self.calls}


class Synthesis:
    """One resumable AutoHarness search. Everything it learns goes to ``run``."""

    def __init__(
        self,
        config: AutoHarnessConfig,
        model: Model,
        run: RunLog,
        env_factory: EnvFactory,
        runtime_factory: RuntimeFactory,
        *,
        hint_env_factory: EnvFactory | None = None,
        description: str = "",
        library_seeds: Sequence[dict[str, Any]] = (),
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        ideas: Sequence[Idea] | None = None,
    ) -> None:
        self.cfg, self.model, self.run, self.description, self.library_seeds = config, model, run, description, list(library_seeds)
        self.env_factory, self.hint_env_factory, self.runtime_factory = env_factory, hint_env_factory, runtime_factory
        self.on_progress = on_progress or (lambda info: None)
        # The method's components (``ideas.components``), or a list of one's own to swap or ablate ideas.
        self.ideas: list[Idea] = list(components(config) if ideas is None else ideas)
        self.samples = next((n for n in (i.samples() for i in self.ideas) if n is not None), 1)
        self.state: dict[str, Any] = {}
        self.tree = Tree()
        self.rng = random.Random(config.rng_seed)
        self.transitions: list[Transition] = []
        self.grammar = infer_grammar(description)
        self.listed: list[tuple[str, list[str]]] = []
        self.codes: dict[str, str] = {}
        self.failures: dict[str, list[Failure]] = {}
        self.replies = JournaledModel(model, run, REPLIES)

    # ---------------------------------------------------------------- state

    def _save(self) -> None:
        self.state.update(
            tree=self.tree.to_json(),
            rng=rng_to_json(self.rng.getstate()),
            codes=self.codes,
            failures={k: [f.to_record() for f in v[:40]] for k, v in self.failures.items()},
        )
        self.run.checkpoint(CHECKPOINT, self.state)

    def _load(self) -> bool:
        try:
            saved = self.run.load_checkpoint(CHECKPOINT)
        except (FileNotFoundError, KeyError):
            saved = None
        if not saved:
            return False
        self.state = dict(saved)
        self.tree = Tree.from_json(saved["tree"])
        self.rng.setstate(rng_from_json(saved["rng"]))
        self.codes = dict(saved["codes"])
        self.failures = {k: [Failure.from_record(f) for f in v] for k, v in saved["failures"].items()}
        self.set_transitions([Transition.from_json(t) for t in saved.get("transitions", [])])
        for idea in self.ideas:
            idea.load(self, saved)
        return True

    @property
    def decomposer(self) -> Decomposer | None:
        """The decomposition component's state, when that idea is on (reports read it)."""
        return next((i.decomposer for i in self.ideas if isinstance(i, Decompose)), None)

    # ---------------------------------------------------------------- budget

    def _budget_left(self) -> str | None:
        b = self.cfg.budget
        if self.state["calls"] >= b.max_calls:
            return "call budget"
        if self.state["tokens"] >= b.max_tokens:
            return "token budget"
        if self.state["elapsed_s"] + (time.monotonic() - self._started) >= b.max_seconds:
            return "time budget"
        return None

    # ---------------------------------------------------------------- judging

    def set_transitions(self, transitions: list[Transition]) -> None:
        """The labelled transitions the search judges and teaches with (harvested or loaded)."""
        self.transitions = transitions
        self.listed = listed_states(self.transitions)
        # The game's action format, from its rules, its error messages and the actions it accepted.
        self.grammar = infer_grammar([self.description, *dict.fromkeys(t.reason for t in transitions if t.reason)],
                                     [t.action for t in transitions if t.legal][:20])
        for idea in self.ideas:
            idea.ready(self)

    def harvest_summary(self) -> dict[str, Any]:
        """What exploring the game found: labelled legal and illegal transitions, the states with a
        full legal list (printed, or found by trying the whole grammar) and the action grammar."""
        return {"legal": sum(t.legal for t in self.transitions), "illegal": sum(not t.legal for t in self.transitions),
                "listed_states": len(self.listed), "grammar": self.grammar.describe()}

    def judge(self, code: str) -> Judgement:
        problem = check_signatures(code)
        if problem:
            failure = Failure("code_error", problem, detail={"function": "both", "board": "", "action": None, "verdict": None})
            return Judgement(0.0, "failed", {"legal_rate": 0.0}, [failure])
        with self.runtime_factory({"harness.py": code}) as runtime:
            metrics, failures = self._checks(runtime, code)
            legality = self.legality()
            stats = legality.lockstep(runtime, legality.tasks()).total
            # A candidate that never got a step in has shown nothing: it scores as illegal.
            rate = 0.0 if stats.legal_rate is None else stats.legal_rate
            metrics.update(legal_rate=rate, steps=float(stats.steps), games=float(stats.games))
            failures += stats.failures
            primary = rate
            if self.cfg.mode == "policy":
                metrics["policy_value"] = primary = policy_value(stats)
            return Judgement(harness_value(primary, metrics), "evaluated", metrics, failures)

    def legality(self) -> LegalityEvaluator:
        """The search's legality judge (an engine Evaluator), with the game's action shape as known now."""
        return LegalityEvaluator(self.env_factory, self.runtime_factory, self.cfg.search_seeds[: self.cfg.eval_envs],
                                 self.cfg.eval_steps, self.cfg.step_cap, self.grammar.describe(), self.cfg.env)

    def _checks(self, runtime: Any, code: str) -> tuple[dict[str, float], list[Failure]]:
        metrics: dict[str, float] = {}
        failures: list[Failure] = []
        for idea in self.ideas:  # dense checks, in the components' order
            idea.check(self, runtime, code, metrics, failures)
        return metrics, failures

    def dense_score(self, code: str) -> float | None:
        """The mean of the components' dense checks alone (no rollout): a cheap screen for code
        proposed without a model call. None when the code does not load or nothing checks densely."""
        if check_signatures(code):
            return None
        with self.runtime_factory({"harness.py": code}) as runtime:
            return dense_of(self._checks(runtime, code)[0])

    # ---------------------------------------------------------------- proposing

    def _prompt(self, code: str | None, shown: list[Failure], pool: list[Failure], refine: str, metrics: dict[str, float],
                whole: bool = False) -> tuple[list, list[Failure], str | None]:
        """The refiner's messages for this node, the failures they show and the one function they ask
        for (None: the whole harness), cut to the refiner's
        context window (``SHRINK``) when the whole request does not fit."""
        lesson = Lesson.of(self.transitions, self.listed)
        examples = [t.action for t in self.transitions if t.legal][:6] or list(dict.fromkeys(lib.bracketed(self.description)))[:4]
        score_line = ""
        if code is not None and metrics:
            score_line = "Score of the current code: " + ", ".join(f"{k} {v:.2f}" for k, v in metrics.items() if k in ("legal_rate", "unit_accuracy"))
        options: dict[str, Any] = dict(helper_library=False, few_shot=False, sample_board=None, labelled=[], scaffold=False,
                                       expected=[], more_examples=[], scaffold_examples=[])
        for idea in self.ideas:
            idea.prompt(self, options, lesson, shown)
        if whole:  # the whole harness, the paper's request (``Idea.whole_harness``)
            options.update(scaffold=False, scaffold_examples=[], body_only=False, expected=[], more_examples=[])
        options["failures"] = shown
        window = context_window(self.model)  # None: the model does not say; every request fits
        for less in ({}, *SHRINK):
            options.update({k: options[k][:v] if type(v) is int else v for k, v in less.items()})
            messages = synthesis_prompt(
                game=self.cfg.env, description=self.description, action_examples=examples, mode=self.cfg.mode,
                code=code, refine=refine, error_summary=critic.summarize(pool), score_line=score_line,
                expected_complete=lesson.complete, view=self.view(), **options,
            )
            if window is None or window.count_tokens(messages) + self.cfg.max_new_tokens <= window.context_tokens:
                asks = "legal_moves" if asks_one_function(code, options["scaffold"], options["scaffold_examples"]) else None
                return messages, options["failures"], asks
        raise RatchetError(f"{self.cfg.env}: the refiner's shortest request is {window.count_tokens(messages)} tokens, and "
                           f"{self.model.name} reads {window.context_tokens} with {self.cfg.max_new_tokens} of them for the reply",
                           hint="use a model with a larger context window (e.g. local:NAME?n_ctx=8192) or lower max_new_tokens")

    def view(self) -> BoardView:
        """What the scaffolded legal_moves is called with (``views.choose_view``), read from the listed states."""
        return choose_view(self.listed or [(t.board, []) for t in self.transitions[:5]])

    def _ask(self, messages: list, sample: int, max_tokens: int | None = None) -> tuple[str, int]:
        temperature = self.cfg.first_temperature if sample == 0 else self.cfg.temperature
        kwargs: dict[str, Any] = dict(temperature=temperature, max_tokens=max_tokens or self.cfg.max_new_tokens,
                                      seed=self.cfg.rng_seed * 100_003 + self.state["calls"])
        for idea in self.ideas:
            idea.ask(self, kwargs)
        # On disk before it is used; after a kill the resumed run replays it instead of asking again.
        reply = self.replies.complete(messages, **kwargs)
        tokens = reply.usage.prompt_tokens + reply.usage.completion_tokens
        self.state["calls"] += 1
        self.state["tokens"] += tokens
        # A request ending in an assistant prefix gets its continuation: the answer is both.
        return continued(messages, reply.text), tokens

    def _store(self, code: str, parent: str | None, status: str, judgement: Judgement | None, **meta: Any) -> str:
        cand = Candidate.from_files(KIND, {"harness.py": code}, parent_id=parent, **meta)
        self.run.add_candidate(cand, status="proposed")  # idempotent: the same code keeps its first record
        if judgement is not None:
            self.run.add_evaluation(Evaluation(cand.id, "search", judgement.h, metrics=judgement.metrics, failures=judgement.failures[:20]))
            self.run.set_candidate_status(cand.id, status, judgement.h)
        else:
            self.run.set_candidate_status(cand.id, status, None)
        return cand.id

    def _expand(self, parent_id: str | None, iteration: int) -> list[tuple[str, Judgement]]:
        """One refinement (or the root when ``parent_id`` is None): returns judged samples."""
        code = self.codes.get(parent_id) if parent_id else None
        pool = self.failures.get(parent_id, []) if parent_id else []
        shown = critic.sample_failures(pool, self.rng, self.cfg.max_failures_shown)
        refine = which_to_refine(shown) if parent_id else "both"
        metrics = self.state["metrics"].get(parent_id, {}) if parent_id else {}
        self.state["parent"] = parent_id
        request = next((r for r in (i.request(self, code, pool, metrics) for i in self.ideas) if r is not None), None)
        if request is None:
            request = self._default_request(parent_id, code, shown, pool, refine, metrics)
        refine, shown, messages = request.refine, request.shown, request.messages
        judged: list[tuple[str, Judgement]] = []
        # A fresh root (a root after the first iteration) skips the low first temperature: the
        # first root already had that near-greedy answer.
        fresh = parent_id is None and iteration > 0
        sample = repeats = 0
        while sample < self.samples:
            if self._budget_left():
                break
            asked = messages
            for idea in self.ideas:  # after a repeated program, a component may change the request
                asked = idea.resample(self, asked, repeats)
            self.state["repeats"] = repeats
            text, tokens = self._ask(asked, sample + 1 if fresh else sample, request.max_tokens)
            new_code = request.build(text)
            meta = dict(prompt=asked, response=text, failures_shown=[f.to_record() for f in shown], refine=refine, iteration=iteration,
                        sample=sample, method=self.cfg.method, tokens=tokens)
            if any([idea.replied(self, parent_id, request, new_code) for idea in self.ideas]):
                # A component wants this node's request asked differently from now on (e.g. the
                # whole harness after a one-function reply without a body).
                request = self._default_request(parent_id, code, shown, pool, refine, metrics)
                messages = request.messages
            if new_code is None:
                cid = self._store(text or "# (empty response)\n", parent_id, "failed", None, **meta, error="no code in the response")
                self.state["history"].append({"iteration": iteration, "candidate": cid, "h": None, "status": "failed"})
                sample += 1
                continue
            # A program already judged (its parent's copied back, a sibling's) is not judged again
            # and does not use up a sample, up to ``samples`` repeats per refinement.
            repeat = next((r for r in (i.repeats(self, new_code) for i in self.ideas) if r is not None), None)
            if repeat is not None and repeats < self.samples:
                repeats += 1
                self.state["history"].append({"iteration": iteration, "candidate": repeat, "h": None, "status": "repeat"})
                continue
            sample += 1
            cid, judgement = self._judged(new_code, parent_id, meta, iteration, "evaluated")
            judged.append((cid, judgement))
            if judgement.h >= 1.0:
                break
        return judged + self._offspring(judged)

    def _default_request(self, parent_id: str | None, code: str | None, shown: list[Failure], pool: list[Failure],
                         refine: str, metrics: dict[str, float]) -> Request:
        """The paper's request (with the components' additions): the one-function request where the
        scaffold applies, the whole harness where a component says so for this node."""
        whole = any([idea.whole_harness(self, parent_id) for idea in self.ideas])
        if whole and code is not None and "def legal_moves" in code:
            # A scaffolded node asked for the whole harness: the first request again, no template
            # (its legal_moves would be carried into code that no longer calls it).
            code, shown, pool, refine, metrics = None, [], [], "both", {}
        template = None
        if code is None and not whole:
            template = next((t for t in (i.template(self) for i in self.ideas) if t is not None), None)
        messages, shown, asks = self._prompt(code, shown, pool, refine, metrics, whole)
        return Request(refine, shown, messages, lambda text: extract_code(text, previous=code or template, required=REQUIRED),
                       asks=asks)

    def _judged(self, code: str, parent_id: str | None, meta: dict[str, Any], iteration: int, label: str) -> tuple[str, Judgement]:
        judgement = self.judge(code)
        cid = self._store(code, parent_id, judgement.status, judgement, **meta)
        self.codes[cid] = code
        self.failures[cid] = judgement.failures[:40]
        self.state["metrics"][cid] = judgement.metrics
        status = judgement.status if label == "evaluated" else label
        self.state["history"].append({"iteration": iteration, "candidate": cid, "h": judgement.h, "status": status})
        return cid, judgement

    def _offspring(self, judged: list[tuple[str, Judgement]]) -> list[tuple[str, Judgement]]:
        """Code the components propose without a model call from each judged sample (e.g. program
        repair), judged in turn; one that scores higher than its origin is tried again (3 rounds at
        most). Returns them for the tree's choice among the refinement's candidates."""
        out: list[tuple[str, Judgement]] = []
        for origin_id, origin in sorted(judged, key=lambda cj: -cj[1].h):
            current, current_h = origin_id, origin.h
            for _ in range(3):
                if current_h >= 1.0 or any(j.h >= 1.0 for _, j in out):
                    return out
                better: tuple[str, Judgement] | None = None
                for code, why in [o for idea in self.ideas for o in idea.offspring(self, current)]:
                    if self._budget_left() == "time budget":  # no model call: only time is spent
                        return out
                    cid, judgement = self._judged(code, current, {"origin": why, "iteration": self.state["iteration"]},
                                                  self.state["iteration"], "repair")
                    out.append((cid, judgement))
                    if judgement.h > (better[1].h if better else current_h):
                        better = (cid, judgement)
                if better is None:
                    break
                current, current_h = better[0], better[1].h
        return out

    def _adopt(self, parent_id: str | None, judged: list[tuple[str, Judgement]]) -> str | None:
        """The best sample enters the tree (its id is returned); the others stay in the store as rejected."""
        if parent_id is None:  # the evidence of the fresh-root arm
            self.state.setdefault("root_scores", []).append(max((j.h for _, j in judged), default=0.0))
        if not judged:
            if parent_id in self.tree.nodes:
                self.tree.nodes[parent_id].refinements += 1
            return None
        best_id, best = max(judged, key=lambda cj: cj[1].h)
        for cid, j in judged:
            if cid != best_id and j.status == "evaluated":
                self.run.set_candidate_status(cid, "rejected", j.h)
        self.tree.add(best_id, parent_id, best.h)
        return best_id

    # ---------------------------------------------------------------- the loop

    def run_search(self) -> SearchResult:
        self._started = time.monotonic()
        if self._load():
            self.replies.resume(self.state["calls"])  # replies of the iteration a kill interrupted
        else:
            self.state = {"iteration": 0, "calls": 0, "tokens": 0, "elapsed_s": 0.0, "metrics": {}, "history": [], "stop_reason": None}
            if any(idea.harvests for idea in self.ideas):
                # Examples for the prompt come from the same exploration; scoring on them as unit
                # tests is the ``transitions`` idea alone.
                self.set_transitions(harvest(self.env_factory, self.hint_env_factory, self.cfg.search_seeds,
                                             self.cfg.transitions_per_seed, random.Random(self.cfg.rng_seed)))
                self.state["transitions"] = [t.to_json() for t in self.transitions]
                self.state["harvest"] = self.harvest_summary()
                for idea in self.ideas:
                    idea.start(self)
            self._save()
        try:
            self._loop()
        except BudgetExceeded as exc:  # the shared accountant's limit (e.g. across a batch)
            self.state["stop_reason"] = f"budget: {exc}"
        self.state["elapsed_s"] += time.monotonic() - self._started
        self._started = time.monotonic()
        self._save()
        best = self.tree.best()
        result = SearchResult(
            best.candidate_id if best else None, self.codes.get(best.candidate_id) if best else None,
            best.h if best else 0.0, self.state["iteration"], self.state["calls"], self.state["tokens"],
            self.state["elapsed_s"], self.state["stop_reason"] or "iterations", len(self.tree), self.state["history"],
        )
        # Every way out of the loop above is a finished search; a crash propagates and leaves the
        # run "running" (resumable).
        self.run.set_status("done", result.summary())
        return result

    def _loop(self) -> None:
        if not self.tree.nodes and not self.state.get("seeded"):
            for entry in [e for idea in self.ideas for e in idea.seeds(self)]:
                cid, judgement = entry.get("judged") or self._judged(entry["code"], None, {"origin": f"library:{entry.get('env')}", "iteration": 0}, 0, "library")
                self.tree.add(cid, None, judgement.h)
            self.state["seeded"] = True
            self._save()
        while True:
            best = self.tree.best()
            # Until a root is in the tree only the budget stops the search; then h = 1.0 and the iterations too.
            reason = ("solved (h = 1.0)" if best is not None and best.h >= 1.0 else
                      "iterations" if best is not None and self.state["iteration"] >= self.cfg.iterations else self._budget_left())
            if reason:
                self.state["stop_reason"] = reason
                return
            if best is None:
                self._adopt(None, self._expand(None, 0))
            else:
                node = self._choose()
                parent_id = node.candidate_id if node is not None else None
                self.state["iteration"] += 1
                self._adopt(parent_id, self._expand(parent_id, self.state["iteration"]))
                after = self.tree.best()
                self.state["stalled"] = 0 if after is not None and after.h > best.h else self.state.get("stalled", 0) + 1
            self._save()
            self._progress()

    def _choose(self) -> Node | None:
        """The node to refine next by Thompson sampling, or None: sample a fresh root (only with
        a component's fresh-root arm, which draws after the nodes)."""
        if any(idea.restart(self) for idea in self.ideas):
            self.state["stalled"] = 0
            self.state["restarts"] = self.state.get("restarts", 0) + 1
            return None
        arm = next((a for a in (i.fresh_arm(self) for i in self.ideas) if a is not None), None)
        return select_action(self.tree, self.rng, self.cfg.thompson_c, arm)

    def _progress(self) -> None:
        best = self.tree.best()
        self.on_progress({"iteration": self.state["iteration"], "best_h": best.h if best else 0.0, "calls": self.state["calls"],
                          "tokens": self.state["tokens"], "nodes": len(self.tree)})

