"""What is settled before a run pays for anything: where a config's relative paths point, and
whether the run's held-in split is large enough for its gate to ever keep a change."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ratchet.config import ConfigError, load_config
from ratchet.contracts import RatchetError
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.gate import PairedGate

#: Where a run keeps the config it runs with (``ratchet evolve resume`` reads it back).
CONFIG_COPY = "evolve/config.yaml"


def resolve_workspace(workspace: Path, config_file: Path | None) -> Path:
    """``workspace`` made absolute. A relative one is read against the YAML file's directory, so a
    config travels with its workspace and runs from any directory; when no such directory exists
    there, against the nearest directory above the file where it does (the shipped examples name
    their workspace from the repository root, ``workspace: examples/humaneval-coder``), and last
    against the current directory."""
    if workspace.is_absolute():
        return workspace
    if config_file is not None:
        here = config_file.absolute().parent
        for base in (here, *here.parents):
            if (base / workspace).is_dir():
                return (base / workspace).resolve()
    return workspace.resolve()


def load_evolve_config(path: str | Path, overrides: Iterable[str] = ()) -> EvolveConfig:
    """An :class:`EvolveConfig` from a YAML file plus ``--set`` overrides, its workspace resolved
    (:func:`resolve_workspace`): what ``ratchet evolve`` and :func:`ratchet.api.evolve` run."""
    path = Path(path)
    cfg = load_config(EvolveConfig, path, overrides)
    return cfg.model_copy(update={"workspace": resolve_workspace(cfg.workspace, path)})


def component_problems(cfg: EvolveConfig) -> list[str]:
    """Every problem with the components a config names (an unknown selector, a bad proposer
    option, a gate option out of range), each on its own, found without building any of them:
    the engine itself checks these one at a time as it builds, and stops at the first."""
    from ratchet.config import validate_config
    from ratchet.evolve.components import options_class, resolve

    named = [("suite", "suite", cfg.suite), ("selector", "selector", cfg.selector), ("gate", "gate", cfg.gate)]
    named += [("proposer", f"proposers.{i}", spec) for i, spec in enumerate(cfg.proposers)]
    problems: list[str] = []
    for kind, key, spec in named:
        try:
            validate_config(options_class(resolve(kind, spec.name)), dict(spec.options), f"{kind} {spec.name!r}")
        except ConfigError as exc:
            problems += [f"{key}.options.{p}" for p in exc.problems]
        except RatchetError as exc:
            problems.append(f"{key}.name = {spec.name!r}: {str(exc).splitlines()[0]}")
    return problems


def gate_reach_warning(gate: object, heldin_tasks: int) -> str | None:
    """A warning when no change can pass ``gate``'s paired test on ``heldin_tasks`` tasks, even one
    that turns every held-in task from a failure into a success; None when one can, or when the
    gate is not a paired test (its reach is then unknown here).

    With n paired tasks the smallest one-sided p-value an exact sign-flip test can reach is 1/2^n
    (every difference positive), and a run's first test under alpha spending is at alpha/2: with
    the defaults (alpha 0.05, so 0.025) a held-in split of 5 tasks or fewer can never pass
    (1/32 = 0.031). The gate's own test is asked rather than that formula repeated here, so a
    bootstrap gate or another correction is judged by what it really computes."""
    if not isinstance(gate, PairedGate) or heldin_tasks <= 0:
        return None
    if gate.smallest_accepted_flips(heldin_tasks, test_index=1) is not None:
        return None
    level = gate.correction.level(gate.options.alpha, 1)
    best = gate.p_value([1.0] * heldin_tasks)
    return (f"the held-in split has {heldin_tasks} task(s): even a change that passes every one of them reaches "
            f"p = {best:.4g} at best, not below the gate's first level {level:.4g}, so this run can accept nothing; "
            f"give the held-in split more tasks (splits.heldin, or splits.ids.heldin) or raise gate.options.alpha")
