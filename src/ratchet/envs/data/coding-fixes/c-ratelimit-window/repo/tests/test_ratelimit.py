from ratelimit import RateLimiter


def test_limit_within_window():
    rl = RateLimiter(limit=2, window=10)
    assert [rl.allow(t) for t in (0, 1, 5)] == [True, True, False]


def test_old_calls_expire():
    rl = RateLimiter(limit=2, window=10)
    assert [rl.allow(t) for t in (0, 1, 20)] == [True, True, True]


def test_call_leaves_window_after_exactly_window_seconds():
    rl = RateLimiter(limit=2, window=10)
    assert rl.allow(0) and rl.allow(4)
    assert rl.allow(10) is True  # the call at 0 stopped counting at 0 + 10
    assert rl.allow(12) is False
    assert rl.allow(14) is True
