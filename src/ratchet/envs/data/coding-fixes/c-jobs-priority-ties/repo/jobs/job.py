"""A unit of work with a priority.

Priority 1 is the most urgent. Among jobs of equal priority the one
submitted first (the lower seq) comes first.
"""
from dataclasses import dataclass


@dataclass(eq=False)
class Job:
    name: str
    priority: int
    seq: int

    def __lt__(self, other):
        if self.priority != other.priority:
            return self.priority < other.priority
        return self.seq > other.seq
