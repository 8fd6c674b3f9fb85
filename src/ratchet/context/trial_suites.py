"""Where a playbook trial (:mod:`ratchet.context.trial`) gets its tasks: one small object per suite.

A :class:`TrialSuite` names a workspace the engine evolves, the run config in it whose suite the
trial runs (built as the engine builds it: ``suite: {name, options}``, by registry name or import
path), the prompt file the playbook is appended to, and a :class:`SplitRule` that picks the train
tasks (which teach) and the test tasks (which judge). The test tasks must be ones no search has
looked at, so the rule follows the run config's own splits where it has an untouched ``test``
split (:class:`ConfigSplits`), and otherwise takes problems past everything the config uses
(:class:`LeadingSplits`). A rule also names the held-in tasks on which the engine's gate
(:meth:`TrialSuite.gate`, the run config's ``gate:``) judges an offline playbook before the test
phase uses it: tasks in neither train nor test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from ratchet.context.trial import Suite
from ratchet.contracts import Gate, Model, RatchetError, Task
from ratchet.evolve.components import build
from ratchet.evolve.config import ComponentSpec, SplitsConfig
from ratchet.evolve.context import EngineContext
from ratchet.evolve.evaluation import split_tasks
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.report import Resamplable


class SplitRule(Protocol):
    """Train and test tasks from a suite's tasks; ``train``/``test`` cap their counts (None: the
    rule's own); ``limit`` is how many leading tasks the suite must list for the rule (None: all)."""

    def split(self, tasks: list[Task], train: int | None, test: int | None) -> tuple[list[Task], list[Task]]: ...

    def limit(self, train: int | None, test: int | None) -> int | None: ...

    def heldin(self, tasks: list[Task], train: int | None, test: int | None) -> list[Task]:
        """The gate's held-in tasks: none of train's or test's (none: the gate has no evidence)."""
        ...


@dataclass(frozen=True)
class ConfigSplits:
    """The run config's splits: train = search + held-in + held-out (what the engine may look
    at), test = its ``test`` split (untouched until an engine report). ``train``/``test`` take the
    first that many of each (small trials)."""

    splits: SplitsConfig

    def split(self, tasks: list[Task], train: int | None, test: int | None) -> tuple[list[Task], list[Task]]:
        parts = split_tasks(tasks, self.splits)
        if not parts["test"]:
            raise RatchetError("the run config has no test split for a playbook trial to judge on",
                               hint="give it splits.test (a fraction) or splits.ids.test")
        teach = parts["search"] + parts["heldin"] + parts["heldout"]
        return teach[:train], parts["test"][:test]

    def limit(self, train: int | None, test: int | None) -> int | None:
        return None

    def heldin(self, tasks: list[Task], train: int | None, test: int | None) -> list[Task]:
        """None: every task of the config is in train or test, so a gate here has nothing to judge
        on and refuses every playbook (the trial's offline test then runs without one)."""
        return []


@dataclass(frozen=True)
class LeadingSplits:
    """Tasks in the suite's order: ``offset`` .. ``+train`` teach, the next ``test`` judge, the
    ``heldin_count`` after those are the gate's (for a suite whose run config uses only its first
    problems, the rest having been seen by no search)."""

    offset: int = 0
    train: int = 40
    test: int = 40
    heldin_count: int = 0
    """Tasks after the test ones on which the gate judges an offline playbook (0: none)."""

    def split(self, tasks: list[Task], train: int | None, test: int | None) -> tuple[list[Task], list[Task]]:
        n_train, n_test = self.counts(train, test)
        rest = tasks[self.offset:]
        return rest[:n_train], rest[n_train:n_train + n_test]

    def counts(self, train: int | None, test: int | None) -> tuple[int, int]:
        return (self.train if train is None else train), (self.test if test is None else test)

    def limit(self, train: int | None, test: int | None) -> int | None:
        n_train, n_test = self.counts(train, test)
        return self.offset + n_train + n_test + self.heldin_count

    def heldin(self, tasks: list[Task], train: int | None, test: int | None) -> list[Task]:
        start = self.offset + sum(self.counts(train, test))
        return tasks[start:start + self.heldin_count]


@dataclass(frozen=True)
class TrialSuite:
    """A suite a playbook trial runs on (see the module docstring)."""

    name: str
    workspace: Path
    config_file: str
    """The run config in ``workspace`` whose ``suite`` (and, for :class:`ConfigSplits`, ``splits``) the trial uses."""
    prompt_file: str
    """The workspace file the playbook's items are appended to."""
    rule: SplitRule | None = None
    """How train and test are chosen; None: the run config's splits (:class:`ConfigSplits`)."""

    def run_config(self) -> dict[str, Any]:
        path = self.workspace / self.config_file
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise RatchetError(f"cannot read the run config {path}: {exc}",
                               hint="name a workspace's evolve YAML that exists") from None
        if not isinstance(data, dict) or "suite" not in data:
            raise RatchetError(f"{path} names no suite", hint="a run config has suite: {name, options}")
        return data

    def splits(self) -> SplitRule:
        if self.rule is not None:
            return self.rule
        return ConfigSplits(SplitsConfig.model_validate(self.run_config().get("splits") or {}))

    def files(self) -> dict[str, str]:
        """The workspace's editable files: the candidate the playbook is added to."""
        manifest = load_manifest(self.workspace)
        return {str(p.relative_to(self.workspace)): p.read_text() for p in sorted(self.workspace.rglob("*"))
                if p.is_file() and manifest.is_editable(str(p.relative_to(self.workspace)))}

    def build(self, model: Model, *, temperature: float | None = None, train: int | None = None,
              test: int | None = None) -> Suite:
        """The run config's suite calling ``model``; at ``temperature`` when given (best-of-N's
        samples: the suite's ``sampled`` when it has one, else its workflow's temperature), listing
        the tasks the split rule needs."""
        spec = ComponentSpec.model_validate(self.run_config()["suite"])
        options = dict(spec.options)
        limit = self.splits().limit(train, test)
        if limit is not None:
            options["limit"] = limit
        sampled_by_suite = False
        if temperature is not None:
            if "workflow" in options or spec.name in ("humaneval", "textarena", "jsonl"):
                options["workflow"] = {**(options.get("workflow") or {}), "temperature": temperature}
            else:
                sampled_by_suite = True
        ctx = EngineContext(load_manifest(self.workspace), self.workspace, model=model)
        suite = build("suite", spec.model_copy(update={"options": options}), ctx)
        if sampled_by_suite:
            if not isinstance(suite, Resamplable):
                raise RatchetError(f"suite {spec.name!r} can neither sample nor drive a workflow",
                                   hint="run the trial without best-of-N (--best-of 0)")
            suite = suite.sampled(temperature)
        return suite

    def split(self, tasks: list[Task], train: int | None = None, test: int | None = None) -> tuple[list[Task], list[Task]]:
        return self.splits().split(tasks, train, test)

    def heldin(self, tasks: list[Task], train: int | None = None, test: int | None = None) -> list[Task]:
        """The split rule's held-in tasks for the gate (checked disjoint from train and test)."""
        chosen = self.splits().heldin(tasks, train, test)
        teach, judge = self.split(tasks, train, test)
        overlap = sorted({t.id for t in chosen} & {t.id for t in teach + judge})
        if overlap:
            raise RatchetError(f"the gate's held-in tasks overlap train or test: {', '.join(overlap[:5])}",
                               hint="held-in tasks must be ones neither phase uses")
        return chosen

    def gate(self, seed: int = 0) -> Callable[[], Gate]:
        """Makes the gate the run config names (``gate:``; the engine's default, ``paired``, when it
        names none), as the engine builds it: the same test, level and thresholds a candidate of
        this workspace meets."""
        spec = ComponentSpec.model_validate(self.run_config().get("gate") or {"name": "paired"})
        manifest = load_manifest(self.workspace)
        return lambda: build("gate", spec, EngineContext(manifest, self.workspace, seed=seed))
