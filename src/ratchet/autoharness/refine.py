"""Which function to refine, whether a response's code is a complete harness, and the refiners the
engine's critic + refiner proposer asks: the paper's request (:class:`HarnessRefiner`), the
search's one-function request (:class:`ScaffoldRefiner`).

The paper's rule: if ``is_legal_action`` said True but the environment rejected the move, both
functions are wrong → refine both; if it said False (the proposal itself was illegal) → refine
``propose_action`` only. We add the cases the paper's loop cannot produce but our unit tests can:
a legal move the check rejects (false reject) or a crash inside ``is_legal_action`` →
refine ``is_legal_action``.
"""

from __future__ import annotations

import ast
import copy
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ratchet.envs.harness import views
from ratchet.envs.harness.diagnoses import DIAGNOSES
from ratchet.autoharness.prompts import harness_prompt, is_long, scaffold_for, scaffold_prompt, shortened
from ratchet.envs.harness.runtime import sandbox_runtime_factory
from ratchet.envs.harness.transitions import check_legal_actions, listed_accuracy
from ratchet.contracts import Failure, Message, RatchetError
from ratchet.envs.aliases import infer_aliases
from ratchet.envs.answers import defined_functions, extract_code
from ratchet.envs.explore import listed_states
from ratchet.evolve.proposers import critic as engine_critic

REQUIRED = ("propose_action", "is_legal_action")


def summarize(failures: Sequence[Failure]) -> str:
    """The error types among ``failures`` with counts, most frequent first, the diagnoses first."""
    return engine_critic.summarize(failures, first=DIAGNOSES)


@runtime_checkable
class Restartable(Protocol):
    """A refiner whose first request can be asked anew from other examples (the ``restarts``
    idea: a fresh root that answers another request than the first root's)."""

    def restarted(self, restart: int) -> Any:
        """A copy whose requests show the ``restart``-th other draw of examples (1, 2, …)."""
        ...


def which_to_refine(failures: Sequence[Failure]) -> str:
    """"both", "is_legal_action" or "propose_action" for the failures shown to the refiner."""
    kinds = {(f.kind, f.detail.get("function"), f.detail.get("verdict")) for f in failures}
    if any(k in ("rejected_by_env", "false_accept", "wrong_legal_actions") or (k is not None and v is True and fn == "both") for k, fn, v in kinds):
        return "both"
    if any(k == "false_reject" or (k == "code_error" and fn == "is_legal_action") for k, fn, _ in kinds):
        return "is_legal_action"
    return "propose_action"


def check_signatures(code: str) -> str | None:
    """None if ``code`` parses and defines both required functions, else the problem in words."""
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    missing = [name for name in REQUIRED if name not in defined_functions(code)]
    return f"missing function(s): {', '.join(missing)}" if missing else None


class HarnessRefiner:
    """The paper's refinement request for a harness (``ratchet.evolve.proposers.critic.Refiner``):
    the function the shown failures blame (:func:`which_to_refine`; both when none is shown: no
    failure points at one), the reply's code completed
    from the parent where it leaves one of the two functions out, refused unless it parses; a reply
    that redefines none of the parent's functions is judged as written (and scores 0 with the
    missing functions named)."""

    def __init__(self, game: str, description: str = "", mode: str = "verifier", helper_library: bool = False,
                 few_shot: bool = False) -> None:
        self.game, self.description, self.mode = game, description, mode
        #: The ``helper_library`` idea: the request documents ``harnesslib`` with its output on a
        #: real board of the game (the first shown failure's).
        self.helper_library = helper_library
        #: The ``few_shot`` idea: a complete worked harness for another game (Connect Four) in the request.
        self.few_shot = few_shot

    def request(self, code: str, shown: list[Failure], pool: list[Failure]) -> list[Message]:
        board = next((f.detail["board"] for f in shown if f.detail.get("board")), None) if self.helper_library else None
        return harness_prompt(game=self.game, description=self.description, mode=self.mode, code=code, failures=shown,
                              refine=which_to_refine(shown) if shown else "both", error_summary=summarize(pool),
                              helper_library=self.helper_library, few_shot=self.few_shot, sample_board=board)

    def new_code(self, reply: str, code: str) -> tuple[str | None, str]:
        own = extract_code(reply)
        if own is not None and not defined_functions(own) & (set(REQUIRED) | defined_functions(code)):
            # A reply that redefines none of the parent's functions (nor the two required) refines
            # none: completed from the parent it would be the parent again with unused code. It is
            # judged as written (the legality suite scores it 0, naming the missing functions), so
            # the next request shows why. One that rewrites a helper (a scaffold's legal_moves) is
            # completed as before.
            problem = check_signatures(own)
            return (None, problem) if problem and problem.startswith("SyntaxError") else (own, "")
        new = extract_code(reply, previous=code, required=REQUIRED)
        problem = "no code in the reply" if new is None else check_signatures(new)
        return (None, problem) if problem else (new, "")


class ExploringRefiner(HarnessRefiner):
    """A refiner whose requests show the game explored once, on ``seeds`` (as the ``induced_rules``
    proposer explores it), on the first request: the engine builds refiners at start-up, and a run
    that never asks should not play the game. A parent's code runs only in the sandbox."""

    def __init__(self, game: str, description: str = "", seeds: Sequence[int] = (0, 1, 2, 3),
                 transitions_per_seed: int = 60, call_timeout_s: float = 2.0) -> None:
        super().__init__(game, description, "verifier")
        self.seeds, self.per_seed = list(seeds), transitions_per_seed
        #: Runs the parent's code: the sandbox (a test may hand in another).
        self.runtime_factory = sandbox_runtime_factory(call_timeout_s)
        self._harvest: Any = None

    def harvest(self) -> Any:
        """The game explored (once), after :meth:`explored` prepared what the requests show from it."""
        if self._harvest is None:
            from ratchet.autoharness.rules import harvest_game  # plays the game: only once asked

            h = harvest_game(self.game, self.seeds, self.per_seed)
            self.explored(h)  # kept only once prepared: a refused game is refused at every request
            self._harvest = h
        return self._harvest

    def explored(self, h: Any) -> None:
        """Prepare what the requests show from the harvest ``h``; a RatchetError when there is none."""

    def in_sandbox(self, code: str, check: Callable[[Any], Any]) -> Any:
        """``check(runtime)`` with ``code`` loaded in the sandbox; None when the code does not load."""
        self.harvest()
        try:
            with self.runtime_factory({"harness.py": code}) as runtime:
                return check(runtime)
        except RatchetError:
            return None


class ScaffoldRefiner(ExploringRefiner):
    """The dedicated search's ``scaffold`` idea for the engine: one function, ``legal_moves``, asked
    for in the HumanEval format with real states of the game as its doctest examples, and built
    into the fixed template around it. A parent with its own ``legal_moves`` gets the
    counterexample request (its function shown as wrong, with the failures' summary); any other
    parent, the first request. ``body_only``: the search's ``body_prefix`` idea, the function's
    signature and docstring sent as the reply's prefix, so only the body is asked for.
    ``counterexamples``: the search's counterexample examples, at most that many explored states
    where the parent's ``legal_actions`` is wrong (checked in the sandbox, as the search's dense
    checks are) shown first among the doctest examples, with the game's legal lists there."""

    def __init__(self, game: str, description: str = "", seeds: Sequence[int] = (0, 1, 2, 3), examples: int = 3,
                 transitions_per_seed: int = 60, body_only: bool = False, counterexamples: int = 0,
                 call_timeout_s: float = 2.0, short_examples: bool = False, aliases: bool = False,
                 long_only: bool = False) -> None:
        super().__init__(game, description, seeds, transitions_per_seed, call_timeout_s)
        self.examples, self.body_only, self.counterexamples = examples, body_only, counterexamples
        #: The ``short_examples`` idea: where the request is long (``prompts.is_long``), two examples,
        #: a text board's without the opening they all share.
        self.short_examples = short_examples
        #: The ``aliases`` idea: listed actions that are one move under two names (``envs.aliases``,
        #: read from the harvest) go into the template's ``ALIASES``, which ``legal_actions`` adds.
        self.aliases = aliases
        #: ``body_only`` only where the request is long, as the search's ``body_prefix`` idea.
        self.long_only = long_only
        self._template = ""
        self._long = False
        self._listed: list[tuple[str, list[str]]] = []
        self._spread: list[tuple[str, list[str]]] = []
        self._picked: list[Any] = []

    def explored(self, h: Any) -> None:
        """The doctest examples every request shows, picked from the harvest."""
        if not h.states:
            raise RatchetError(f"{self.game}: exploring seeds {self.seeds} found no state with the game's whole legal "
                               "list, so the one-function request has no examples", hint="use the HarnessRefiner")
        self._listed = listed = listed_states(h.transitions, limit=None)
        self._spread = listed[len(listed) // 3 :: max(1, len(listed) // 4)] + listed  # as the search picks them
        self._picked = views.examples(h.view, self._spread, self.examples)
        self._long = is_long(self._picked, h.view)
        self._template = scaffold_for(h.view, h.grammar.form, infer_aliases(h.transitions)) if self.aliases else h.template

    def restarted(self, restart: int) -> ScaffoldRefiner:
        """A copy whose doctest examples are ``examples`` explored states drawn by
        ``random.Random(restart)`` (the search's restart draw), not the spread every other request
        shows; the harvest, template and length of the request (a property of the game) are shared."""
        h = self.harvest()
        other = copy.copy(self)
        drawn = random.Random(restart).sample(self._listed, min(self.examples, len(self._listed)))
        other._picked = views.examples(h.view, drawn, self.examples)
        return other

    def _wrong(self, code: str) -> list[Failure] | None:
        """``check_legal_actions`` of ``code`` on every explored state, in the sandbox; None when
        the code does not load."""
        return self.in_sandbox(code, lambda runtime: check_legal_actions(runtime, self._listed))

    def wrong_states(self, code: str) -> list[tuple[str, list[str]]]:
        """Explored states (board, legal list) where ``code``'s ``legal_actions`` is wrong, at most
        ``counterexamples``; none when the code does not load (the request then goes as before)."""
        wrong = self._wrong(code) or []
        return [(f.detail["board"], f.detail["expected"]) for f in wrong if f.kind == "wrong_legal_actions"][: self.counterexamples]

    def screen(self, code: str) -> float:
        """The share of explored states where ``code``'s ``legal_actions`` gives the game's legal
        list (0 when it does not load): how the critic_refiner ranks a step's ``samples``."""
        return self.screen_failures(code)[0]

    def screen_failures(self, code: str) -> tuple[float, list[Failure]]:
        """``screen`` and the wrong states behind it (the counterexamples a verdict's hint shows)."""
        wrong = self._wrong(code)
        return (0.0, []) if wrong is None else (listed_accuracy(wrong, self._listed), wrong)

    def request(self, code: str, shown: list[Failure], pool: list[Failure]) -> list[Message]:
        h = self.harvest()
        picked = self._picked
        own = code if "def legal_moves" in code else None
        wrong = self.wrong_states(code) if own and self.counterexamples else []
        if wrong:
            picked = views.examples(h.view, wrong + self._spread, len(wrong) + self.examples)
        if self.short_examples and self._long:
            picked = shortened(picked, h.view)
        body_only = self.body_only and (self._long or not self.long_only)
        return scaffold_prompt(game=self.game, description=self.description, code=own,
                               error_summary=summarize(pool) if own else "", examples=picked, view=h.view, body_only=body_only)

    def new_code(self, reply: str, code: str) -> tuple[str | None, str]:
        template = code if "def legal_moves" in code else (self.harvest() and self._template)
        new = extract_code(reply, previous=template, required=REQUIRED)
        problem = "no code in the reply" if new is None else check_signatures(new)
        return (None, problem) if problem else (new, "")
