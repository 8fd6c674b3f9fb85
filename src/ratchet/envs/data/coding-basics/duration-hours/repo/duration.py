import re

UNITS = {"s": 1, "m": 60}


def parse_duration(text):
    """'5m10s' -> 310 (seconds)."""
    total = 0
    for amount, unit in re.findall(r"(\d+)([a-z])", text):
        if unit not in UNITS:
            raise ValueError(f"unknown unit {unit!r} in {text!r}")
        total += int(amount) * UNITS[unit]
    return total
