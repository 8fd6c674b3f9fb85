"""The run's spend ledger: one budget for its model calls and task evaluations, the journals its
models answer through, and what its final reports spent, kept apart from what the search spent.

Model calls are counted by the accountant (``budget``: calls, tokens, wall time, money), task
evaluations against ``max_task_evals`` here; a resumed run counts what was already spent (the
run's ``llm_calls.jsonl`` and ``evolve/evals.jsonl``). A final report's evaluations and calls are
measurement, not search: counted as spend, a report made again (the resume of a finished run, or
of one killed inside its report) would buy its best-of-N arm more attempts each time; they are
recorded in ``evolve/report_spend.json`` and left out of the search's budget.
"""

from __future__ import annotations

from typing import Any

from ratchet.contracts import BudgetExceeded, LLMCall, Model
from ratchet.evolve.cache import EVALS, PROPOSER_REPLIES, CachedEvaluator
from ratchet.evolve.config import EvolveConfig
from ratchet.models.budget import AccountedModel, Accountant
from ratchet.models.journal import JournaledModel

REPORT_SPEND = "evolve/report_spend.json"
LLM_CALL_FIELDS = set(LLMCall.__dataclass_fields__)


class SpendLedger:
    """What one run has spent and may still spend. ``journal`` is the run's model (accounted,
    journaled), ``proposer_journal`` the proposers' own model when the run names one: the same
    budget, its own journal, so that a resumed run replays each model's replies to the caller
    that asked for them. The evaluation cache is attached once built (:meth:`attach`)."""

    def __init__(self, config: EvolveConfig, run: Any, model: Model | None = None,
                 proposer_model: Model | None = None) -> None:
        self.config = config
        self.run = run
        self.accountant = Accountant(config.budget)
        for record in run.read_jsonl("llm_calls.jsonl"):  # a resumed run's budget counts what was spent
            self.accountant.record(LLMCall(**{k: v for k, v in record.items() if k in LLM_CALL_FIELDS}))
        self.accountant.on_call = run.record_llm_call
        self.journal = JournaledModel(AccountedModel(model, self.accountant, "evolve"), run) if model else None
        self.proposer_journal = (JournaledModel(AccountedModel(proposer_model, self.accountant, "evolve:proposer"),
                                                run, PROPOSER_REPLIES) if proposer_model else None)
        self.paid_before = len(run.read_jsonl(EVALS))
        self.reports_before = self.reports_spent()[0]  # evaluations made by finished reports of this run
        self.unlimited = False
        self.evaluator: CachedEvaluator | None = None

    def attach(self, evaluator: CachedEvaluator) -> None:
        """The evaluation cache whose paid evaluations this ledger counts."""
        self.evaluator = evaluator

    @property
    def paid(self) -> int:
        """Task evaluations run by this process (not served from the cache)."""
        return self.evaluator.paid if self.evaluator is not None else 0

    # -- the budget ----------------------------------------------------------------------------

    def charge(self, n: int) -> None:
        """Before the ``n``-th evaluation of a batch is let run: raise when it would pass the budget.

        The model's limits (calls, tokens, dollars) are not checked here: an evaluation makes no
        model call of its own (a suite's call is refused as it begins, by the accountant), and a
        child whose proposal spent the last call is judged, not dropped unseen with its calls
        paid for; the next model call then stops the run. Wall time stops evaluations too."""
        limit = self.config.max_task_evals
        spent = self.paid_before + self.paid - self.reports_before  # earlier reports are measurement
        if limit is not None and not self.unlimited and spent + n > limit:
            raise BudgetExceeded(f"budget reached: max_task_evals={limit} ({spent} task evaluations run)",
                                 hint="raise it with --set max_task_evals=..., and resume the run")
        wall = self.accountant.config.max_wall_s
        if wall is not None and self.accountant.snapshot()["wall_s"] >= wall:
            raise BudgetExceeded(f"budget reached: max_wall_s={wall} (during a task evaluation)",
                                 hint="raise it with --set budget.max_wall_s=..., or resume the run later")

    def lift(self) -> None:
        """No limit from here on: the final measurement is not part of the search's budget."""
        self.unlimited = True
        self.accountant.config = self.accountant.config.model_copy(update={
            "max_calls": None, "max_tokens": None, "max_wall_s": None, "max_usd": None})

    # -- the journals --------------------------------------------------------------------------

    def journals(self) -> list[JournaledModel]:
        return [j for j in (self.journal, self.proposer_journal) if j is not None]

    def model_calls(self) -> int:
        """Model calls of this run through the journals so far, replayed ones included: a step's
        count is the difference around its proposal, whoever made the calls (a proposer's ``ask``
        or the agent loop of the agentic one, which calls the model itself), and a step rerun
        after a kill counts the calls its replies replay."""
        return sum(j.calls + j.replayed for j in self.journals())

    def checkpoint_state(self) -> dict[str, int]:
        """The journals' call counts, checkpointed with each step."""
        return {"calls": self.journal.calls if self.journal is not None else 0,
                "proposer_calls": self.proposer_journal.calls if self.proposer_journal is not None else 0}

    def resume(self, state: dict[str, Any]) -> None:
        """Replies journaled after the checkpoint (the interrupted step's) become replayable."""
        if self.journal is not None:
            self.journal.resume(state["calls"])
        if self.proposer_journal is not None:
            self.proposer_journal.resume(state.get("proposer_calls", 0))

    # -- what was spent ------------------------------------------------------------------------

    def raw_spend(self) -> tuple[int, int]:
        """Task evaluations and model calls of the run so far, reports included."""
        return self.paid_before + self.paid, self.accountant.snapshot()["calls"]

    def reports_spent(self) -> tuple[int, int]:
        """Task evaluations and model calls that this run's finished final reports made (zero until
        one has finished): measurement, kept out of the search's budget and of its spend."""
        last = self.run.read_json(REPORT_SPEND) or {}
        evals, calls = last.get("measured_evals", 0), last.get("measured_calls", 0)
        if "done_evals" in last:
            evals, calls = evals + last["done_evals"] - last["at_evals"], calls + last["done_calls"] - last["at_calls"]
        return evals, calls

    def search_spend(self, step: int) -> dict[str, Any]:
        """What the search had spent (task evaluations, model calls) when the final report at
        ``step`` began, which sizes the report's best-of-N arm. Recorded when a report begins at a
        step, reused by any report at that step; a run resumed for more steps leaves out what its
        earlier complete reports spent (a report killed and never finished before the run went on
        is counted as search)."""
        last = self.run.read_json(REPORT_SPEND) or {}
        if last.get("step") == step:
            return last
        measured = self.reports_spent()
        evals, calls = self.raw_spend()
        spend = {"step": step, "evals": evals - measured[0], "calls": calls - measured[1], "at_evals": evals,
                 "at_calls": calls, "measured_evals": measured[0], "measured_calls": measured[1]}
        self.run.write_json(REPORT_SPEND, spend)
        return spend

    def report_done(self) -> None:
        """A final report finished: what it spent becomes measurement."""
        done = self.raw_spend()
        self.run.write_json(REPORT_SPEND, {**self.run.read_json(REPORT_SPEND), "done_evals": done[0], "done_calls": done[1]})

    def spent(self) -> dict[str, Any]:
        """The run's spend as its summary shows it."""
        hits = self.evaluator.hits if self.evaluator is not None else 0
        return {"task_evals": self.paid_before + self.paid, "cache_hits": hits,
                "model_calls": self.accountant.snapshot()["calls"],
                "replayed_replies": sum(j.replayed for j in self.journals())}
