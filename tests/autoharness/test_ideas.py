"""The ratchet method's ideas as components: listed, chosen by the config's switches, swapped and
ablated by passing a list of one's own, with the same requests as the switches make."""

from __future__ import annotations

from pathlib import Path

from fakes import CRASHING, RULES, FakeTicTacToe, MemoryRun, fenced

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.ideas import IDEAS, ExplainFailures, Idea, Samples, components
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.models import ScriptedModel

FIXED = "```python\ndef legal_moves(cells):\n    return ['[0]', '[2]']\n```"
DOC = Path(__file__).resolve().parents[2] / "docs" / "autoharness.md"


def config(method="ratchet", **ideas) -> AutoHarnessConfig:
    return AutoHarnessConfig(method=method, eval_envs=2, eval_steps=15, iterations=3, search_seeds=[0, 1],
                             heldout_seeds=[100], transitions_per_seed=15, ideas={"samples_per_step": 2, "induce": False, **ideas})


def calls(cfg, ideas=None, reply=FIXED):
    model = ScriptedModel([reply], cycle=True)
    Synthesis(cfg, model, MemoryRun(), lambda: FakeTicTacToe(), InProcessHarness, hint_env_factory=lambda: FakeTicTacToe(hints=True),
              description=RULES.format(p=0), ideas=ideas).run_search()
    return model.calls


def names(ideas):
    return [i.name for i in ideas]


def test_the_methods_are_lists_of_components():
    assert components(config("faithful", explain_failures=True)) == []
    assert names(components(config(induce=True))) == ["scaffold", "transitions", "helper_library", "samples", "library_seed", "induce", "aliases", "novelty", "autofix",
                                           "repair", "short_examples", "body_prefix", "whole_fallback"]
    on = names(components(config(induce=True, decompose=True, fresh_roots=True, explain_failures=True, grammar=True, few_shot=True, restarts=True)))
    assert set(on) == set(IDEAS)
    assert "transitions" not in names(components(config(transitions=False)))


def test_every_idea_is_in_the_docs_table():
    text = DOC.read_text()
    for name in IDEAS:
        assert f"| `{name}`" in text, name
    assert all(cls.summary and issubclass(cls, Idea) for cls in IDEAS.values())


def test_a_list_of_no_components_is_the_faithful_loop():
    assert calls(config(), ideas=[], reply=fenced(CRASHING)) == calls(config("faithful"), reply=fenced(CRASHING))


def test_dropping_a_component_is_switching_it_off():
    full = components(config(explain_failures=True))
    ablated = [i for i in full if not isinstance(i, ExplainFailures)]
    assert calls(config(explain_failures=True), ideas=ablated) == calls(config())
    assert calls(config(explain_failures=True)) != calls(config())  # the idea does change what is asked


def test_a_swapped_component_changes_only_its_hook():
    swapped = [Samples(1) if isinstance(i, Samples) else i for i in components(config())]
    assert calls(config(), ideas=swapped) == calls(config(samples_per_step=1))
