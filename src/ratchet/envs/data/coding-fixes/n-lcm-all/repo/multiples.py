from functools import reduce
from math import gcd


def lcm(a, b):
    """Least common multiple of two non-negative integers (0 if either is 0)."""
    if a == 0 or b == 0:
        return 0
    return a * b // gcd(a, b)


def lcm_all(numbers):
    """Least common multiple of all the numbers; 1 for an empty list."""
    return reduce(lcm, numbers, 0)
