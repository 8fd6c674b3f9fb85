"""Hand out submitted jobs most urgent first, ties in submission order."""
import heapq
from itertools import count

from jobs.job import Job


class Scheduler:
    def __init__(self):
        self._heap = []
        self._seq = count()

    def submit(self, name, priority=5):
        heapq.heappush(self._heap, Job(name, priority, next(self._seq)))

    def next(self):
        """The name of the next job to run, removed from the scheduler; None when empty."""
        if not self._heap:
            return None
        return heapq.heappop(self._heap).name

    def __len__(self):
        return len(self._heap)
