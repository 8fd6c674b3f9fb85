"""A sliding-window rate limiter.

allow(now) admits a call when fewer than `limit` calls were admitted in the
window (now - window, now]; a call made at time t stops counting at
t + window. Refused calls are not recorded.
"""
from collections import deque


class RateLimiter:
    def __init__(self, limit, window):
        self.limit = limit
        self.window = window
        self._calls = deque()

    def allow(self, now):
        while self._calls and now - self._calls[0] > self.window:
            self._calls.popleft()
        if len(self._calls) >= self.limit:
            return False
        self._calls.append(now)
        return True
