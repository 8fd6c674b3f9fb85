"""Component names -> classes, by import path, resolved only when a run names them.

A component is built as ``Cls(options, ctx)``: ``options`` is validated against the class's
options model (its ``Options`` attribute, else the annotation of its ``options`` parameter) and
``ctx`` is the :class:`~ratchet.evolve.context.EngineContext`. Paths are strings so that listing a
component here imports nothing, and a component whose module is missing fails with its name.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from typing import Any

from ratchet.config import Settings, validate_config
from ratchet.contracts import Gate, Proposer, RatchetError, Selector
from ratchet.evolve.config import ComponentSpec
from ratchet.evolve.context import EngineContext

SELECTORS = {
    "greedy": "ratchet.evolve.selectors:GreedySelector",
    "dgm": "ratchet.evolve.selectors:DgmSelector",
    "thompson": "ratchet.evolve.selectors:ThompsonSelector",
    "pareto": "ratchet.evolve.selectors:ParetoSelector",
    "islands": "ratchet.evolve.selectors:IslandsSelector",
}
PROPOSERS = {
    "reflective": "ratchet.evolve.proposers.reflective:ReflectiveProposer",
    "diff": "ratchet.evolve.proposers.diff:DiffProposer",
    "merge": "ratchet.evolve.proposers.merge:MergeProposer",
    "agentic": "ratchet.evolve.proposers.agentic:AgenticProposer",
    "critic_refiner": "ratchet.evolve.proposers.critic:CriticRefinerProposer",
    "mutation": "ratchet.evolve.proposers.mutation:MutationProposer",
    "autofix": "ratchet.evolve.proposers.mutation:AutofixProposer",
    "choices": "ratchet.evolve.proposers.choices:ChoicesProposer",
    "noop": "ratchet.evolve.proposers.controls:NoopProposer",
    "cosmetic": "ratchet.evolve.proposers.controls:CosmeticProposer",
}
SUITES = {
    "jsonl": "ratchet.evolve.suites.jsonl:JsonlSuite",
    "humaneval": "ratchet.evolve.suites.humaneval:HumanEvalSuite",
    "textarena": "ratchet.evolve.suites.textarena:TextArenaSuite",
    "noisy": "ratchet.evolve.suites.synthetic:NoisySuite",
}
GATES = {
    "paired": "ratchet.evolve.gate:PairedGate",
    "bootstrap": "ratchet.evolve.gate:BootstrapGate",
    "dominance": "ratchet.evolve.gate:DominanceGate",
}
#: Names that left these registries for the configuration that owns the component (the engine
#: imports no configuration): a config that still writes one is told the import path instead.
MOVED = {("suite", "legality"): "ratchet.autoharness.legality:LegalitySuite",
         ("proposer", "induced_rules"): "ratchet.autoharness.rules:InducedRulesProposer"}
REGISTRIES: dict[str, dict[str, str]] = {"selector": SELECTORS, "proposer": PROPOSERS, "suite": SUITES, "gate": GATES}


def resolve(kind: str, name: str) -> type:
    """The class registered as ``name`` among ``kind`` components; a clear error if unknown or missing.

    ``name`` may also be a full ``module:Class`` path, for components outside the package.
    """
    registry = REGISTRIES[kind]
    path = registry.get(name) or (name if ":" in name else None)
    if path is None and (kind, name) in MOVED:
        raise RatchetError(f"{kind} {name!r} is named by its import path now",
                           hint=f"write name: \"{MOVED[kind, name]}\"")
    if path is None:
        raise RatchetError(f"unknown {kind} {name!r}", hint=f"use one of: {', '.join(sorted(registry))}, or module:Class")
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise RatchetError(f"{kind} {name!r} is not available: module {module_name} is missing",
                               hint=f"pick another {kind}, or install the part of Ratchet that provides it") from None
        raise
    cls = getattr(module, attr, None)
    if cls is None:
        raise RatchetError(f"{kind} {name!r}: {module_name} has no {attr}")
    return cls


def options_class(cls: type) -> type[Settings]:
    """The options model of a component class."""
    explicit = getattr(cls, "Options", None)
    if isinstance(explicit, type) and issubclass(explicit, Settings):
        return explicit
    hints = typing.get_type_hints(cls.__init__, globalns=vars(inspect.getmodule(cls)))
    hinted = hints.get("options")
    if isinstance(hinted, type) and issubclass(hinted, Settings):
        return hinted
    raise RatchetError(f"component {cls.__name__} declares no options class",
                       hint="annotate __init__(self, options: SomeSettings, ctx) or set Options = SomeSettings")


#: What a component of each kind must provide (its optional capabilities declared as members).
PROTOCOLS: dict[str, type] = {"selector": Selector, "proposer": Proposer, "gate": Gate}


def protocol_members(protocol: type) -> list[str]:
    """The attributes and methods a Protocol declares (its own and its bases')."""
    names: dict[str, None] = {}
    for klass in reversed(protocol.__mro__):
        if klass is object or klass.__name__ in ("Protocol", "Generic"):
            continue
        names.update(dict.fromkeys(n for n in getattr(klass, "__annotations__", {}) if not n.startswith("_")))
        names.update(dict.fromkeys(n for n, v in vars(klass).items() if callable(v) and not n.startswith("_")))
    return list(names)


def build(kind: str, spec: ComponentSpec, ctx: EngineContext) -> Any:
    """``Cls(options, ctx)`` for a component spec; bad options fail naming the component and key,
    and a component that lacks a member its kind's Protocol declares fails naming the member."""
    cls = resolve(kind, spec.name)
    options = validate_config(options_class(cls), dict(spec.options), f"{kind} {spec.name!r} options")
    component = cls(options, ctx)
    protocol = PROTOCOLS.get(kind)
    if protocol is not None:
        missing = [m for m in protocol_members(protocol) if not hasattr(component, m)]
        if missing:
            raise RatchetError(f"{kind} {spec.name!r} lacks {', '.join(missing)}, which "
                               f"ratchet.contracts.{protocol.__name__} declares",
                               hint=f"give {cls.__name__} {', '.join(missing)} (see the Protocol's docstrings)")
    return component
