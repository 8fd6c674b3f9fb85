"""One to-do entry.

complete() marks the task done; completing a task that is already done
leaves it done. reopen() makes it pending again.
"""


class Task:
    def __init__(self, title):
        self.title = title
        self.done = False

    def complete(self):
        self.done = not self.done

    def reopen(self):
        self.done = False
