import pytest

from todo import TodoList


def test_mark_done_by_number():
    todo = TodoList()
    todo.add("buy milk")
    todo.add("call mum")
    todo.mark_done(2)
    assert todo.pending() == ["buy milk"]


def test_mark_done_out_of_range():
    with pytest.raises(IndexError):
        TodoList().mark_done(1)


def test_mark_done_twice_stays_done():
    todo = TodoList()
    todo.add("buy milk")
    todo.mark_done(1)
    todo.mark_done(1)
    assert todo.pending() == []
