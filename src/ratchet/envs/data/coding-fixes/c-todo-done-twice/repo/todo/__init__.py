"""A to-do list of tasks numbered from 1."""

from todo.todolist import TodoList

__all__ = ["TodoList"]
