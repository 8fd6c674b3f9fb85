"""A priority job scheduler."""

from jobs.scheduler import Scheduler

__all__ = ["Scheduler"]
