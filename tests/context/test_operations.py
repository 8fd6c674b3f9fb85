import json

import pytest

from ratchet.context.operations import (
    Add,
    Delete,
    Merge,
    Tag,
    Update,
    apply_operations,
    op_record,
    parse_operations,
)
from ratchet.context.playbook import Item, Playbook


def _book() -> Playbook:
    book = Playbook()
    for section, text in [("s", "one"), ("s", "two"), ("t", "three")]:
        book.put(Item(book.new_id(), section, text))
    return book


def _reply(*ops) -> str:
    return json.dumps({"operations": list(ops)})


def test_every_operation_parses_to_its_type():
    ops, problems = parse_operations(_reply(
        {"op": "ADD", "section": "Game Rules", "text": "Read the rules."},
        {"op": "update", "id": "ctx-00001", "text": "uno"},
        {"op": "MERGE", "ids": ["ctx-00002", "ctx-00003"], "text": "two and three"},
        {"op": "DELETE", "id": "ctx-00001"},
        {"op": "TAG", "id": "ctx-00002", "tag": "harmful"},
    ))
    assert problems == []
    assert ops == [Add("game-rules", "Read the rules."), Update("ctx-00001", "uno"),
                   Merge(("ctx-00002", "ctx-00003"), "two and three"), Delete("ctx-00001"), Tag("ctx-00002", "harmful")]
    # The history's record form reads back to the same operations.
    assert parse_operations(_reply(*[op_record(op) for op in ops]))[0] == ops


def test_add_gets_the_next_id_and_provenance():
    out = apply_operations(_book(), [Add("s", "four")], source="task-9")
    item = out.playbook.get("ctx-00004")
    assert (item.text, item.section, item.sources, item.ops) == ("four", "s", ("task-9",), ("ADD@1",))
    assert out.applied == [{"op": "ADD", "section": "s", "text": "four", "id": "ctx-00004"}]


def test_update_changes_text_and_keeps_counters():
    book = _book()
    book.put(Item("ctx-00001", "s", "one", helpful=2))
    item = apply_operations(book, [Update("ctx-00001", "uno")], source="x").playbook.get("ctx-00001")
    assert (item.text, item.helpful, item.ops) == ("uno", 2, ("UPDATE@1",))


def test_delete_removes_and_the_id_is_never_reused():
    out = apply_operations(_book(), [Delete("ctx-00003"), Add("s", "new")]).playbook
    assert "ctx-00003" not in out and out.get("ctx-00004").text == "new"


def test_tag_counts():
    out = apply_operations(_book(), [Tag("ctx-00001", "helpful"), Tag("ctx-00001", "helpful"),
                                     Tag("ctx-00001", "harmful")]).playbook
    assert (out.get("ctx-00001").helpful, out.get("ctx-00001").harmful) == (2, 1)


def test_merge_keeps_the_oldest_id_and_sums_counters_whatever_the_order():
    book = _book()
    book.put(Item("ctx-00002", "s", "two", 1, 0, ("a",)))
    book.put(Item("ctx-00003", "t", "three", 2, 1, ("b",)))
    one = apply_operations(book, [Merge(("ctx-00003", "ctx-00002"), "both")]).playbook
    two = apply_operations(book, [Merge(("ctx-00002", "ctx-00003"), "both")]).playbook
    assert one.render() == two.render()
    merged = one.get("ctx-00002")
    assert (merged.text, merged.helpful, merged.harmful, merged.sources) == ("both", 3, 1, ("a", "b"))
    assert "ctx-00003" not in one and len(one) == 2


def test_apply_is_deterministic_and_leaves_the_input_alone():
    book = _book()
    before = book.render()
    ops = [Add("s", "x"), Merge(("ctx-00001", "ctx-00002"), "y"), Tag("ctx-00004", "helpful"), Delete("ctx-00003")]
    first, second = apply_operations(book, ops, source="t"), apply_operations(book, ops, source="t")
    assert first.playbook.render() == second.playbook.render()
    assert book.render() == before
    assert [i.id for i in first.playbook.items.values()] == ["ctx-00001", "ctx-00004"]
    assert first.playbook.version == 1


def test_an_operation_on_a_missing_item_is_a_problem_and_the_rest_apply():
    out = apply_operations(_book(), [Delete("ctx-00001"), Update("ctx-00001", "gone"), Tag("ctx-00099", "helpful"),
                                     Add("s", "kept")])
    assert [p.index for p in out.problems] == [1, 2]
    assert "ctx-00001" in out.problems[0].message
    assert out.playbook.get("ctx-00004").text == "kept"


@pytest.mark.parametrize("reply, fragment", [
    ("not json at all", "not valid JSON"),
    ('{"ops": []}', "expected an object"),
    ('[1, 2]', "expected an object"),
])
def test_a_reply_that_is_not_the_object_is_one_problem(reply, fragment):
    ops, problems = parse_operations(reply)
    assert ops == [] and len(problems) == 1 and fragment in problems[0].message and problems[0].index is None


@pytest.mark.parametrize("entry, fragment", [
    ({"op": "INSERT", "text": "x"}, "'op' must be one of"),
    ({"op": "ADD", "section": "s"}, "'text' must be a non-empty string"),
    ({"op": "ADD", "section": "s", "text": "   "}, "'text' must be a non-empty string"),
    ({"op": "ADD", "section": "s", "text": "x" * 500}, "under 400"),
    ({"op": "UPDATE", "id": "7", "text": "x"}, "item id like ctx-00012"),
    ({"op": "MERGE", "ids": ["ctx-00001"], "text": "x"}, "at least two"),
    ({"op": "MERGE", "ids": ["ctx-00001", "ctx-00001"], "text": "x"}, "twice"),
    ({"op": "TAG", "id": "ctx-00001", "tag": "great"}, "'tag' must be one of"),
    ({"op": "DELETE", "id": "ctx-00001", "text": "why"}, "unexpected text"),
    ("ADD", "must be a JSON object"),
])
def test_each_malformed_entry_is_a_problem_and_the_valid_ones_survive(entry, fragment):
    ops, problems = parse_operations(_reply({"op": "DELETE", "id": "ctx-00002"}, entry))
    assert ops == [Delete("ctx-00002")]
    assert len(problems) == 1 and problems[0].index == 1 and fragment in problems[0].message


def test_json_in_a_code_fence_or_prose_is_read():
    ops, problems = parse_operations('Here:\n```json\n{"operations": [{"op": "DELETE", "id": "ctx-00001"}]}\n```')
    assert ops == [Delete("ctx-00001")] and problems == []
    ops, _ = parse_operations('Sure! {"operations": []} hope that helps')
    assert ops == []
