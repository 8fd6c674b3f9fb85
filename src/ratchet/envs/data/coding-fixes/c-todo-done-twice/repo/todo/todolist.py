"""A to-do list; entries are addressed by their 1-based position."""
from todo.task import Task


class TodoList:
    def __init__(self):
        self.tasks = []

    def add(self, title):
        self.tasks.append(Task(title))
        return len(self.tasks)

    def mark_done(self, number):
        if not 1 <= number <= len(self.tasks):
            raise IndexError(f"no task number {number}")
        self.tasks[number - 1].complete()

    def pending(self):
        return [t.title for t in self.tasks if not t.done]
