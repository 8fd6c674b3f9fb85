"""With the real models: de-duplication and selection with the sentence encoder (all-MiniLM-L6-v2,
numpy), and the grammars with the embedded 0.5B. Each is skipped when its model is not pulled
(``ratchet models pull all-minilm-l6-v2`` / ``qwen2.5-coder-0.5b``)."""

import pytest

from ratchet.context.budget import select
from ratchet.context.operations import Add, Tag
from ratchet.context.playbook import Item, Playbook
from ratchet.context.similarity import Deduplicator, SentenceEmbedder


@pytest.fixture(scope="module")
def embedder():
    from ratchet.models.registry import is_verified

    if not is_verified("all-minilm-l6-v2"):
        pytest.skip("all-minilm-l6-v2 is not pulled (ratchet models pull all-minilm-l6-v2)")
    return SentenceEmbedder()


@pytest.mark.real_model
def test_paraphrases_fold_and_different_lessons_stay(embedder):
    book = Playbook()
    for text in ["Return only the function definition, without test code after it.",
                 "When the number is too high, guess lower next time."]:
        book.put(Item(book.new_id(), "s", text))
    ops, dups = Deduplicator(embedder, 0.85).rewrite(book, [
        Add("s", "Return only the function definition without any test code after it."),
        Add("s", "Handle the empty list before indexing into it."),
    ])
    assert ops[0] == Tag("ctx-00001", "helpful") and dups[0].similarity >= 0.85
    assert ops[1] == Add("s", "Handle the empty list before indexing into it.")


@pytest.mark.real_model
def test_selection_by_meaning_picks_the_related_lesson(embedder):
    book = Playbook()
    for text in ["In number guessing games, halve the remaining interval each guess.",
                 "Write Python functions with a docstring and type hints.",
                 "In word games, check the word has the required length."]:
        book.put(Item(book.new_id(), "s", text))
    sel = select(book, "I am thinking of a number between 1 and 100. Guess it.", 25, embedder=embedder)
    assert [i.id for i in sel.items] == ["ctx-00001"]


@pytest.mark.real_model
def test_the_trials_lowercase_rule_scoped_to_its_problem_enters_string_problems_only(embedder):
    """The first trial's rule, learned on HumanEval/16 (train split), at the default least
    relevance: it enters flip_case (/27) and its own problem, not has_close_elements (/0) nor
    separate_paren_groups (/1); without its origin it would not enter even its own problem."""
    from ratchet.context.config import ContextConfig
    from ratchet.context.playbook import origin_text
    from ratchet.evolve.suites.humaneval import package_data_file, read_problems

    prompts = [p["prompt"] for p in read_problems(package_data_file())[:40]]
    rule = Item("ctx-00001", "code", "Always convert the input string to lowercase", origin=origin_text(prompts[16]))
    least = ContextConfig().min_relevance
    entered = [k for k in (0, 1, 16, 27) if select(Playbook({rule.id: rule}), prompts[k], None, embedder=embedder,
                                                     min_relevance=least).items]
    assert entered == [16, 27]
    bare = Item("ctx-00001", "code", rule.text)
    assert select(Playbook({bare.id: bare}), prompts[16], None, embedder=embedder, min_relevance=least).items == []


@pytest.mark.real_model
def test_a_served_request_gets_the_trials_rule_only_where_it_applies(embedder, tmp_path):
    """``ratchet serve`` with ``relevance: encoder`` and a least relevance (as for an agent's coding
    tips; a user's preferences have none by default): the same rule, learned on HumanEval/16, goes
    into a flip_case request (/27) and stays out of has_close_elements (/0)."""
    from ratchet.context.online import ServeContext, served_messages
    from ratchet.context.playbook import origin_text
    from ratchet.evolve.suites.humaneval import package_data_file, read_problems

    prompts = [p["prompt"] for p in read_problems(package_data_file())[:40]]
    book = Playbook()
    book.put(Item(book.new_id(), "code", "Always convert the input string to lowercase", helpful=3,
                  origin=origin_text(prompts[16])))
    book.save(tmp_path / "playbook.md")

    def system(k):
        out = served_messages([{"role": "user", "content": prompts[k]}], tmp_path / "playbook.md",
                              ServeContext(min_relevance=0.4), embedder)
        return out[0]["content"] if out[0]["role"] == "system" else ""

    assert "lowercase" in system(27) and system(0) == ""


@pytest.fixture(scope="module")
def small_model():
    from ratchet.models.registry import is_verified

    if not is_verified("qwen2.5-coder-0.5b"):
        pytest.skip("qwen2.5-coder-0.5b is not pulled")
    from ratchet.models import load_model

    return load_model("local:qwen2.5-coder-0.5b")


@pytest.mark.real_model
def test_the_grammars_make_the_small_model_emit_usable_replies(small_model):
    """The 0.5B as curator and reflector, each constrained by a grammar built from the playbook's
    ids: replies parse on the first try and name no item that does not exist."""
    from ratchet.context.roles import Curator, Prompts, Reflector

    book = Playbook()
    book.put(Item(book.new_id(), "code", "Return only the function definition."))
    curator = Curator(small_model, Prompts.load(), max_retries=0, max_tokens=160)
    result = curator.curate(book, list(book.items.values()),
                            "Check for an empty list before taking its first element.", "failure (score 0)")
    assert result.attempts == 1 and result.problems == [], result.problems
    reflection = Reflector(small_model, Prompts.load(), max_tokens=120).reflect(
        "def first(xs): return the first element of xs", "first([]) raised IndexError", "failure (score 0)", [])
    assert reflection.problems == [] and reflection.tags == [], reflection.problems
