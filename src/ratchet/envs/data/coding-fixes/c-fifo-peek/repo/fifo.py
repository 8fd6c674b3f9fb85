"""A first-in, first-out queue.

enqueue() adds at the back, dequeue() removes and returns the front item,
peek() returns the front item without removing it. Both raise IndexError
when the queue is empty.
"""
from collections import deque


class Queue:
    def __init__(self):
        self._items = deque()

    def enqueue(self, item):
        self._items.append(item)

    def dequeue(self):
        if not self._items:
            raise IndexError("dequeue from an empty queue")
        return self._items.popleft()

    def peek(self):
        if not self._items:
            raise IndexError("peek at an empty queue")
        return self._items[-1]

    def __len__(self):
        return len(self._items)
