import pytest

from fifo import Queue


def test_dequeue_order():
    q = Queue()
    for x in "abc":
        q.enqueue(x)
    assert [q.dequeue() for _ in range(3)] == ["a", "b", "c"]


def test_peek_is_front_and_keeps_item():
    q = Queue()
    q.enqueue("first")
    q.enqueue("second")
    assert q.peek() == "first"
    assert len(q) == 2


def test_peek_empty():
    with pytest.raises(IndexError):
        Queue().peek()
