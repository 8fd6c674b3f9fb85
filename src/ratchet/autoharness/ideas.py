"""The ``ratchet`` method's ideas as components of the search: one small class per idea.

The search (:class:`ratchet.autoharness.search.Synthesis`) runs the paper's loop and asks its
components at fixed points, the hooks of :class:`Idea` (each a no-op there, so an idea overrides
only the one or two it is about). A method is a list of components: ``faithful`` is the empty
list, ``ratchet`` the list ``AutoHarnessConfig.ideas`` switches on (:func:`components`). Ideas can
be listed (:data:`IDEAS`), swapped (``Synthesis(ideas=...)``) and ablated (switch one off), which
is why they share one module of ~510 lines.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ratchet.autoharness import critic
from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.decompose import Decomposer
from ratchet.autoharness.evaluate import ENV_REJECTED
from ratchet.autoharness.prompts import is_long, scaffold_for, shortened
from ratchet.autoharness.transitions import check_legal_actions, listed_accuracy, score_is_legal
from ratchet.autoharness.views import examples
from ratchet.envs.aliases import infer_aliases
from ratchet.envs.explore import Transition, balanced_subset
from ratchet.contracts import Failure
from ratchet.envs.rules import fit_harvest, rejected_labels
from ratchet.evolve.selectors import pooled_arm
from ratchet.envs.answers import CODE_BLOCK_GRAMMAR, defined_functions, has_body
from ratchet.evolve.proposers.mutation import fixed, mutants, normalized

if TYPE_CHECKING:  # the search imports this module; the type only names what the hooks read
    from ratchet.autoharness.search import Synthesis


@dataclass
class Lesson:
    """What the harvested transitions teach in a prompt: a mid-game board with labelled actions,
    the legal actions known there (``complete``: the game's whole list) and two more listed states."""

    board: str | None = None
    labelled: list[tuple[str, bool, str | None]] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    complete: bool = False
    more: list[tuple[str, list[str]]] = field(default_factory=list)

    @classmethod
    def of(cls, transitions: Sequence[Transition], listed: Sequence[tuple[str, list[str]]]) -> Lesson:
        """The richest lesson: the earliest mid-game state with both legal and illegal labelled
        actions, three of each; without one, the first board alone."""
        by_state: dict[tuple[int, tuple[str, ...]], list[Transition]] = {}
        for t in transitions:
            by_state.setdefault((t.seed, t.prefix), []).append(t)
        rich = [k for k, group in by_state.items() if any(t.legal for t in group) and any(not t.legal for t in group) and len(k[1]) >= 2]
        if not transitions:
            return cls()
        if not rich:
            return cls(transitions[0].board, more=[st for st in listed if st[0] != transitions[0].board][-2:])
        group = by_state[min(rich, key=lambda k: len(k[1]))]  # min keeps the first of ties
        labelled = [t for t in group if not t.legal][:3] + [t for t in group if t.legal][:3]
        listed_here = list(group[0].listed)
        return cls(group[0].board, [(t.action, t.legal, t.reason) for t in labelled], listed_here or [t.action for t in group if t.legal],
                   bool(listed_here), [st for st in listed if st[0] != group[0].board][-2:])


@dataclass
class Request:
    """A refiner request an idea makes instead of the default prompt."""

    refine: str
    shown: list[Failure]
    messages: list
    build: Callable[[str], str | None]
    """Code from the reply text (None: no code in it)."""
    max_tokens: int | None = None
    asks: str | None = None
    """The one function the request asks for (``legal_moves``: the one-function request), or
    None: the whole harness or the idea's own parts."""


class Idea:
    """One idea of the search. Every hook is a no-op; an idea overrides the ones it is about."""

    name = "idea"
    summary = ""
    harvests = False
    """Whether the idea needs the labelled transitions harvested before the first call."""

    def ready(self, search: Synthesis) -> None:
        """The transitions are known (harvested, or loaded on resume)."""

    def start(self, search: Synthesis) -> None:
        """A fresh search, right after harvesting (not on resume)."""

    def load(self, search: Synthesis, saved: dict[str, Any]) -> None:
        """A resumed search, from its checkpoint."""

    def check(self, search: Synthesis, runtime: Any, code: str, metrics: dict[str, float], failures: list[Failure]) -> None:
        """Judge a candidate: add dense metrics (they join h) and counterexamples."""

    def prompt(self, search: Synthesis, options: dict[str, Any], lesson: Lesson, shown: Sequence[Failure]) -> None:
        """Add to the refiner prompt's options (``prompts.synthesis_prompt`` keywords)."""

    def request(self, search: Synthesis, code: str | None, pool: list[Failure], metrics: dict[str, float]) -> Request | None:
        """A request of the idea's own, or None for the default prompt."""
        return None

    def template(self, search: Synthesis) -> str | None:
        """Code a root reply fills in (its missing functions are kept from it)."""
        return None

    def samples(self) -> int | None:
        """Samples per refinement, or None (one)."""
        return None

    def ask(self, search: Synthesis, kwargs: dict[str, Any]) -> None:
        """Add generation parameters to every refiner call."""

    def seeds(self, search: Synthesis) -> list[dict[str, Any]]:
        """Harnesses ({"env", "code"}) the tree starts from, judged without a model call."""
        return []

    def fresh_arm(self, search: Synthesis) -> tuple[float, float] | None:
        """Beta parameters of a "sample a fresh root" arm in the node choice, or None."""
        return None

    def explain(self, wrong: list[Failure], listed: list[tuple[str, list[str]]]) -> list[Failure]:
        """Plain-words diagnoses of ``legal_actions``' wrong states, shown before them."""
        return []

    def repeats(self, search: Synthesis, code: str) -> str | None:
        """The id of an already judged candidate that ``code`` is the same program as, or None."""
        return None

    def resample(self, search: Synthesis, messages: list, repeats: int) -> list:
        """The request to send after ``repeats`` samples of this refinement repeated known code."""
        return messages

    def offspring(self, search: Synthesis, candidate_id: str) -> list[tuple[str, str]]:
        """Code ((code, origin) pairs) to judge without a model call, made from a judged candidate."""
        return []

    def restart(self, search: Synthesis) -> bool:
        """Whether the next expansion should be a fresh root instead of a refinement."""
        return False

    def replied(self, search: Synthesis, parent_id: str | None, request: Request, code: str | None) -> bool:
        """A reply to ``request`` (its code, None when it had none) for the refinement of
        ``parent_id`` (None: a root) has arrived; True asks the search to build this node's
        request again (``whole_harness`` may have changed) for the samples still to come."""
        return False

    def whole_harness(self, search: Synthesis, parent_id: str | None) -> bool:
        """Whether the refinement of ``parent_id`` (None: a root) asks for the whole harness
        instead of the one-function request."""
        return False


class Scaffold(Idea):
    name = "scaffold"
    summary = ("one function, legal_moves(cells), with real states as doctests, inside a fixed template; "
               "legal_actions checked against the game's legal lists")
    harvests = True

    def check(self, search, runtime, code, metrics, failures):
        if "def legal_actions" in code and search.listed:
            wrong = check_legal_actions(runtime, search.listed)
            metrics["legal_actions_accuracy"] = listed_accuracy(wrong, search.listed)
            failures += [f for idea in search.ideas for f in idea.explain(wrong, search.listed)]
            failures += wrong[:4]

    def prompt(self, search, options, lesson, shown):
        options.update(scaffold=True, expected=lesson.expected, more_examples=lesson.more,
                       scaffold_examples=self.examples(search, shown))

    def examples(self, search: Synthesis, shown: Sequence[Failure] = ()) -> list[tuple[Any, list[str]]]:
        """Three states with the game's full legal list, as legal_moves' doctest examples; states
        a candidate got wrong (``shown``) come first."""
        listed = search.listed
        states = [(f.detail["board"], f.detail["expected"]) for f in shown if f.kind == "wrong_legal_actions"][:2]
        states += listed[len(listed) // 3 :: max(1, len(listed) // 4)][:3] or listed[:3]
        return examples(search.view(), states + listed, len(states))

    def template(self, search):
        return scaffold_for(search.view(), search.grammar.form, search.state.get("aliases")) if search.listed else None


class Transitions(Idea):
    name = "transitions"
    summary = "labelled transitions (board, action, legal?, reason) from exploring the game, scored as unit tests"
    harvests = True

    def __init__(self, rng_seed: int = 0, size: int = 200) -> None:
        self.rng_seed, self.size = rng_seed, size
        self.unit_set: list[Transition] = []

    def ready(self, search):
        self.unit_set = balanced_subset(search.transitions, self.size, random.Random(self.rng_seed + 1)) if search.transitions else []

    def check(self, search, runtime, code, metrics, failures):
        if self.unit_set:
            unit = score_is_legal(runtime, self.unit_set)
            metrics["unit_accuracy"] = unit.accuracy
            # Counterexamples of both signs, so the refiner cannot fix one by breaking the other.
            failures += unit.errors[:3] + unit.false_accepts[:4] + unit.false_rejects[:4]

    def prompt(self, search, options, lesson, shown):
        options.update(labelled=lesson.labelled, expected=lesson.expected)


class HelperLibrary(Idea):
    name = "helper_library"
    summary = "harness code may import harnesslib; the prompt documents it with its output on a real board"
    harvests = True

    def prompt(self, search, options, lesson, shown):
        options.update(helper_library=True, sample_board=lesson.board)


class FewShot(Idea):
    name = "few_shot"
    summary = "a complete worked harness for another game (Connect Four) in the prompt"

    def prompt(self, search, options, lesson, shown):
        options["few_shot"] = True


class Samples(Idea):
    name = "samples"
    summary = "several samples per refinement (the first at first_temperature), the best entering the tree"

    def __init__(self, n: int) -> None:
        self.n = n

    def samples(self):
        return self.n


class Grammar(Idea):
    name = "grammar"
    summary = "a GBNF grammar forcing one ```python block"

    def ask(self, search, kwargs):
        kwargs["grammar"] = CODE_BLOCK_GRAMMAR


class LibrarySeed(Idea):
    name = "library_seed"
    summary = "start from the harness library's best harness for the same or a similar game"

    def seeds(self, search):
        return search.library_seeds


class Decompose(Idea):
    name = "decompose"
    summary = "parse_board and legal_moves written, checked against the env's ground truth and refined apart"
    harvests = True

    def __init__(self, helper_library: bool = True) -> None:
        self.decomposer = Decomposer(helper_library)

    def start(self, search):
        # Ground truth for each part; without it, the undecomposed check.
        search.state["decompose"] = self.decomposer.prepare(search.env_factory, search.transitions)

    def load(self, search, saved):
        self.decomposer.load(saved.get("decompose"))

    def check(self, search, runtime, code, metrics, failures):
        part_metrics, part_failures = self.decomposer.check(runtime, code)
        metrics.update(part_metrics)
        failures += part_failures

    def request(self, search, code, pool, metrics):
        if not self.decomposer.active:
            return None
        cfg = search.cfg
        refine, shown, messages = self.decomposer.request(game=cfg.env, description=search.description, code=code, pool=pool,
                                                          metrics=metrics, rng=search.rng, limit=cfg.max_failures_shown)
        # A decomposed request's doctests are whole observations, and small models write the
        # docstring out again before the body: measured with the 0.5B, all 8 parser replies of one
        # search stopped at 400 tokens inside that copy. Twice the budget leaves room for both.
        return Request(refine, shown, messages, lambda text: self.decomposer.new_code(code, text, refine), 2 * cfg.max_new_tokens)


class FreshRoots(Idea):
    name = "fresh_roots"
    summary = "a Thompson arm that samples a new root, its Beta posterior pooling the roots' scores"

    def __init__(self, c: float = 1.0) -> None:
        self.c = c

    def fresh_arm(self, search):
        return pooled_arm(search.state.get("root_scores", []), self.c)


class ExplainFailures(Idea):
    name = "explain_failures"
    summary = "name an inverted condition, a hard-coded answer or a never-true test plainly in the feedback"

    def explain(self, wrong, listed):
        return critic.diagnose_legal_actions(wrong, listed)


class Novelty(Idea):
    name = "novelty"
    summary = ("a sample that is a program already judged (its parent copied back, a sibling) is not judged; "
               "the next sample is asked for at a higher temperature, told not to repeat it")

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def repeats(self, search, code):
        self.known.update({cid: normalized(known) for cid, known in search.codes.items() if cid not in self.known})
        key = normalized(code)
        return next((cid for cid, k in self.known.items() if k == key), None)

    def resample(self, search, messages, repeats):
        if not repeats:
            return messages
        note = ("\n\nYour last reply was code that was already tried, unchanged, and it is wrong. "
                "Write a different implementation: change the logic, not the formatting.")
        # The user's request gets the note, not an assistant prefix that the reply continues.
        last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        return [*messages[:last], {**messages[last], "content": messages[last]["content"] + note}, *messages[last + 1:]]

    def ask(self, search, kwargs):
        if search.state.get("repeats"):
            kwargs["temperature"] = min(1.3, kwargs["temperature"] + 0.3 * search.state["repeats"])


class Repair(Idea):
    name = "repair"
    summary = ("single-point AST mutants of every judged sample (a comparison or condition flipped, a constant or name "
               "swapped, off by one), screened on the dense checks; the two best that beat the sample are judged")

    def __init__(self, rng_seed: int = 0, limit: int = 24, judged: int = 2) -> None:
        self.rng_seed, self.limit, self.judged = rng_seed, limit, judged

    def offspring(self, search, candidate_id):
        code = search.codes[candidate_id]
        base = search.dense_score(code)
        if base is None or base >= 1.0:
            return []
        template = next((t for t in (i.template(search) for i in search.ideas) if t is not None), None)
        fixed = defined_functions(template) if template else set()
        own = [f for f in defined_functions(code) if f not in fixed] or None  # what the model wrote, not the template
        known = {normalized(c) for c in search.codes.values()}
        found = [m for m in mutants(code, functions=own, rng=random.Random(f"{self.rng_seed}:{candidate_id}"), limit=self.limit)
                 if normalized(m.code) not in known]
        scored = [(score, m) for m in found if (score := search.dense_score(m.code)) is not None and score > base]
        return [(m.code, f"repair: {m.change}") for _, m in sorted(scored, key=lambda sm: -sm[0])[: self.judged]]


class Autofix(Idea):
    name = "autofix"
    summary = "every sample with its unbound module aliases imported and its bare action words bracketed"

    def offspring(self, search, candidate_id):  # judged beside the sample: a fix that misreads it only costs that judgement
        return [(f.code, f"autofix: {f.change}") for f in [fixed(search.codes[candidate_id], search.grammar.spelled())] if f]


class Induce(Idea):
    name = "induce"
    summary = "legal_moves rules fitted without a model to the listed states and the moves then rejected (envs.rules.fit); a seed if solved"

    def seeds(self, search):  # a rules table not yet right is no parent a small model can read: each round is stored, not a node
        view, template = search.view(), scaffold_for(search.view(), search.grammar.form, search.state.get("aliases"))

        def judge(name: str, source: str) -> tuple[float, list, tuple]:
            cid, j = search._judged(template + "\n\n" + source, None, {"origin": f"induced:{name}", "iteration": 0}, 0, "library")
            rejected = rejected_labels(((f.detail.get("board"), f.detail.get("action")) for f in j.failures if f.kind == ENV_REJECTED), view.args)
            return j.h, rejected, (cid, j)
        found = fit_harvest(search.transitions, view.args, view.params, search.grammar, judge)
        return [{"code": search.codes[found[0]], "judged": found}] if found else []


class Aliases(Idea):
    name = "aliases"
    summary = "listed actions that are one move (equal legality and next observation wherever harvested) added by legal_actions"
    harvests = True

    def ready(self, search):  # the scaffold's ALIASES (the examples keep the game's whole lists: either answer passes)
        search.state["aliases"] = infer_aliases(search.transitions)


class Restarts(Idea):
    name = "restarts"
    summary = "after `patience` refinements without a better best h, a fresh root from other example states, at temperature"

    def __init__(self, patience: int = 2) -> None:
        self.patience = patience

    def restart(self, search):
        return search.state.get("stalled", 0) >= self.patience

    def prompt(self, search, options, lesson, shown):
        restarts = search.state.get("restarts", 0)
        if restarts and search.state.get("parent") is None and options.get("scaffold") and search.listed:
            # Diverse: a restart's examples are other states of the game than the first root's.
            options["scaffold_examples"] = examples(search.view(), random.Random(restarts).sample(search.listed, min(3, len(search.listed))))




def long_request(search: Synthesis) -> bool:
    """Whether the game's first one-function request (its root examples) is long (``LONG_REQUEST``):
    a property of the game, so a search asks every node the same way."""
    if "long_request" not in search.state:
        scaffold = next((i for i in search.ideas if isinstance(i, Scaffold)), None)
        examples = scaffold.examples(search) if scaffold is not None and search.listed else []
        search.state["long_request"] = is_long(examples, search.view())
    return search.state["long_request"]



class BodyPrefix(Idea):
    name = "body_prefix"
    summary = ("a long one-function request gives legal_moves' signature and docstring as the reply's prefix "
               "(the model contract's assistant prefix), so only the body is asked for")

    def prompt(self, search, options, lesson, shown):
        # The grammar forces a reply that opens a ```python block, which a continuation must not.
        if options.get("scaffold_examples") and long_request(search) and not any(isinstance(i, Grammar) for i in search.ideas):
            options["body_only"] = True


class ShortExamples(Idea):
    name = "short_examples"
    summary = ("a long one-function request shows two examples, a text board's without the opening that every "
               "observation of the game shares (the rules, shown above them)")

    def __init__(self, keep: int = 2) -> None:
        self.keep = keep

    def prompt(self, search, options, lesson, shown):
        examples = options.get("scaffold_examples") or []
        if examples and long_request(search):
            options["scaffold_examples"] = shortened(examples, search.view(), self.keep)



class WholeFallback(Idea):
    name = "whole_fallback"
    summary = ("after `after` replies to a node's one-function request with no body for legal_moves, "
               "that node asks for the whole harness instead")

    def __init__(self, after: int = 2) -> None:
        # Two, not one: measured with the 1.5B, falling back on the first empty reply sent Guess the
        # Number nodes to whole-harness samples that all scored 0.0, where its one-function bodies reached 0.70.
        self.after = after

    def replied(self, search, parent_id, request, code):
        key = parent_id or "root"
        if key in search.state.get("whole_harness", []) or request.asks != "legal_moves" or has_body(code, "legal_moves"):
            return False
        empty = search.state.setdefault("no_body", {})
        empty[key] = empty.get(key, 0) + 1
        if empty[key] < self.after:
            return False
        search.state.setdefault("whole_harness", []).append(key)
        return True

    def whole_harness(self, search, parent_id):
        # A node whose own legal_moves has no body (a copied docstring that entered the tree)
        # falls back too: refining it with the one-function request shows it that docstring again.
        code = search.codes.get(parent_id) if parent_id else None
        return ((parent_id or "root") in search.state.get("whole_harness", [])
                or (code is not None and "def legal_moves" in code and not has_body(code, "legal_moves")))


IDEAS: dict[str, type[Idea]] = {cls.name: cls for cls in (Transitions, HelperLibrary, FewShot, Scaffold, Samples, Grammar,
                                                           LibrarySeed, Decompose, FreshRoots, ExplainFailures, Novelty, Autofix,
                                                           Repair, Restarts, Aliases, ShortExamples, BodyPrefix, WholeFallback, Induce)}
"""Every idea by name (the ``AutoHarnessConfig.ideas`` switch of the same name chooses it)."""


def components(config: AutoHarnessConfig) -> list[Idea]:
    """The components a configuration chooses: none for ``faithful``; for ``ratchet`` the ideas
    ``config.ideas`` switches on. The order is the order their checks run in when judging."""
    if config.method == "faithful":
        return []
    ideas = config.ideas
    chosen: list[tuple[bool, Callable[[], Idea]]] = [
        (ideas.scaffold, Scaffold), (ideas.decompose, lambda: Decompose(ideas.helper_library)),
        (ideas.transitions, lambda: Transitions(config.rng_seed)), (ideas.helper_library, HelperLibrary), (ideas.few_shot, FewShot),
        (True, lambda: Samples(ideas.samples_per_step)), (ideas.grammar, Grammar), (ideas.library_seed, LibrarySeed), (ideas.induce, Induce),
        (ideas.fresh_roots, lambda: FreshRoots(config.thompson_c)), (ideas.explain_failures, ExplainFailures), (ideas.aliases, Aliases),
        (ideas.novelty, Novelty), (ideas.autofix, Autofix), (ideas.repair, lambda: Repair(config.rng_seed)), (ideas.restarts, Restarts),
        # After every component that chooses the examples (scaffold, restarts): these read them.
        (ideas.short_examples, ShortExamples), (ideas.body_prefix, BodyPrefix), (ideas.whole_fallback, WholeFallback),
    ]
    return [build() for on, build in chosen if on]
