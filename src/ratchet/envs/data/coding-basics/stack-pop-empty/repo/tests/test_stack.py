import pytest

from stack import Stack

def test_push_pop():
    s = Stack()
    s.push(1)
    s.push(2)
    assert s.pop() == 2 and len(s) == 1

def test_pop_empty_raises():
    with pytest.raises(IndexError, match="pop from empty stack"):
        Stack().pop()
